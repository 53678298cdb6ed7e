#include "host/common/packed_text.h"

#include <gtest/gtest.h>

#include <string>

namespace gpustack {
namespace {

// A long, repetitive text is kept compressed; a short one as it is; either reads back byte for
// byte, alone or appended after what a buffer holds.
TEST(PackedText, KeepsLongTextCompressedShortTextAsItIsAndGivesBothBack) {
  std::string long_text = "[";
  for (int i = 0; i < 200; ++i)
    long_text += R"({"index":)" + std::to_string(i) + R"(,"model":"NVIDIA H100 80GB HBM3"},)";
  long_text += "{}]";
  const PackedText packed = PackedText::Of(long_text);
  EXPECT_TRUE(packed.compressed());
  EXPECT_EQ(packed.size(), long_text.size());
  EXPECT_LT(packed.kept_bytes() * 5, long_text.size());
  EXPECT_EQ(packed.Text(), long_text);

  const PackedText short_one = PackedText::Of(R"({"name":"s"})");
  EXPECT_FALSE(short_one.compressed());
  EXPECT_EQ(short_one.Text(), R"({"name":"s"})");

  std::string body = "<";
  packed.AppendTo(body);
  short_one.AppendTo(body);
  EXPECT_EQ(body, "<" + long_text + R"({"name":"s"})");

  EXPECT_EQ(PackedText::Of("").Text(), "");
  EXPECT_EQ(PackedText().Text(), "");
}

}  // namespace
}  // namespace gpustack
