#include "host/kubelet_rpc/framing.h"

#include <gtest/gtest.h>

namespace gpustack::kubelet_rpc {
namespace {

TEST(Framing, FramesAndSplitsMessages) {
  const std::string body =
      FrameMessage("abc") + FrameMessage("") + FrameMessage(std::string(300, 'x'));
  ASSERT_EQ(FrameMessage("abc"), std::string("\0\0\0\0\3abc", 8));
  auto messages = SplitMessages(body);
  ASSERT_TRUE(messages) << messages.error();
  ASSERT_EQ(messages->size(), 3u);
  EXPECT_EQ((*messages)[0], "abc");
  EXPECT_EQ((*messages)[1], "");
  EXPECT_EQ((*messages)[2], std::string(300, 'x'));
}

TEST(Framing, TakesCompleteMessagesAndKeepsThePartOne) {
  const std::string whole = FrameMessage("first") + FrameMessage("second");
  std::string buffer = whole.substr(0, whole.size() - 3);
  auto messages = TakeMessages(buffer);
  ASSERT_TRUE(messages) << messages.error();
  ASSERT_EQ(messages->size(), 1u);
  EXPECT_EQ((*messages)[0], "first");
  EXPECT_EQ(buffer, FrameMessage("second").substr(0, 8));
  buffer += whole.substr(whole.size() - 3);
  messages = TakeMessages(buffer);
  ASSERT_TRUE(messages);
  ASSERT_EQ(messages->size(), 1u);
  EXPECT_EQ((*messages)[0], "second");
  EXPECT_TRUE(buffer.empty());
}

TEST(Framing, RefusesWhatWasNotNegotiatedOrIsTooLarge) {
  std::string compressed = FrameMessage("abc");
  compressed[0] = 1;
  auto refused = SplitMessages(compressed);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), Code::kUnimplemented);
  EXPECT_NE(refused.error().find("compressed"), std::string::npos);

  auto large = SplitMessages(FrameMessage(std::string(100, 'x')), 99);
  ASSERT_FALSE(large);
  EXPECT_EQ(large.code(), Code::kResourceExhausted);
  // The length is read before the bytes: a prefix that claims 4 GiB is refused at once.
  auto claimed = SplitMessages(std::string("\0\xff\xff\xff\xff", 5));
  ASSERT_FALSE(claimed);
  EXPECT_EQ(claimed.code(), Code::kResourceExhausted);

  auto cut = SplitMessages(FrameMessage("abcdef").substr(0, 7));
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().find("ends inside a message"), std::string::npos);
}

TEST(Framing, PercentEncodesGrpcMessages) {
  const std::string text = "100% sure: caf\xc3\xa9\nnext line";
  const std::string encoded = PercentEncode(text);
  EXPECT_EQ(encoded, "100%25 sure: caf%C3%A9%0Anext line");
  EXPECT_EQ(PercentDecode(encoded), text);
  // What gRPC's decoders leave as it is: a '%' without two hex digits.
  EXPECT_EQ(PercentDecode("50% off %zz %4"), "50% off %zz %4");
}

TEST(Framing, FormatsTimeoutsInAtMostEightDigits) {
  EXPECT_EQ(FormatTimeout(std::chrono::milliseconds(5000)), "5000m");
  EXPECT_EQ(FormatTimeout(std::chrono::milliseconds(99'999'999)), "99999999m");
  EXPECT_EQ(FormatTimeout(std::chrono::hours(100)), "360000S");  // 360,000,000 ms: nine digits
  EXPECT_EQ(FormatTimeout(std::chrono::milliseconds(-1)), "0m");
}

TEST(Framing, KnowsGrpcContentTypes) {
  EXPECT_TRUE(IsGrpcContentType("application/grpc"));
  EXPECT_TRUE(IsGrpcContentType("application/grpc+proto"));
  EXPECT_TRUE(IsGrpcContentType("Application/GRPC"));
  EXPECT_FALSE(IsGrpcContentType("application/grpc-web"));
  EXPECT_FALSE(IsGrpcContentType("application/json"));
  EXPECT_FALSE(IsGrpcContentType(""));
}

}  // namespace
}  // namespace gpustack::kubelet_rpc
