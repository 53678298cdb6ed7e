// The plugins' partition tables (plugins/support) in the ledger's own types, for the ledger's
// tests, benchmarks and fuzzers: the ground truth of the upstream operator's worked examples. Test
// code only; the ledger itself never links plugin code.
#ifndef GPUSTACK_TESTS_SUPPORT_LEDGER_TABLES_H_
#define GPUSTACK_TESTS_SUPPORT_LEDGER_TABLES_H_

#include <string>
#include <string_view>
#include <vector>

#include "host/ledger/model.h"

namespace gpustack::ledger::testing {

struct PartitionTable {
  std::string manufacturer;  // "nvidia"
  std::string product;       // a readable name of the product family, e.g. "H100-80GB"
  uint32_t memory_slices = 0;
  std::vector<PartitionProfile> profiles;
};

const std::vector<PartitionTable>& KnownPartitionTables();

// The table for a product as its driver names it ("NVIDIA H100 80GB HBM3"), or nullptr.
const PartitionTable* FindPartitionTable(std::string_view manufacturer, std::string_view product);

}  // namespace gpustack::ledger::testing

#endif  // GPUSTACK_TESTS_SUPPORT_LEDGER_TABLES_H_
