// The node daemon's figures (docs/behaviour.md §8.2): one sampling round turned into the
// Prometheus exposition (`/metrics`) and the JSON the worker reads (`/monitor/snapshot`). Per
// Pod: its totals and use; per grant: its own share of its card (usage/grants.h); per card and
// figure: whether the plugin could measure it per process. A figure nobody measured is left out,
// never written as zero, and nothing is carried over from an earlier round. Pure text rendering.
#ifndef GPUSTACK_HOST_NODE_METRICS_H_
#define GPUSTACK_HOST_NODE_METRICS_H_

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "host/ledger/ledger.h"
#include "host/runtime/node_runtime.h"
#include "host/usage/grants.h"
#include "host/usage/pod_usage.h"

namespace gpustack::node {

// One Pod the node daemon reports on: an Instance's, or one holding a card.
struct PodFigures {
  std::string ns;
  std::string pod;
  std::string pod_uid;
  std::string instance_name;  // the Instance's when the Pod is an Instance's, else the Pod's
  std::string instance_uid;
  usage::PodTotals totals;
  usage::PodUse use;
};

struct MetricsInput {
  std::string node;
  bool sampled = false;  // a round ran; false: only the collector verdicts are published
  std::chrono::system_clock::time_point sampled_at{};
  std::chrono::milliseconds period{15'000};
  runtime::SampleRound round;
  usage::Attribution attribution;
  std::vector<PodFigures> pods;
  // The kubelet's stats summary: unset when not asked (no Pod to report on).
  std::optional<bool> kubelet_ok;
  double kubelet_seconds = 0;
};

// Every Pod's holds on the node's cards, from the ledger's allocations and the node's Pods (by
// uid): a Pod's charges on one card together, whichever of its containers has them, each slice
// with the budget its container's limits ask (as the allocator enforced it). The SSH sidecar's
// view of its Pod's cards (Mode::kNone) holds nothing; a Pod not in `pods` is left out.
std::vector<usage::Hold> HoldsOf(const ledger::NodeLedger& ledger,
                                 const std::map<std::string, const nlohmann::json*>& pods);

// The cards' readings as usage::Attribute takes them.
std::vector<usage::CardReading> ReadingsOf(const runtime::SampleRound& round);

// Text exposition format 0.0.4.
std::string RenderMetrics(const MetricsInput& input);

// The latest round as JSON (`/monitor/snapshot`): the cards, each grant with the Pod it belongs
// to, and how old the round is at `now` (the worker drops one older than three periods).
nlohmann::json SnapshotJson(const MetricsInput& input, std::chrono::system_clock::time_point now =
                                                           std::chrono::system_clock::now());

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_METRICS_H_
