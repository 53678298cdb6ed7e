// What the client refuses in a plugin's output before anything of it is used.
#include "../src/reader.h"

#include <gtest/gtest.h>

#include <string>

namespace gpustack::client {
namespace {

gpustack_str S(const std::string& text) { return {text.data(), text.size()}; }

TEST(Reader, AStringWithANulByteIsRefused) {
  Reader reader;
  const std::string cut("nvidia\0ctl", 10);
  EXPECT_EQ(reader.Str(S("nvidia0"), "device_node.path"), "nvidia0");
  EXPECT_TRUE(reader.problem.empty());
  reader.Str(S(cut), "device_node.path");
  EXPECT_EQ(reader.problem, "device_node.path contains a NUL byte");
}

TEST(Reader, APlacementOutsideTheCardIsRefusedWithoutWrapping) {
  const std::string card = "GPU-0";
  const std::string id = "MIG-0";
  gpustack_partition p{};
  p.struct_size = sizeof p;
  p.accelerator_id = S(card);
  p.id = S(id);
  for (gpustack_placement bad :
       {gpustack_placement{0xFFFFFFFFu, 1}, gpustack_placement{60, 8}, gpustack_placement{0, 0}}) {
    p.placement = bad;
    Reader reader;
    reader.PartitionOf(&p);
    EXPECT_NE(reader.problem.find("is outside the card's 64 memory slices"), std::string::npos)
        << bad.start << "+" << bad.length << ": " << reader.problem;
  }
  p.placement = {4, 4};
  Reader good;
  EXPECT_EQ(good.PartitionOf(&p).placement.start, 4u);
  EXPECT_TRUE(good.problem.empty()) << good.problem;
}

}  // namespace
}  // namespace gpustack::client
