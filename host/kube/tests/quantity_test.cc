#include "host/kube/quantity.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpustack::kube {
namespace {

using Json = nlohmann::json;

int64_t Milli(const std::string& text) {
  auto q = Quantity::Parse(text);
  EXPECT_TRUE(q) << text << ": " << q.error();
  return q ? q->Milli() : -1;
}

TEST(Quantity, ReadsEverySuffixAsApimachineryDoes) {
  EXPECT_EQ(Milli("2"), 2000);
  EXPECT_EQ(Milli("500m"), 500);
  EXPECT_EQ(Milli("1.5"), 1500);
  EXPECT_EQ(Milli(".5"), 500);
  EXPECT_EQ(Milli("+3"), 3000);
  EXPECT_EQ(Milli("2k"), 2'000'000);
  EXPECT_EQ(Milli("1M"), 1'000'000'000);
  EXPECT_EQ(Milli("1Ki"), 1024'000);
  EXPECT_EQ(Milli("64Gi"), (int64_t{64} << 30) * 1000);
  EXPECT_EQ(Milli("1.5Gi"), (int64_t{3} << 29) * 1000);
  EXPECT_EQ(Milli("1e3"), 1'000'000);
  EXPECT_EQ(Milli("1E-3"), 1);
  EXPECT_EQ(Milli("100u"), 1);  // a tenth of a milli rounds up, as MilliValue does
  EXPECT_EQ(Milli("1n"), 1);
  EXPECT_EQ(Milli("0"), 0);
  EXPECT_EQ(Milli("-0"), 0);
  EXPECT_EQ(Milli("-2"), -2000);
  EXPECT_EQ(Milli("1Ei"), std::numeric_limits<int64_t>::max());  // saturates
}

// Long decimal strings keep their value: 36 significant digits are exact, later integer digits
// still count as powers of ten, and a value past int64 saturates rather than wraps or shrinks.
TEST(Quantity, LongStringsKeepTheirValue) {
  EXPECT_EQ(Milli("1000." + std::string(36, '0')), 1'000'000);
  EXPECT_EQ(Quantity::Parse("4096." + std::string(40, '0') + "Gi")->Whole(), int64_t{4096} << 30);
  EXPECT_EQ(Quantity::Parse("0.0000000005Ki")->Milli(), 1);  // 512 nano, exact: rounds up
  // 36 significant digits times 2^60 would overflow 128 bits; the value still comes out right.
  EXPECT_EQ(Quantity::Parse("1.00000000000000000000000000000000001Ei")->Whole(), std::nullopt);
  EXPECT_EQ(Quantity::Parse("1.00000000000000000000000000000000001Ei")->Milli(),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Quantity::Parse("1.50000000000000000000000000000000000Ki")->Whole(), 1536);
  EXPECT_EQ(Quantity::Parse("0.000000000000000000000000000000000000001")->Milli(), 1);  // up
  EXPECT_EQ(Milli("00000000000000000000000000000000000000000000001"), 1000);
  const std::string huge(40, '9');
  EXPECT_EQ(Quantity::Parse(huge)->Whole(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Quantity::Parse("-" + huge)->Whole(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Milli(huge + "." + huge), std::numeric_limits<int64_t>::max());
}

TEST(Quantity, RefusesWhatIsNotOneNamingWhy) {
  for (const char* bad : {"", "abc", "Gi", "1Gb", "1.2.3", "1 Gi", "1e", "1e1234", "--1", "1x"}) {
    auto q = Quantity::Parse(bad);
    EXPECT_FALSE(q) << bad;
  }
  auto unknown = Quantity::Parse("1Gb");
  EXPECT_NE(unknown.error().find("unknown suffix \"Gb\""), std::string::npos) << unknown.error();
  EXPECT_NE(Quantity::Parse("").error().find("empty"), std::string::npos);
  EXPECT_FALSE(Quantity::FromJson(Json(true)));
  EXPECT_FALSE(Quantity::FromJson(Json::object()));
}

TEST(Quantity, WholeNumbersAndSuffixes) {
  EXPECT_EQ(Quantity::Parse("2000m")->Whole(), 2);
  EXPECT_EQ(Quantity::Parse("2500m")->Whole(), std::nullopt);
  EXPECT_EQ(Quantity::Parse("1.5")->Whole(), std::nullopt);
  EXPECT_EQ(Quantity::Parse("3k")->Whole(), 3000);
  EXPECT_EQ(Quantity::Parse("-4")->Whole(), -4);
  EXPECT_EQ(Quantity::Parse("2Gi")->suffix(), "Gi");
  EXPECT_EQ(Quantity::Parse("2")->suffix(), "");
  EXPECT_EQ(Quantity::Parse("2e3")->suffix(), "e3");
  EXPECT_EQ(Quantity::FromJson(Json(7))->Whole(), 7);
  EXPECT_EQ(Quantity::FromJson(Json(1.5))->Milli(), 1500);
  EXPECT_EQ(Quantity::FromJson(Json("12"))->Whole(), 12);
}

TEST(Quantity, MilliAndWholeOfJsonAreNonNegativeAndBounded) {
  EXPECT_EQ(MilliOf(Json("250m")), 250);
  EXPECT_EQ(MilliOf(Json(4)), 4000);
  EXPECT_EQ(MilliOf(Json("-1")), std::nullopt);
  EXPECT_EQ(MilliOf(Json("8Ei")), std::nullopt);  // beyond int64 in milli-bytes
  EXPECT_EQ(MilliOf(Json(nullptr)), std::nullopt);
  EXPECT_EQ(WholeOf(Json("2000m")), 2);
  EXPECT_EQ(WholeOf(Json("0.5")), std::nullopt);
}

TEST(Quantity, Formats) {
  EXPECT_EQ(FormatDecimal(1600000), "1600k");
  EXPECT_EQ(FormatDecimal(8000000), "8M");
  EXPECT_EQ(FormatDecimal(12800000), "12800k");
  EXPECT_EQ(FormatDecimal(72), "72");
  EXPECT_EQ(FormatDecimal(0), "0");
  EXPECT_EQ(FormatDecimal(655360), "655360");
  EXPECT_EQ(FormatMilli(2000), "2");
  EXPECT_EQ(FormatMilli(1500), "1500m");
  EXPECT_EQ(FormatBytes(int64_t{2} << 30), "2Gi");
  EXPECT_EQ(FormatBytes((int64_t{3} << 20) / 2), "2Mi");
  // What a format writes reads back as the same value.
  for (int64_t v : {int64_t{1}, int64_t{999}, int64_t{1000}, int64_t{123456000}}) {
    EXPECT_EQ(Quantity::Parse(FormatDecimal(v))->Whole(), v);
    EXPECT_EQ(Quantity::Parse(FormatMilli(v))->Milli(), v);
  }
}

}  // namespace
}  // namespace gpustack::kube
