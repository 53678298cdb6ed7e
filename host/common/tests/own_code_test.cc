// Its own executable, so that no other process maps its pages: the kernel leaves pages that
// another process maps too where they are.
#include "host/common/own_code.h"

#include <gtest/gtest.h>

#include "host/common/files.h"

namespace gpustack {
namespace {

TEST(OwnCode, PagingOutHandsBackTheExecutablesResidentPages) {
  const long before = ProcStatusField("self", "RssFile");
  ASSERT_GT(before, 0);
  ASSERT_GT(ProcStatusField("self", "VmRSS"), before);
  auto advised = PageOutOwnCode();
  if (!advised && advised.code() == Code::kUnimplemented)
    GTEST_SKIP() << "this kernel has no MADV_PAGEOUT: " << advised.error();
  ASSERT_TRUE(advised) << advised.error();
  EXPECT_GT(*advised, 0u);
  const long after = ProcStatusField("self", "RssFile");
  EXPECT_LT(after, before) << "before " << before << " KB, after " << after;
  // What runs again comes back: the process goes on.
  EXPECT_GT(ProcStatusField("self", "VmRSS"), 0);
}

}  // namespace
}  // namespace gpustack
