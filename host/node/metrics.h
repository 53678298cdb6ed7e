// The Prometheus exposition of the node daemon (docs/behaviour.md §8.2): per accelerator held by a
// Pod, the gauges of its card, labelled with the Pod (`instance_name`, never `instance`) and the
// card; a figure the plugin could not measure is left out, never written as zero. Pure text
// rendering.
#ifndef GPUSTACK_HOST_NODE_METRICS_H_
#define GPUSTACK_HOST_NODE_METRICS_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "host/ledger/model.h"
#include "host/runtime/node_runtime.h"

namespace gpustack::node {

// A container's hold on a card, with the Pod it belongs to.
struct Holder {
  std::string ns;
  std::string pod;
  std::string pod_uid;
  std::string card_id;
  ledger::Mode mode = ledger::Mode::kNone;
};

struct MetricsInput {
  std::string node;
  bool sampled = false;  // a round ran; false: only the collector verdict is published
  runtime::SampleRound round;
  std::vector<Holder> holders;
};

// Text exposition format 0.0.4.
std::string RenderMetrics(const MetricsInput& input);

// The latest round as JSON (`/monitor/snapshot`), absent figures left out.
nlohmann::json SnapshotJson(const MetricsInput& input);

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_METRICS_H_
