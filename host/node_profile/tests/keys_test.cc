#include "host/node_profile/keys.h"

#include <gtest/gtest.h>

namespace gpustack::node_profile {
namespace {

// The observed derivations of docs/behaviour.md §3.3.
TEST(CpuKey, ReferenceExamples) {
  EXPECT_EQ(CpuKey("AMD", "AMD EPYC 7763 64-Core Processor", "25", "1"), "amd-epyc-7763");
  EXPECT_EQ(CpuKey("AMD", "AMD EPYC 7R13 Processor", "25", "1"), "amd-epyc-7r13");
  EXPECT_EQ(CpuKey("AMD", "AMD EPYC 7R32", "23", "49"), "amd-epyc-7r32");
  EXPECT_EQ(CpuKey("Intel", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", "6", "85"),
            "intel-xeon-platinum-8259cl");
}

TEST(CpuKey, FallsBackToFamilyAndModelThenGeneric) {
  EXPECT_EQ(CpuKey("AMD", "", "25", "1"), "amd-25-1");
  EXPECT_EQ(CpuKey("", "", "", ""), "generic");
  EXPECT_EQ(CpuKey("", "Some CPU", "", ""), "generic-some");
  // A name without the manufacturer gains it in front.
  EXPECT_EQ(CpuKey("Intel", "Xeon Gold 6348", "6", "106"), "intel-xeon-gold-6348");
}

TEST(CpuKey, StaysWithinALabelsBudget) {
  const std::string key = CpuKey("Intel", std::string(200, 'x') + " 9", "6", "1");
  EXPECT_LE(key.size(), 63u);
  EXPECT_NE(key.back(), '-');
}

// docs/behaviour.md §3.4.
TEST(AcceleratorGroupId, ReferenceExamples) {
  EXPECT_EQ(AcceleratorGroupId("nvidia", "NVIDIA A10G"), "a10g");
  EXPECT_EQ(AcceleratorGroupId("nvidia", "Tesla T4"), "tesla-t4");
  EXPECT_EQ(AcceleratorGroupId("nvidia", "NVIDIA H100 80GB HBM3"), "h100-80gb-hbm3");
  EXPECT_EQ(AcceleratorGroupId("amd", "AMD Radeon RX 7800 XT"), "radeon-rx-7800-xt");
  EXPECT_EQ(AcceleratorGroupId("nvidia", "Tesla T4", 16384, true), "tesla-t4-16g");
  EXPECT_EQ(AcceleratorGroupId("amd", "AMD Radeon RX 7800 XT", 16368, true),
            "radeon-rx-7800-xt-16g");
  EXPECT_EQ(AcceleratorKey("nvidia", "a10g"), "nvidia-a10g");
}

TEST(MemoryQuantity, LargestBinaryUnitToTheNearestWhole) {
  EXPECT_EQ(MemoryQuantity(24576), "24Gi");
  EXPECT_EQ(MemoryQuantity(16368), "16Gi");  // RX 7800 XT
  EXPECT_EQ(MemoryQuantity(2 * 1024 * 1024), "2Ti");
  EXPECT_EQ(MemoryQuantity(16384), "16Gi");
  EXPECT_EQ(MemoryQuantity(1000), "1000Mi");
}

}  // namespace
}  // namespace gpustack::node_profile
