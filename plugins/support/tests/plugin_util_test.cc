#include <gpustack_support/rocm_smi_api.h>
#include <gpustack/plugin_util.hpp>
#include <gpustack/small_file.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace gpustack::sdk {
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
  EXPECT_EQ(support::rsmi::BusIdFromBdfId(bdfid), "0001:86:1f.3");
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

// Collects the groups a discovery reports.
struct Groups {
  std::vector<std::vector<std::pair<std::string, gpustack_health>>> cards;
  gpustack_discovery_sink raw{sizeof(gpustack_discovery_sink), nullptr, this,
                              [](void* self, const gpustack_accelerator_group* g) {
                                std::vector<std::pair<std::string, gpustack_health>> group;
                                for (size_t i = 0; i < g->accelerator_count; ++i) {
                                  group.emplace_back(std::string(View(g->accelerators[i]->id)),
                                                     g->accelerators[i]->health);
                                }
                                static_cast<Groups*>(self)->cards.push_back(group);
                                return static_cast<gpustack_status>(GPUSTACK_STATUS_OK);
                              }};
  DiscoverySink sink{raw};
};

Accelerator Card(const std::string& id) {
  return {.id = id, .memory_mib = 1024, .health = GPUSTACK_HEALTH_HEALTHY};
}

TEST(CardBook, AnUnreadableCardIsReportedUnhealthyAsItWasLastRead) {
  CardBook book;
  {
    Groups first;
    CardBook::Pass pass = book.Begin();
    pass.Found(0, "X", {}, Card("X-0"));
    pass.Found(1, "X", {}, Card("X-1"));
    pass.Report(first.sink);
  }
  Groups second;
  CardBook::Pass pass = book.Begin();
  pass.Found(0, "X", {}, Card("X-0"));
  EXPECT_TRUE(pass.Unreadable(1, "the card fell off the bus (3)"));
  EXPECT_FALSE(pass.Unreadable(2, "never read")) << "a card never read cannot be named";
  pass.Report(second.sink);
  ASSERT_EQ(second.cards.size(), 1u);
  EXPECT_EQ(second.cards[0],
            (std::vector<std::pair<std::string, gpustack_health>>{
                {"X-0", GPUSTACK_HEALTH_HEALTHY}, {"X-1", GPUSTACK_HEALTH_UNHEALTHY}}));
  EXPECT_EQ(book.at(1).card.health_reason, "the card fell off the bus (3)");
  EXPECT_EQ(book.IndexOf("X-1"), 1u);
  EXPECT_THROW(book.IndexOf("X-9"), Error);
}

TEST(CardBook, APassThatDoesNotReportChangesNothing) {
  CardBook book;
  {
    CardBook::Pass pass = book.Begin();
    pass.Found(0, "X", {}, Card("X-0"));
    // no Report: discovery failed halfway
  }
  EXPECT_EQ(book.size(), 0u);
}

TEST(ReadSmallFile, OnlyRegularFilesWithinTheCap) {
  const auto dir = std::filesystem::temp_directory_path() / ("small-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "numa_node") << "1\n";
  EXPECT_EQ(ReadSmallFile((dir / "numa_node").string(), 16), "1\n");
  EXPECT_EQ(ReadFirstLine((dir / "numa_node").string()), "1");
  std::string why;
  EXPECT_EQ(ReadSmallFile((dir / "numa_node").string(), 1, &why), std::nullopt);
  EXPECT_EQ(why, "larger than 1 bytes");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadSmallFile((dir / "fifo").string(), 16, &why), std::nullopt);  // never blocks
  EXPECT_EQ(why, "not a regular file");
  int error_number = 0;
  EXPECT_EQ(ReadSmallFile((dir / "missing").string(), 16, &why, &error_number), std::nullopt);
  EXPECT_EQ(error_number, ENOENT);
  std::filesystem::remove_all(dir);
}

TEST(ReplaceSmallFile, ReplacesWholeAsOwnerOnlyAndSaysWhyNot) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("replace-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "state").string();
  std::ofstream(path) << "old contents, longer than the new ones";
  const mode_t umask = ::umask(0);  // a permissive umask must not make the file writable by others
  std::string why;
  EXPECT_TRUE(ReplaceSmallFile(path, "new", &why)) << why;
  ::umask(umask);
  EXPECT_EQ(ReadSmallFile(path, 64), "new");
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1) << "no temporary left";
  EXPECT_FALSE(ReplaceSmallFile((dir / "no-such-dir" / "state").string(), "x", &why));
  EXPECT_NE(why.find("No such file or directory"), std::string::npos) << why;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpustack::sdk
