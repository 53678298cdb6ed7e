// What the ledgers add up to: an InstanceType's four capacity views (and the CPU view), the node
// counting keys and per-card fit labels the worker publishes, and the device plugin's advertised
// token counts. Pure functions of NodeLedgers.
#ifndef GPUSTACK_HOST_LEDGER_VIEWS_H_
#define GPUSTACK_HOST_LEDGER_VIEWS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "host/ledger/ledger.h"

namespace gpustack::ledger {

struct ResourceView {
  int64_t once_max_request = 0;
  int64_t remaining = 0;
  int64_t capacity = 0;
  bool operator==(const ResourceView&) const = default;
};

struct PoolViews {
  ResourceView exclusive;  // EX: whole cards
  // SH: ownership slots (docs/decisions.md D1: onceMax = most free on one card)
  ResourceView shared;
  ResourceView sliced;  // SL: VRAM percent
  // PT: instances (docs/decisions.md D2: onceMax is 0 or 1)
  ResourceView partitioned;
  std::vector<ProfileCount> allocated_profiles;  // zero entries omitted
  std::vector<ProfileCount> remaining_profiles;  // every offered profile, zeros included
  bool operator==(const PoolViews&) const = default;
};

// The views of the pool made of the cards of one model (group id) of one manufacturer across
// `nodes`. Each card counts on one side: unpartitioned cards in EX/SH/SL, partitioned in PT.
PoolViews ComputePoolViews(const std::vector<const NodeLedger*>& nodes,
                           std::string_view manufacturer, std::string_view group_id);

// "1/1 10/10 100/100 0/0": onceMaxRequest/remaining of EX SH SL PT, as kubectl prints them.
std::string FormatViews(const PoolViews& views);

struct CpuNode {
  int64_t cores = 0;
  int64_t requested = 0;
};
// CPU view (docs/decisions.md D3): onceMax = the most free cores on one node, remaining = all free
// cores.
ResourceView CpuView(const std::vector<CpuNode>& nodes);

// Node extended resources the worker publishes per manufacturer (docs/behaviour.md §3.6), keyed
// "<base>.sliced.units" etc. Sliced keys only when the node has a sliceable card, partitioned
// keys only when it has a partitioned card.
std::map<std::string, int64_t> CountingKeys(const NodeLedger& node, const ResourceKind& kind);

// Device-plugin tokens per resource (docs/behaviour.md §6.1): <base>, .shared, .sliced,
// .partitioned.
std::map<std::string, int64_t> AdvertisedCounts(const NodeLedger& node, const ResourceKind& kind);

// Per-model fit labels (docs/behaviour.md §3.7), keyed by the full label name: the most free units
// of a card that can still take a slice, the cards with a free shared slot, and (docs/decisions.md
// D1: a shared request takes N slots of one card) the most free slots on one card.
std::map<std::string, int64_t> FitLabels(const NodeLedger& node);

}  // namespace gpustack::ledger

#endif  // GPUSTACK_HOST_LEDGER_VIEWS_H_
