#include "host/common/text.h"

#include <gtest/gtest.h>

namespace gpustack {
namespace {

TEST(Printable, PlainTextAndUtf8AreUnchanged) {
  EXPECT_EQ(Printable("NVIDIA A10G"), "NVIDIA A10G");
  EXPECT_EQ(Printable("昇腾 910B · 64 GiB"), "昇腾 910B · 64 GiB");
  EXPECT_EQ(Printable(""), "");
}

TEST(Printable, ControlCharactersAreEscaped) {
  EXPECT_EQ(Printable("a\nb\tc"), "a\\x0ab\\x09c");
  EXPECT_EQ(Printable("\x1b[2Jgone"), "\\x1b[2Jgone");  // a terminal would clear the screen
  EXPECT_EQ(Printable(std::string_view("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(Printable("del\x7f"), "del\\x7f");
}

TEST(Printable, C1ControlsAreEscapedButOtherTwoByteCharactersAreNot) {
  EXPECT_EQ(Printable("\xc2\x9b"
                      "31m"),
            "\\u009b31m");                       // CSI
  EXPECT_EQ(Printable("\xc2\xa0"), "\xc2\xa0");  // no-break space stays
  EXPECT_EQ(Printable("end\xc2"), "end\xc2");    // a cut sequence is left as it is
}

}  // namespace
}  // namespace gpustack
