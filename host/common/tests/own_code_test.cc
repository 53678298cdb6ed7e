// Its own executable, so that no other process maps its pages: the kernel leaves pages that
// another process maps too where they are.
#include "host/common/own_code.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace gpustack {
namespace {

// Resident pages backed by files (the executable's code among them), in bytes.
size_t ResidentFileBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  size_t kilobytes = 0;
  while (status >> key) {
    if (key == "RssFile:" && status >> kilobytes) return kilobytes * 1024;
    status.ignore(4096, '\n');
  }
  return 0;
}

TEST(OwnCode, PagingOutHandsBackTheExecutablesResidentPages) {
  const size_t before = ResidentFileBytes();
  ASSERT_GT(before, 0u);
  ASSERT_GT(ResidentBytes(), before);
  auto advised = PageOutOwnCode();
  if (!advised && advised.error().find("Invalid argument") != std::string::npos)
    GTEST_SKIP() << "this kernel has no MADV_PAGEOUT: " << advised.error();
  ASSERT_TRUE(advised) << advised.error();
  EXPECT_GT(*advised, 0u);
  const size_t after = ResidentFileBytes();
  EXPECT_LT(after, before) << "before " << before << " bytes, after " << after;
  // What runs again comes back: the process goes on.
  EXPECT_GT(ResidentBytes(), 0u);
}

}  // namespace
}  // namespace gpustack
