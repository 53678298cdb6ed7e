// Node specs of the upstream operator's worked examples, built from the partition tables.
#ifndef GPUSTACK_HOST_LEDGER_TESTS_FIXTURES_H_
#define GPUSTACK_HOST_LEDGER_TESTS_FIXTURES_H_

#include <string>
#include <vector>

#include "host/ledger/ledger.h"
#include "tests/support/ledger_tables.h"

namespace gpustack::ledger::testing {

inline Accelerator Card(const std::string& id, uint32_t index, uint32_t logical_count = 128,
                        bool overcommit = true) {
  Accelerator a;
  a.id = id;
  a.index = index;
  a.physical_indexes = {index};
  a.logical_count = logical_count;
  a.cores_percentage_overcommit = overcommit;
  return a;
}

inline Group NvidiaGroup(const std::string& id, const std::string& name, uint64_t mib, int cards,
                         const std::string& uuid_prefix) {
  Group g{id, "nvidia", name, mib, 0, "580.159.03", "13.0", "8.6", "Ampere", {}};
  for (int i = 0; i < cards; ++i) {
    g.accelerators.push_back(Card(uuid_prefix + std::to_string(i), static_cast<uint32_t>(i)));
  }
  return g;
}

inline DevicesSpec A10gNode() {
  return {{NvidiaGroup("a10g", "NVIDIA A10G", 24576, 1, "GPU-a10g-")}};
}

inline DevicesSpec T4Node(int cards, const std::string& prefix) {
  return {{NvidiaGroup("tesla-t4", "Tesla T4", 16384, cards, prefix)}};
}

// 8 x H100 80GB; cards [0, partitioned) are in MIG mode with the H100 table's profiles.
inline DevicesSpec H100Node(int partitioned) {
  Group g = NvidiaGroup("h100-80gb-hbm3", "NVIDIA H100 80GB HBM3", 81920, 8, "GPU-h100-");
  const PartitionTable* table = FindPartitionTable("nvidia", g.name);
  for (int i = 0; i < partitioned; ++i) {
    g.accelerators[i].profiles = table->profiles;
    g.accelerators[i].logical_count = 0;
  }
  return {{g}};
}

inline const ResourceKind& Nvidia() {
  static const ResourceKind kind{"nvidia", "nvidia.com/gpu", "mig"};
  return kind;
}

inline Request Sliced(uint32_t percent, uint64_t card_mib = 81920, uint32_t cores = 100) {
  Request r;
  r.manufacturer = "nvidia";
  r.base = "nvidia.com/gpu";
  r.mode = Mode::kSliced;
  r.memory_percentage = percent;
  r.cores_percentage = cores;
  r.units = SliceUnits(percent, 0, card_mib);
  return r;
}

inline Request Partition(const std::string& profile, uint64_t profile_mib,
                         uint64_t card_mib = 81920) {
  Request r;
  r.manufacturer = "nvidia";
  r.base = "nvidia.com/gpu";
  r.mode = Mode::kPartitioned;
  r.profile = profile;
  r.units = PartitionUnits(profile_mib, card_mib);
  return r;
}

inline Request Whole(Mode mode, uint32_t count) {
  Request r;
  r.manufacturer = "nvidia";
  r.base = "nvidia.com/gpu";
  r.mode = mode;
  r.count = count;
  return r;
}

}  // namespace gpustack::ledger::testing

#endif  // GPUSTACK_HOST_LEDGER_TESTS_FIXTURES_H_
