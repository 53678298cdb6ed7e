#include "gpustack_support/pci_topology.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpustack::support {
namespace {

TEST(NormalizeBusId, AcceptsTheSpellingsDriversUse) {
  EXPECT_EQ(NormalizeBusId("00000000:3B:00.0"), "0000:3b:00.0");  // NVML
  EXPECT_EQ(NormalizeBusId("0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizeBusId("3b:1f.7"), "0000:3b:1f.7");
  EXPECT_EQ(NormalizeBusId("0001:00:02.1"), "0001:00:02.1");
}

TEST(NormalizeBusId, RefusesMalformedIds) {
  for (const char* bad : {"", "3b", "3b:00", "zz:00.0", "0000:3b:00.12", "12345:3b:00.0",
                          "0000:3b:000.0", "0000:3b:00."}) {
    EXPECT_EQ(NormalizeBusId(bad), std::nullopt) << bad;
  }
}

TEST(BusIdFromBdfId, DecodesRocmSmiEncoding) {
  const uint64_t bdfid = (uint64_t{1} << 32) | (0x86u << 8) | (0x1fu << 3) | 0x3u;
  EXPECT_EQ(BusIdFromBdfId(bdfid), "0001:86:1f.3");
}

TEST(SysfsReaders, ReadDrmNodesAffinityAndRootPort) {
  const auto root =
      std::filesystem::temp_directory_path() / ("topology-" + std::to_string(::getpid()));
  const auto device = root / "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0";
  std::filesystem::create_directories(device / "drm/card2");
  std::filesystem::create_directories(device / "drm/renderD130");
  std::ofstream(device / "local_cpulist") << "0-23,48-71\n";
  std::filesystem::create_directories(root / "bus/pci/devices");
  std::filesystem::create_directory_symlink(device, root / "bus/pci/devices/0000:3b:00.0");
  const std::string link = (root / "bus/pci/devices/0000:3b:00.0").string();

  const DrmNodes nodes = ReadDrmNodes(link);
  EXPECT_EQ(nodes.card, 2u);
  EXPECT_EQ(nodes.render, 130u);
  EXPECT_EQ(ReadCpuAffinity(link), "0-23,48-71");
  EXPECT_EQ(ReadPciRootId(link), "0000:3a:00.0");
  EXPECT_EQ(ReadDrmNodes((root / "missing").string()).card, std::nullopt);
  EXPECT_EQ(ReadCpuAffinity((root / "missing").string()), "");
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpustack::support
