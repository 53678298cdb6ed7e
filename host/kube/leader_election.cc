#include "host/kube/leader_election.h"

#include <random>
#include <thread>

#include "host/common/logging.h"
#include "host/common/process_stop.h"

namespace gpustack::kube {
namespace {

// Sleeps `period` with up to 20 % jitter, so candidates do not retry in lockstep.
bool SleepJittered(std::chrono::milliseconds period, std::stop_token stop) {
  static thread_local std::minstd_rand random(std::random_device{}());
  auto delay = period + std::chrono::milliseconds(random() % (period.count() / 5 + 1));
  return SleepUntil(std::chrono::steady_clock::now() + delay, stop);
}

}  // namespace

std::string FormatMicroTime(std::chrono::system_clock::time_point time) {
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  size_t n = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof(text) - n, ".%06lldZ", static_cast<long long>(micros % 1000000));
  return text;
}

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config)
    : client_(client), config_(std::move(config)) {}

LeaderElector::Attempt LeaderElector::TryAcquireOrRenew(std::chrono::milliseconds budget) {
  // Every call is bounded by what is left of `budget` and never retried: a leader must know
  // within its renew deadline whether it still leads.
  auto deadline = std::chrono::steady_clock::now() + budget;
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
  };
  auto log = Logger("leader");
  int64_t lease_seconds = LeaseSeconds();
  std::string now = FormatMicroTime(std::chrono::system_clock::now());
  const ResourceType leases = resources::Leases();
  std::string path = ObjectPath(leases, config_.lease_namespace, config_.lease_name);
  if (left().count() <= 0) {
    return Attempt::kFailed;
  }
  auto current = client_.Request("GET", path, nullptr, "", false, left());
  if (!current) {
    if (!IsNotFound(current.failure())) {
      log->warn("reading Lease {}/{}: {}", config_.lease_namespace, config_.lease_name,
                current.error());
      return Attempt::kFailed;
    }
    Json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
        {"spec",
         {{"holderIdentity", config_.identity},
          {"leaseDurationSeconds", lease_seconds},
          {"acquireTime", now},
          {"renewTime", now},
          {"leaseTransitions", 0}}}};
    if (left().count() <= 0) {
      return Attempt::kFailed;
    }
    auto created = client_.Request("POST", CollectionPath(leases, config_.lease_namespace), &lease,
                                   "application/json", false, left());
    if (!created) {
      return IsAlreadyExists(created.failure()) ? Attempt::kHeldByOther : Attempt::kFailed;
    }
    observed_spec_ = (*created)["spec"];
    observed_at_ = std::chrono::steady_clock::now();
    return Attempt::kAcquired;
  }
  Json& lease = *current;
  Json spec = lease.contains("spec") && lease["spec"].is_object() ? lease["spec"] : Json::object();
  if (spec != observed_spec_) {
    observed_spec_ = spec;
    observed_at_ = std::chrono::steady_clock::now();
  }
  std::string holder = spec.value("holderIdentity", "");
  reported_leader_ = holder;
  int64_t held_for = spec.value("leaseDurationSeconds", lease_seconds);
  bool expired = std::chrono::steady_clock::now() > observed_at_ + std::chrono::seconds(held_for);
  if (!holder.empty() && holder != config_.identity && !expired) {
    return Attempt::kHeldByOther;
  }
  Json next = spec;
  next["holderIdentity"] = config_.identity;
  next["leaseDurationSeconds"] = lease_seconds;
  next["renewTime"] = now;
  if (holder != config_.identity) {
    next["acquireTime"] = now;
    next["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  lease["spec"] = next;
  if (left().count() <= 0) {
    return Attempt::kFailed;
  }
  // The resourceVersion read above makes this a compare-and-swap: two candidates that both
  // saw an expired Lease cannot both win.
  auto updated = client_.Request("PUT", path, &lease, "application/json", false, left());
  if (!updated) {
    if (IsConflict(updated.failure())) {
      return holder == config_.identity ? Attempt::kFailed : Attempt::kHeldByOther;
    }
    log->warn("updating Lease {}/{}: {}", config_.lease_namespace, config_.lease_name,
              updated.error());
    return Attempt::kFailed;
  }
  observed_spec_ = (*updated)["spec"];
  observed_at_ = std::chrono::steady_clock::now();
  reported_leader_ = config_.identity;
  return Attempt::kAcquired;
}

int64_t LeaderElector::LeaseSeconds() const {
  // Rounded up: a shorter lease than configured could expire before the leader steps down.
  auto ms = config_.lease_duration.count();
  return std::max<int64_t>(1, (ms + 999) / 1000);
}

void LeaderElector::Release() {
  const ResourceType leases = resources::Leases();
  auto current =
      client_.Request("GET", ObjectPath(leases, config_.lease_namespace, config_.lease_name),
                      nullptr, "", false, config_.renew_deadline);
  if (!current || !(*current)["spec"].is_object() ||
      (*current)["spec"].value("holderIdentity", "") != config_.identity) {
    return;
  }
  std::string now = FormatMicroTime(std::chrono::system_clock::now());
  Json& spec = (*current)["spec"];
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["renewTime"] = now;
  spec["acquireTime"] = now;
  if (auto released =
          client_.Request("PUT", ObjectPath(leases, config_.lease_namespace, config_.lease_name),
                          &*current, "application/json", false, config_.renew_deadline);
      !released) {
    Logger("leader")->warn("releasing Lease {}/{}: {}", config_.lease_namespace, config_.lease_name,
                           released.error());
  }
}

Status LeaderElector::Run(std::stop_token stop, const LeaderCallbacks& callbacks) {
  if (config_.lease_name.empty() || config_.lease_namespace.empty() || config_.identity.empty()) {
    return Error{"leader election needs a Lease namespace, a Lease name and an identity"};
  }
  if (!(config_.lease_duration > config_.renew_deadline &&
        config_.renew_deadline > config_.retry_period && config_.retry_period.count() > 0)) {
    return Error{"leader election needs lease duration > renew deadline > retry period > 0"};
  }
  auto log = Logger("leader");
  std::string last_leader;
  auto report_leader = [&] {
    if (reported_leader_ != last_leader) {
      last_leader = reported_leader_;
      if (!last_leader.empty() && callbacks.on_new_leader) {
        callbacks.on_new_leader(last_leader);
      }
    }
  };
  // Campaign.
  bool acquired = false;
  auto renewed_at = std::chrono::steady_clock::now();
  while (!stop.stop_requested()) {
    renewed_at = std::chrono::steady_clock::now();  // a win counts from when it was sent
    acquired = TryAcquireOrRenew(config_.renew_deadline) == Attempt::kAcquired;
    report_leader();
    if (acquired) {
      break;
    }
    SleepJittered(config_.retry_period, stop);
  }
  if (stop.stop_requested()) {
    if (acquired) {
      Release();  // won just as we were told to stop: let a successor in at once
    }
    return Ok{};
  }
  leader_ = true;
  reported_leader_ = config_.identity;
  report_leader();
  log->info("{} leads {}/{}", config_.identity, config_.lease_namespace, config_.lease_name);
  std::jthread leading;
  if (callbacks.on_started_leading) {
    leading = std::jthread([&callbacks](std::stop_token s) { callbacks.on_started_leading(s); });
  }
  // Lead: renew until the deadline passes without a successful renewal. A renewal counts from
  // when it was sent, and no call outlives the deadline, so we stop leading before any other
  // candidate can consider the Lease expired (lease duration > renew deadline).
  while (!stop.stop_requested()) {
    if (!SleepJittered(config_.retry_period, stop)) {
      break;
    }
    auto sent_at = std::chrono::steady_clock::now();
    auto budget = std::chrono::duration_cast<std::chrono::milliseconds>(
        renewed_at + config_.renew_deadline - sent_at);
    Attempt attempt = budget.count() > 0 ? TryAcquireOrRenew(budget) : Attempt::kFailed;
    if (attempt == Attempt::kAcquired) {
      renewed_at = sent_at;
    } else if (attempt == Attempt::kHeldByOther) {
      report_leader();
      log->warn("{} lost {}/{} to {}: stepping down", config_.identity, config_.lease_namespace,
                config_.lease_name, reported_leader_);
      break;
    } else if (std::chrono::steady_clock::now() - renewed_at >= config_.renew_deadline) {
      log->warn("{} could not renew {}/{} within {} ms: stepping down", config_.identity,
                config_.lease_namespace, config_.lease_name, config_.renew_deadline.count());
      break;
    }
  }
  leader_ = false;
  if (leading.joinable()) {
    leading.request_stop();
    leading.join();
  }
  if (stop.stop_requested()) {
    Release();
  }
  if (callbacks.on_stopped_leading) {
    callbacks.on_stopped_leading();
  }
  return Ok{};
}

}  // namespace gpustack::kube
