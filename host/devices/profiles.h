// Partition profile tables as data: the products whose partition geometry is fixed by the
// hardware (NVIDIA's 7-compute/8-memory-slice MIG family, T-Head's PPU), with every legal
// placement on an empty card. Plugins use them where the driver cannot be asked; tests use them
// as the ground truth of the worked examples.
#ifndef GPUSTACK_HOST_DEVICES_PROFILES_H_
#define GPUSTACK_HOST_DEVICES_PROFILES_H_

#include <string>
#include <string_view>
#include <vector>

#include "host/devices/model.h"

namespace gpustack::devices {

struct PartitionTable {
  std::string manufacturer;  // "nvidia"
  std::string product;       // a readable name of the product family, e.g. "H100-80GB"
  uint32_t memory_slices = 0;
  std::vector<PartitionProfile> profiles;
};

const std::vector<PartitionTable>& KnownPartitionTables();

// The table for a product as its driver names it ("NVIDIA H100 80GB HBM3"), or nullptr.
const PartitionTable* FindPartitionTable(std::string_view manufacturer, std::string_view product);

}  // namespace gpustack::devices

#endif  // GPUSTACK_HOST_DEVICES_PROFILES_H_
