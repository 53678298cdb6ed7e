// Its own executable, so that no other process maps its pages: the kernel leaves pages that
// another process maps too where they are.
#include "host/common/own_code.h"

#include <gtest/gtest.h>

#include <string>

namespace gpustack {
namespace {

TEST(OwnCode, PagingOutHandsBackTheExecutablesResidentPages) {
  const size_t before = ResidentBytes("RssFile");
  ASSERT_GT(before, 0u);
  ASSERT_GT(ResidentBytes(), before);
  auto advised = PageOutOwnCode();
  if (!advised && advised.error().find("Invalid argument") != std::string::npos)
    GTEST_SKIP() << "this kernel has no MADV_PAGEOUT: " << advised.error();
  ASSERT_TRUE(advised) << advised.error();
  EXPECT_GT(*advised, 0u);
  const size_t after = ResidentBytes("RssFile");
  EXPECT_LT(after, before) << "before " << before << " bytes, after " << after;
  // What runs again comes back: the process goes on.
  EXPECT_GT(ResidentBytes(), 0u);
}

}  // namespace
}  // namespace gpustack
