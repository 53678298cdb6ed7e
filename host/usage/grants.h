// Per-grant accelerator figures (docs/behaviour.md §8.1): a card's process rows, each placed in
// its Pod through the process's cgroup, summed per Pod and read against what the Pod was granted
// there: memory against the slice's budget, the partition's size or the whole card, compute
// against the grant's own allowance (so it can exceed 100). A figure nobody measured stays
// absent, never zero; a row that cannot be placed blanks its card's grants for the round, since
// its usage could be anybody's. Pure: the node daemon supplies the readings and the pid lookup.
#ifndef GPUSTACK_HOST_USAGE_GRANTS_H_
#define GPUSTACK_HOST_USAGE_GRANTS_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host/common/result.h"
#include "host/ledger/model.h"

namespace gpustack::usage {

// What a plugin read on one card in one round.
struct ProcessReading {
  uint32_t pid = 0;  // in the host's PID namespace
  std::string partition_id;
  std::optional<double> memory_used_mib;
  std::optional<double> cores_percent;  // of the whole card (or of the partition it runs in)
};
struct CardReading {
  std::string id;
  uint32_t index = 0;
  std::string manufacturer;
  std::optional<double> memory_used_mib;
  std::optional<double> cores_percent;
  std::optional<double> temperature_celsius;
  std::optional<double> power_watts;
  std::optional<bool> unhealthy;  // unset: the plugin does not know
  // The plugin lists the card's processes (it has the capability and was asked): no row then
  // means measured idle. False: per-Pod figures cannot be read from process rows.
  bool processes_listed = false;
  // Why not, when the plugin tried ("permission", "transient_driver_error", "truncated"...);
  // empty: it cannot list processes at all ("unsupported").
  std::string unlisted_reason;
  std::vector<ProcessReading> processes;
};

// One Pod's hold on one card: all its containers' grants there.
struct Hold {
  std::string ns;
  std::string pod;
  std::string pod_uid;
  std::string instance_name;  // the Instance's when the Pod is an Instance's, else the Pod's
  std::string instance_uid;
  std::string card_id;
  ledger::Mode mode = ledger::Mode::kNone;
  int grants = 0;  // more than one (two slices of one card): one entry, no figures of its own
  uint64_t memory_total_mib = 0;  // the grant's memory (their sum when several)
  // The grant's compute, in percent of what its process rows are read against: the card's (a
  // slice: its cores percentage), or the partition's own (100).
  double cores_allowance_percent = 100;
};

// A hold's figures in one round; unset = not measured.
struct GrantSample {
  Hold hold;
  std::string id;  // the card's, or the partition's own id under Partitioned
  uint32_t index = 0;
  std::string manufacturer;
  std::optional<double> memory_used_mib;
  std::optional<double> memory_utilization_percent;  // used / the grant's memory
  std::optional<double> cores_utilization_percent;   // against the grant's allowance
  std::optional<double> temperature_celsius;         // the whole card's
  std::optional<double> power_watts;                 // the whole card's
  std::optional<bool> unhealthy;                     // the whole card
};

// Whether a card's per-process figure ("memory" or "cores") could be measured this round.
struct Capability {
  std::string card_id;
  std::string manufacturer;
  std::string entry_point;  // "memory" | "cores"
  bool ok = false;
  std::string reason;  // empty when ok; "unsupported" ...
};

struct Attribution {
  std::vector<GrantSample> grants;       // in the holds' order
  std::vector<Capability> capabilities;  // per card read, memory then cores
  std::vector<std::string> unplaced;     // "<card>: pid <n>: <reason>: <why>", for the log
  std::vector<std::string> unlisted;     // "<card>: <reason>": its plugin failed to list processes
};

// The Pod uid a host pid runs in, or an error whose `reason` is one of cgroup.h's.
using PodOfPid = std::function<Result<std::string>(uint32_t pid)>;

// A slice's memory budget as the allocator enforces it: `memory_percentage` % of the card
// (rounded down), else the MiB asked, at most the card.
uint64_t SliceBudgetMib(uint32_t memory_percentage, uint64_t memory_mib, uint64_t card_memory_mib);
// The same from a container's limits (`<base>.sliced.memory-percentage` or `.memory-mib`);
// 0 when they name neither.
uint64_t SliceBudgetOfLimits(const nlohmann::json& limits, uint64_t card_memory_mib);
// The same from the slice's credits alone (ledger::SliceUnits in reverse), when its limits are
// not at hand: whole percents rounded down as above, MiB rounded back up to what was asked.
uint64_t SliceBudgetOfCredits(int64_t credits, uint64_t card_memory_mib);

// One charge of a Pod on a card, with its slice's budget when known (0: from its credits).
struct HeldCharge {
  ledger::Charge charge;
  uint64_t slice_budget_mib = 0;
};

// The Hold of one Pod's charges on `card`: `card_memory_mib` (its group's) for the whole card,
// the card's partition profiles for a partition's size.
Hold HoldOf(const std::vector<HeldCharge>& charges_on_card, uint64_t card_memory_mib,
            const ledger::Accelerator& card);

// Every hold's figures from the cards' readings; `node_pods` is every Pod uid the node runs (to
// tell a Pod without a grant on a card from one the node does not know).
Attribution Attribute(const std::vector<CardReading>& cards, const std::vector<Hold>& holds,
                      const std::set<std::string>& node_pods, const PodOfPid& pod_of);

}  // namespace gpustack::usage

#endif  // GPUSTACK_HOST_USAGE_GRANTS_H_
