// `GET .../instances/<name>/metrics` (docs/behaviour.md §8.1): one current sample of what the
// Instance's Pod uses against what it was given, nothing stored. CPU, memory and storage come
// from the kubelet's stats summary (through the apiserver's node proxy, cached per node and
// fetched once however many ask at the same time), or from metrics.k8s.io when the kubelet does
// not answer; the accelerators from the node daemon's latest round (`/monitor/snapshot`, through
// the apiserver's Pod proxy), only those the Pod's allocation record names, and only while that
// round is fresher than three of its periods. Figures nobody measured are absent, never zero.
#ifndef GPUSTACK_HOST_OPERATOR_INSTANCE_METRICS_H_
#define GPUSTACK_HOST_OPERATOR_INSTANCE_METRICS_H_

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "host/common/result.h"
#include "host/https/server.h"
#include "host/kube/client.h"
#include "host/usage/pod_usage.h"

namespace gpustack::op {

using Json = nlohmann::json;

// What the sources gave for one Instance's Pod; an unset source was not asked.
struct MetricsSources {
  const Json* pod = nullptr;  // the Instance's Pod (name, namespace, part-of = its uid); null: none
  std::optional<Result<usage::PodUse>> kubelet;
  std::optional<Result<usage::PodUse>> metrics_api;
  std::optional<Result<Json>> snapshot;  // the node daemon's /monitor/snapshot
};

// Whether the Pod ever ran a container (a Pod only scheduled, or waiting for its image, did not).
bool PodStarted(const Json& pod);

// The `accelerators` of the sample from a snapshot: the Pod's grants on the cards its allocation
// record names; nullopt when the snapshot is unusable (not sampled, older than 3 periods).
std::optional<Json> AcceleratorsFrom(const Json& snapshot, const Json& pod);

// Pure: the InstanceMetrics object, or a 503's Error naming every source that failed.
Result<Json> InstanceMetricsObject(const Json& instance, const MetricsSources& sources,
                                   std::chrono::system_clock::time_point now);

struct InstanceMetricsOptions {
  std::string system_namespace = "gpustack-system";  // where the node daemons run
  std::string device_manager_selector = "app.kubernetes.io/component=device-manager";
  std::chrono::seconds kubelet_cache{15};
  // A kubelet that did not answer is not asked again for this long: each ask can take `timeout`.
  std::chrono::seconds kubelet_failure_cache{5};
  std::chrono::milliseconds timeout{3000};  // each source's
  // Requests computed at once; more are told 429 to retry. They run on the HTTPS server's
  // threads, which the admission webhooks share: a node that does not answer must not take
  // them all.
  int max_in_flight = 2;
};

// The I/O around InstanceMetricsObject, on the v1 API's threads.
class InstanceMetricsService {
 public:
  InstanceMetricsService(kube::Client& client, InstanceMetricsOptions options);
  // `instance`: the served object the API found.
  https::Response Get(const Json& instance);

 private:
  Result<Json> KubeletSummary(const std::string& node);
  Result<Json> Snapshot(const std::string& node);

  kube::Client& client_;
  InstanceMetricsOptions options_;
  // Per node: the latest summary and when it came; a fetch in flight is waited for, not repeated.
  struct Cached {
    std::chrono::steady_clock::time_point at{};
    std::optional<Result<Json>> summary;
    bool fetching = false;
  };
  std::mutex mutex_;
  std::condition_variable fetched_;
  std::map<std::string, Cached> summaries_;
  std::atomic<int> in_flight_{0};
};

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_INSTANCE_METRICS_H_
