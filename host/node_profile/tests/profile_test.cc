#include "host/node_profile/profile.h"

#include <gtest/gtest.h>

#include <utility>

namespace gpustack::node_profile {
namespace {

TEST(ParseCpuInfo, CountsCoresThreadsAndSocketsOnX86) {
  std::string text;
  for (int thread = 0; thread < 2; ++thread) {
    for (int socket = 0; socket < 2; ++socket) {
      for (int core = 0; core < 3; ++core) {
        text +=
            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
            "model name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz\nstepping\t: 7\n"
            "cpu MHz\t\t: 2499.998\nphysical id\t: " +
            std::to_string(socket) + "\ncore id\t\t: " + std::to_string(core) +
            "\nclflush size\t: 64\n\n";
      }
    }
  }
  const CpuProfile cpu = ParseCpuInfo(text);
  EXPECT_EQ(cpu.manufacturer, "Intel");
  EXPECT_EQ(cpu.logical_cores, 12u);
  EXPECT_EQ(cpu.physical_cores, 6u);
  EXPECT_EQ(cpu.threads_per_core, 2u);
  EXPECT_EQ(cpu.sockets, 2u);
  EXPECT_EQ(cpu.family, "6");
  EXPECT_EQ(cpu.model, "85");
  EXPECT_EQ(cpu.stepping, "7");
  EXPECT_EQ(cpu.cache_line, 64u);
  EXPECT_NEAR(cpu.clock_mhz, 2500.0, 0.01);
  EXPECT_EQ(cpu.key, "intel-xeon-platinum-8259cl");
}

TEST(ParseCpuInfo, Arm64HasNoNameSoTheKeyFallsBack) {
  const std::string text =
      "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
      "CPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n"
      "processor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n\n";
  const CpuProfile cpu = ParseCpuInfo(text);
  EXPECT_EQ(cpu.manufacturer, "ARM");
  EXPECT_EQ(cpu.logical_cores, 2u);
  EXPECT_EQ(cpu.physical_cores, 2u);
  EXPECT_EQ(cpu.threads_per_core, 1u);
  EXPECT_EQ(cpu.key, "generic");  // no family: nothing better to say than NFD would
}

TEST(ParseCpuInfo, NamesX86VendorsAsNfdDoes) {
  for (const auto& [vendor_id, name] : {std::pair{"AuthenticAMD", "AMD"},
                                        {"HygonGenuine", "Hygon"},
                                        {"CentaurHauls", "Zhaoxin"},
                                        {"Shanghai", "Zhaoxin"},
                                        {"Unknown", ""}}) {
    EXPECT_EQ(
        ParseCpuInfo(std::string("processor\t: 0\nvendor_id\t: ") + vendor_id + "\n").manufacturer,
        name)
        << vendor_id;
  }
}

TEST(ParseMemTotal, ReadsKibAsMib) {
  EXPECT_EQ(ParseMemTotalMib("MemFree: 1 kB\nMemTotal:       16384000 kB\n"), 16000u);
  EXPECT_EQ(ParseMemTotalMib("nothing here"), 0u);
}

TEST(ReadNodeProfile, ReadsTheFixtureNode) {
  const std::string root = std::string(GPUSTACK_NODE_TREES_DIR) + "/nvidia-t4x4";
  auto profile = ReadNodeProfile({root + "/proc", root + "/sys", root + "/no-such-data-dir"});
  ASSERT_TRUE(profile) << profile.error();
  EXPECT_EQ(profile->cpu.key, "intel-xeon-platinum-8259cl");
  EXPECT_EQ(profile->cpu.logical_cores, 48u);
  EXPECT_EQ(profile->cpu.physical_cores, 24u);
  EXPECT_EQ(profile->cpu.cache_l3_kib, 36608u);
  EXPECT_EQ(profile->cpu.cache_l1i_kib, 32u);
  EXPECT_EQ(profile->memory_mib, 196000000u / 1024);
  EXPECT_GT(profile->data_capacity_mib, 0u);  // measured at the nearest existing parent
}

TEST(ReadNodeProfile, MissingProcIsAClearError) {
  auto profile = ReadNodeProfile({"/nonexistent-proc", "/sys", "/"});
  ASSERT_FALSE(profile);
  EXPECT_NE(profile.error().find("/nonexistent-proc/cpuinfo"), std::string::npos);
}

}  // namespace
}  // namespace gpustack::node_profile
