#include "host/operator/instance_metrics.h"

#include <set>

#include "host/api/http.h"
#include "host/common/json_path.h"
#include "host/kube/resource.h"
#include "host/ledger/allocated.h"

namespace gpustack::op {
namespace {

// The cards a Pod's allocation record names.
std::set<std::string> RecordedCards(const Json& pod) {
  std::set<std::string> cards;
  auto record = ledger::AllocatedRecordOf(pod);
  if (!record) return cards;
  for (const ledger::RecordedAllocation& entry : *record) {
    if (!entry.allocation) continue;
    for (const ledger::Charge& c : entry.allocation->charges) cards.insert(c.accelerator_id);
  }
  return cards;
}

Error Unavailable(std::string message) {
  return Error{std::move(message), Code::kUnavailable, 503, "ServiceUnavailable"};
}

}  // namespace

bool PodStarted(const Json& pod) {
  const Json& statuses = JsonAt(pod, {"status", "containerStatuses"});
  if (!statuses.is_array()) return false;
  for (const Json& s : statuses) {
    if (!s.is_object()) continue;
    for (const char* key : {"state", "lastState"}) {
      const Json state = s.value(key, Json::object());
      if (state.is_object() && (state.contains("running") || state.contains("terminated")))
        return true;
    }
  }
  return false;
}

std::optional<Json> AcceleratorsFrom(const Json& snapshot, const Json& pod) {
  // What the daemon answered is read without trusting its shape: anything odd is no round.
  const Json& sampled = JsonAt(snapshot, {"sampled"});
  const Json& age = JsonAt(snapshot, {"ageSeconds"});
  const Json& period = JsonAt(snapshot, {"periodSeconds"});
  const Json& grants = JsonAt(snapshot, {"grants"});
  if (!sampled.is_boolean() || !sampled.get<bool>() || !age.is_number() || !period.is_number() ||
      !grants.is_array())
    return std::nullopt;
  if (period.get<double>() <= 0 || age.get<double>() > 3 * period.get<double>())
    return std::nullopt;  // a round too old to be today's
  const std::string uid = StringAt(pod, {"metadata", "uid"});
  const std::set<std::string> cards = RecordedCards(pod);
  Json out = Json::array();
  for (const Json& g : grants) {
    if (!g.is_object() || StringAt(g, {"podUID"}) != uid || !cards.contains(StringAt(g, {"card"})))
      continue;
    Json entry = g;
    for (const char* key : {"namespace", "pod", "podUID", "card"}) entry.erase(key);
    out.push_back(std::move(entry));
  }
  return out;
}

Result<Json> InstanceMetricsObject(const Json& instance, const MetricsSources& sources,
                                   std::chrono::system_clock::time_point now) {
  const std::string timestamp = kube::FormatTime(now);
  Json sample;
  if (sources.pod == nullptr || !PodStarted(*sources.pod)) {
    // Never started: what it was given, and nothing used.
    const usage::PodTotals totals = sources.pod != nullptr ? usage::TotalsOf(*sources.pod)
                                                           : usage::TotalsOfInstanceSpec(instance);
    sample = usage::SampleJson(timestamp, totals, usage::PodUse{0, 0, 0}, Json::array());
  } else {
    std::optional<usage::PodUse> use;
    std::string failures;
    for (const auto& [source, name] : {std::pair{&sources.kubelet, "the kubelet's stats summary"},
                                       std::pair{&sources.metrics_api, "metrics.k8s.io"}}) {
      if (use || !source->has_value()) continue;
      if ((*source)->ok()) {
        use = ***source;
      } else {
        failures += std::string(failures.empty() ? "" : "; ") + name + ": " + (*source)->error();
      }
    }
    if (!use) {
      return Unavailable("cannot read what Pod " + StringAt(*sources.pod, {"metadata", "name"}) +
                         " uses: " + (failures.empty() ? "no source was asked" : failures));
    }
    std::optional<Json> accelerators;
    if (sources.snapshot && sources.snapshot->ok())
      accelerators = AcceleratorsFrom(**sources.snapshot, *sources.pod);
    sample = usage::SampleJson(timestamp, usage::TotalsOf(*sources.pod), *use, accelerators);
  }
  return Json{{"apiVersion", "worker.gpustack.ai/v1"},
              {"kind", "InstanceMetrics"},
              {"metadata",
               {{"name", StringAt(instance, {"metadata", "name"})},
                {"namespace", StringAt(instance, {"metadata", "namespace"})},
                {"creationTimestamp", timestamp}}},
              {"sample", sample}};
}

InstanceMetricsService::InstanceMetricsService(kube::Client& client, InstanceMetricsOptions options)
    : client_(client), options_(std::move(options)) {}

https::Response InstanceMetricsService::Get(const Json& instance) {
  if (in_flight_.fetch_add(1) >= options_.max_in_flight) {
    in_flight_.fetch_sub(1);
    https::Response busy = api::StatusResponse(
        429, "TooManyRequests", "too many metrics requests in flight; retry in a second");
    busy.headers.emplace_back("Retry-After", "1");
    return busy;
  }
  struct Leave {
    std::atomic<int>& count;
    ~Leave() { count.fetch_sub(1); }
  } leave{in_flight_};
  const std::string ns = StringAt(instance, {"metadata", "namespace"});
  const std::string name = StringAt(instance, {"metadata", "name"});
  const std::string uid = StringAt(instance, {"metadata", "uid"});
  MetricsSources sources;
  Json pod;
  // A list by name: the worker may list and watch Pods, not get them.
  kube::ListOptions named;
  named.field_selector = "metadata.name=" + name;
  auto got = client_.List(kube::resources::Pods(), ns, named);
  if (!got)
    return api::ErrorResponse(got.failure().WithContext("cannot read the Instance's Pod: "));
  for (Json& candidate : got->items) {
    // Only the Instance's own Pod: same name and namespace, and part of this incarnation.
    if (StringAt(candidate, {"metadata", "labels", usage::kPartOfLabel}) == uid) {
      pod = std::move(candidate);
      sources.pod = &pod;
    }
  }
  if (sources.pod != nullptr && PodStarted(pod)) {
    const std::string node = StringAt(pod, {"spec", "nodeName"});
    const std::string pod_uid = StringAt(pod, {"metadata", "uid"});
    auto summary = KubeletSummary(node);
    if (summary) {
      auto by_uid = usage::UseFromSummary(*summary);
      if (by_uid) {
        auto it = by_uid->find(pod_uid);
        sources.kubelet = it != by_uid->end() ? it->second : usage::PodUse{};
      } else {
        sources.kubelet = by_uid.failure();
      }
    } else {
      sources.kubelet = summary.failure();
    }
    if (!sources.kubelet->ok()) {
      auto metrics =
          client_.Request("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/" + ns + "/pods/" + name,
                          nullptr, "application/json", false, options_.timeout);
      sources.metrics_api =
          metrics ? usage::UseFromPodMetrics(*metrics) : Result<usage::PodUse>(metrics.failure());
    }
    sources.snapshot = Snapshot(node);
  }
  auto object = InstanceMetricsObject(instance, sources, std::chrono::system_clock::now());
  if (!object) return api::StatusResponse(503, "ServiceUnavailable", object.error());
  return api::JsonResponse(*object);
}

Result<Json> InstanceMetricsService::KubeletSummary(const std::string& node) {
  std::unique_lock lock(mutex_);
  Cached& cached = summaries_[node];
  fetched_.wait(lock, [&] { return !cached.fetching; });
  const auto now = std::chrono::steady_clock::now();
  if (cached.summary &&
      now - cached.at < (cached.summary->ok()
                             ? options_.kubelet_cache
                             : std::chrono::seconds(options_.kubelet_failure_cache)))
    return *cached.summary;
  cached.fetching = true;
  lock.unlock();
  Result<Json> summary = client_.Request("GET", "/api/v1/nodes/" + node + "/proxy/stats/summary",
                                         nullptr, "application/json", false, options_.timeout);
  lock.lock();
  cached.fetching = false;
  cached.summary = summary;
  cached.at = now;
  fetched_.notify_all();
  return summary;
}

Result<Json> InstanceMetricsService::Snapshot(const std::string& node) {
  kube::ListOptions on_node;
  on_node.label_selector = options_.device_manager_selector;
  on_node.field_selector = "spec.nodeName=" + node;
  auto daemons = client_.List(kube::resources::Pods(), options_.system_namespace, on_node);
  if (!daemons) return daemons.failure();
  for (const Json& daemon : daemons->items) {
    if (StringAt(daemon, {"status", "phase"}) != "Running") continue;
    int port = 32443;
    const Json& containers = JsonAt(daemon, {"spec", "containers"});
    for (const Json& c : containers.is_array() ? containers : Json::array()) {
      const Json& ports = JsonAt(c, {"ports"});
      for (const Json& p : ports.is_array() ? ports : Json::array()) {
        if (p.is_object() && p.value("name", "") == "metrics")
          port = p.value("containerPort", port);
      }
    }
    return client_.Request("GET",
                           "/api/v1/namespaces/" + options_.system_namespace +
                               "/pods/https:" + StringAt(daemon, {"metadata", "name"}) + ":" +
                               std::to_string(port) + "/proxy/monitor/snapshot",
                           nullptr, "application/json", false, options_.timeout);
  }
  return Error{"no device manager runs on node " + node, Code::kUnavailable};
}

}  // namespace gpustack::op
