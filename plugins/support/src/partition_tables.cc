#include "gpustack_support/partition_tables.h"

#include <algorithm>
#include <cctype>

namespace gpustack::support {
namespace {

// A profile whose instances may start at `starts` (memory-slice index) and span `length` slices.
sdk::PartitionProfile Profile(std::string name, uint64_t gib, uint32_t compute, uint32_t length,
                              std::vector<uint32_t> starts) {
  sdk::PartitionProfile p{.name = std::move(name),
                          .memory_mib = gib * 1024,
                          .compute_slices = compute,
                          .memory_slices = length,
                          .max_count = static_cast<uint32_t>(starts.size())};
  for (uint32_t start : starts) p.placements.push_back({start, length});
  return p;
}

// NVIDIA's MIG family on 7 compute and 8 memory slices (A100, H100, H200): six shapes whose
// memory differs per product. Placements from NVIDIA's MIG user guide.
PartitionTable NvidiaMig(std::string product, uint64_t one, uint64_t two, uint64_t four,
                         uint64_t eight) {
  auto gb = [](uint64_t g) { return std::to_string(g) + "gb"; };
  return {
      "nvidia",
      std::move(product),
      8,
      {Profile("1g." + gb(one), one, 1, 1, {0, 1, 2, 3, 4, 5, 6}),
       Profile("1g." + gb(two), two, 1, 2, {0, 2, 4, 6}),
       Profile("2g." + gb(two), two, 2, 2, {0, 2, 4}),
       Profile("3g." + gb(four), four, 3, 4, {0, 4}), Profile("4g." + gb(four), four, 4, 4, {0}),
       Profile("7g." + gb(eight), eight, 7, 8, {0})}};
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

const std::vector<PartitionTable>& KnownPartitionTables() {
  static const std::vector<PartitionTable> tables = {
      NvidiaMig("H100-80GB", 10, 20, 40, 80),
      NvidiaMig("A100-80GB", 10, 20, 40, 80),
      NvidiaMig("A100-40GB", 5, 10, 20, 40),
      NvidiaMig("H200", 18, 35, 71, 141),
      // T-Head PPU: the driver publishes "MIG 4g48gb" and "MIG 8g96gb"; names take the "." the
      // resource-name rules need (4g.48gb).
      {"thead",
       "PPU",
       8,
       {Profile("4g.48gb", 48, 4, 4, {0, 4}), Profile("8g.96gb", 96, 8, 8, {0})}},
  };
  return tables;
}

const PartitionTable* FindPartitionTable(std::string_view manufacturer, std::string_view product) {
  const std::string name = Lower(product);
  const auto& tables = KnownPartitionTables();
  auto find = [&](std::string_view wanted) -> const PartitionTable* {
    for (const PartitionTable& t : tables) {
      if (t.manufacturer == manufacturer && t.product == wanted) return &t;
    }
    return nullptr;
  };
  if (manufacturer == "nvidia") {
    // GH200 (Grace Hopper) has other MIG sizes: no table, so the driver's own names are used.
    if (Contains(name, "gh200")) return nullptr;
    if (Contains(name, "h200")) return find("H200");
    if (Contains(name, "h100") && Contains(name, "80gb")) return find("H100-80GB");
    if (Contains(name, "a100") && Contains(name, "80gb")) return find("A100-80GB");
    if (Contains(name, "a100") && Contains(name, "40gb")) return find("A100-40GB");
    return nullptr;
  }
  if (manufacturer == "thead" && Contains(name, "ppu")) return find("PPU");
  return nullptr;
}

}  // namespace gpustack::support
