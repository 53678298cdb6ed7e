// Partition geometry fixed by the hardware, as data: NVIDIA's MIG family (7 compute, 8 memory
// slices) per product, and T-Head's PPU. Plugins name what the driver offers from these tables
// (the driver's own profile names carry variants that are not resource names); the host's tests
// use them as the ground truth of the worked examples.
#ifndef GPUSTACK_SUPPORT_PARTITION_TABLES_H_
#define GPUSTACK_SUPPORT_PARTITION_TABLES_H_

#include <gpustack/plugin_types.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace gpustack::support {

struct PartitionTable {
  std::string manufacturer;  // "nvidia"
  std::string product;       // a readable name of the product family, e.g. "H100-80GB"
  uint32_t memory_slices = 0;
  std::vector<sdk::PartitionProfile> profiles;  // every legal placement on an empty card
};

const std::vector<PartitionTable>& KnownPartitionTables();

// The table for a product as its driver names it ("NVIDIA H100 80GB HBM3"), or nullptr.
const PartitionTable* FindPartitionTable(std::string_view manufacturer, std::string_view product);

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_PARTITION_TABLES_H_
