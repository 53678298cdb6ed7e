// Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: a candidate takes
// the Lease when it is free or when its holder has not renewed it for leaseDurationSeconds
// (measured on the candidate's own clock from when it last saw the record change); the leader
// renews every retry period and steps down if it cannot renew within the renew deadline. On
// shutdown the leader releases the Lease, so a successor need not wait for it to expire.
#ifndef GPUSTACK_HOST_KUBE_LEADER_ELECTION_H_
#define GPUSTACK_HOST_KUBE_LEADER_ELECTION_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <stop_token>
#include <string>

#include "host/kube/client.h"

namespace gpustack::kube {

struct LeaderElectionConfig {
  std::string lease_namespace = {};
  std::string lease_name = {};
  std::string identity = {};  // unique per candidate, e.g. the Pod name
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
};

struct LeaderCallbacks {
  // Runs on its own thread while this candidate leads; `stop` is requested when it stops leading.
  std::function<void(std::stop_token stop)> on_started_leading = {};
  std::function<void()> on_stopped_leading = {};
  std::function<void(const std::string& identity)> on_new_leader = {};
};

class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderElectionConfig config);

  // Campaigns, then leads until leadership is lost or `stop` is requested (then releases the
  // Lease). Returns when it no longer leads. A config error (durations that cannot work) is an
  // Error before anything starts.
  Status Run(std::stop_token stop, const LeaderCallbacks& callbacks);
  bool IsLeader() const { return leader_; }

 private:
  enum class Attempt { kAcquired, kHeldByOther, kFailed };
  Attempt TryAcquireOrRenew(std::chrono::milliseconds budget);
  int64_t LeaseSeconds() const;
  void Release();

  Client& client_;
  LeaderElectionConfig config_;
  std::atomic<bool> leader_{false};
  Json observed_spec_;
  std::chrono::steady_clock::time_point observed_at_{};
  std::string reported_leader_;
};

// A MicroTime (RFC 3339 with microseconds, UTC), as Lease times are written.
std::string FormatMicroTime(std::chrono::system_clock::time_point time);

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_LEADER_ELECTION_H_
