#include "gpustack_support/injection.h"

#include <algorithm>

namespace gpustack::support {
namespace {

using sdk::Error;

void Refuse(const std::string& why) { throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, why); }

}  // namespace

void EmitGrant(const Injection& injection, const sdk::Grant& grant, std::vector<InjectedCard> cards,
               sdk::ContainerEditSink& sink) {
  if (cards.empty()) Refuse("a grant names no card");
  const bool single = grant.mode != GPUSTACK_GRANT_EXCLUSIVE;
  if (single && cards.size() != 1) {
    Refuse("a shared, sliced or partitioned grant takes exactly one card, got " +
           std::to_string(cards.size()));
  }
  if (grant.mode == GPUSTACK_GRANT_SLICED &&
      (grant.memory_limit_mib == 0 || grant.cores_percentage == 0 ||
       grant.cores_percentage > 100)) {
    Refuse("a slice needs a VRAM budget and a compute budget of 1..100 %");
  }
  if (grant.mode == GPUSTACK_GRANT_PARTITIONED && grant.partition_id.empty()) {
    Refuse("a partitioned grant names no partition");
  }
  if (grant.mode < GPUSTACK_GRANT_EXCLUSIVE || grant.mode > GPUSTACK_GRANT_PARTITIONED) {
    Refuse("unknown grant mode " + std::to_string(grant.mode));
  }
  std::sort(cards.begin(), cards.end(),
            [](const InjectedCard& a, const InjectedCard& b) { return a.index < b.index; });

  if (injection.inject_nodes) {
    for (const std::string& node : injection.shared_nodes) sink.DeviceNode("/dev/" + node);
    for (const InjectedCard& card : cards) {
      for (const std::string& node : card.nodes) sink.DeviceNode("/dev/" + node);
    }
  }
  if (!injection.visible_env.empty()) {
    std::string visible;
    if (grant.mode == GPUSTACK_GRANT_PARTITIONED && injection.partition_in_visible_env) {
      visible = grant.partition_id;
    } else {
      for (const InjectedCard& card : cards) {
        visible += (visible.empty() ? "" : ",") + card.visible;
      }
    }
    sink.Env(injection.visible_env, visible);
  }
  for (const auto& [name, value] : injection.fixed_env) sink.Env(name, value);
  if (grant.mode != GPUSTACK_GRANT_SLICED) return;
  if (!injection.memory_env.empty()) {
    const uint64_t amount =
        grant.memory_limit_mib * (uint64_t{1} << 20) / injection.memory_unit_bytes;
    sink.Env(injection.memory_env + (injection.memory_env_positional ? "0" : ""),
             std::to_string(amount) + injection.memory_suffix);
  }
  if (!injection.cores_env.empty()) {
    sink.Env(injection.cores_env, std::to_string(grant.cores_percentage));
  }
  for (const auto& [name, value] : injection.slice_env) sink.Env(name, value);
}

void EmitDeviceNodes(const Injection& injection, const std::vector<InjectedCard>& cards,
                     sdk::DeviceNodeSink& sink) {
  if (cards.empty()) return;
  for (const std::string& node : injection.shared_nodes) sink.Add({"", node});
  for (const InjectedCard& card : cards) {
    for (const std::string& node : card.nodes) sink.Add({card.id, node});
  }
}

}  // namespace gpustack::support
