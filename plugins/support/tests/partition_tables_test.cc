// The partition tables the NVIDIA and T-Head plugins name driver profiles from.
#include <gpustack_support/partition_tables.h>

#include <gtest/gtest.h>

#include <vector>

namespace gpustack::support {
namespace {

TEST(PartitionTables, EveryPlacementIsLegalAndCountsMatch) {
  for (const PartitionTable& table : KnownPartitionTables()) {
    for (const sdk::PartitionProfile& p : table.profiles) {
      EXPECT_EQ(p.max_count, p.placements.size()) << table.product << " " << p.name;
      EXPECT_GT(p.memory_mib, 0u);
      // Each placement lies on the card, and a profile's placements taken all at once never
      // overlap: max_count instances really fit on an empty card.
      std::vector<bool> used(table.memory_slices, false);
      for (const gpustack_placement& pl : p.placements) {
        EXPECT_EQ(pl.length, p.memory_slices) << table.product << " " << p.name;
        ASSERT_LE(pl.start + pl.length, table.memory_slices) << table.product << " " << p.name;
        for (uint32_t s = pl.start; s < pl.start + pl.length; ++s) {
          EXPECT_FALSE(used[s]) << table.product << " " << p.name << " overlaps at slice " << s;
          used[s] = true;
        }
      }
    }
  }
}

TEST(PartitionTables, ProductsMatchTheirDriverNames) {
  EXPECT_EQ(FindPartitionTable("nvidia", "NVIDIA H100 80GB HBM3")->product, "H100-80GB");
  EXPECT_EQ(FindPartitionTable("nvidia", "NVIDIA A100-SXM4-40GB")->product, "A100-40GB");
  EXPECT_EQ(FindPartitionTable("nvidia", "NVIDIA A100 80GB PCIe")->product, "A100-80GB");
  EXPECT_EQ(FindPartitionTable("nvidia", "NVIDIA H200")->profiles[0].name, "1g.18gb");
  EXPECT_EQ(FindPartitionTable("thead", "PPU-ZW810E")->profiles[0].name, "4g.48gb");
  EXPECT_EQ(FindPartitionTable("nvidia", "NVIDIA A10G"), nullptr);
  EXPECT_EQ(FindPartitionTable("amd", "NVIDIA H100 80GB HBM3"), nullptr);
}

}  // namespace
}  // namespace gpustack::support
