#include "tests/support/ledger_tables.h"

#include <gpustack_support/partition_tables.h>

namespace gpustack::ledger::testing {
namespace {

PartitionTable Convert(const support::PartitionTable& table) {
  PartitionTable out{table.manufacturer, table.product, table.memory_slices, {}};
  for (const sdk::PartitionProfile& p : table.profiles) {
    PartitionProfile profile{p.name,          p.memory_mib, p.compute_slices,
                             p.memory_slices, p.max_count,  {}};
    for (const gpustack_placement& placement : p.placements) {
      profile.placements.push_back({placement.start, placement.length});
    }
    out.profiles.push_back(std::move(profile));
  }
  return out;
}

}  // namespace

const std::vector<PartitionTable>& KnownPartitionTables() {
  static const std::vector<PartitionTable> tables = [] {
    std::vector<PartitionTable> out;
    for (const support::PartitionTable& t : support::KnownPartitionTables()) {
      out.push_back(Convert(t));
    }
    return out;
  }();
  return tables;
}

const PartitionTable* FindPartitionTable(std::string_view manufacturer, std::string_view product) {
  const support::PartitionTable* found = support::FindPartitionTable(manufacturer, product);
  if (found == nullptr) return nullptr;
  for (const PartitionTable& t : KnownPartitionTables()) {
    if (t.manufacturer == found->manufacturer && t.product == found->product) return &t;
  }
  return nullptr;
}

}  // namespace gpustack::ledger::testing
