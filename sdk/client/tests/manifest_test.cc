#include <gpustack/client/manifest.hpp>

#include <gtest/gtest.h>

namespace gpustack::client {
namespace {

constexpr const char* kGood = R"({"format_version": 1, "name": "nvidia",
  "library": "libgpustack_plugin_nvidia.so", "abi": {"major": 1, "minor": 0},
  "pci_vendor_ids": ["0x10de", "0X10DF"], "future_key": {"ignored": true}})";

TEST(Manifest, ParsesAGoodManifestAndIgnoresUnknownKeys) {
  auto m = ParseManifest(kGood, "/plugins/nvidia.json");
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->name, "nvidia");
  EXPECT_EQ(m->library_path, "/plugins/libgpustack_plugin_nvidia.so");
  EXPECT_EQ(m->abi_major, 1u);
  EXPECT_EQ(m->abi_minor, 0u);
  EXPECT_EQ(m->pci_vendor_ids, (std::vector<uint16_t>{0x10de, 0x10df}));
}

struct BadCase {
  const char* text;
  const char* expected;  // a piece of the error message
};

class ManifestRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(ManifestRejects, WithASpecificMessage) {
  auto m = ParseManifest(GetParam().text, "/plugins/x.json");
  ASSERT_FALSE(m) << "accepted: " << GetParam().text;
  EXPECT_NE(m.error().find("/plugins/x.json"), std::string::npos) << m.error();
  EXPECT_NE(m.error().find(GetParam().expected), std::string::npos) << m.error();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ManifestRejects,
    ::testing::Values(
        BadCase{"{", "not valid JSON"}, BadCase{"[]", "JSON object"},
        BadCase{R"({"name":"x"})", "missing \"format_version\""},
        BadCase{R"({"format_version": 2})", "format_version 2 is not supported"},
        BadCase{R"({"format_version": 1, "name": "NVIDIA", "library": "a.so",
                   "abi": {"major": 1, "minor": 0}})",
                "manufacturer key"},
        BadCase{R"({"format_version": 1, "name": "x", "abi": {"major": 1, "minor": 0}})",
                "\"library\""},
        BadCase{R"({"format_version": 1, "name": "x", "library": "../evil.so",
                   "abi": {"major": 1, "minor": 0}})",
                "file name in the manifest's directory"},
        BadCase{R"({"format_version": 1, "name": "x", "library": "/lib/evil.so",
                   "abi": {"major": 1, "minor": 0}})",
                "file name in the manifest's directory"},
        BadCase{R"({"format_version": 1, "name": "x", "library": "a.so"})", "\"abi\""},
        BadCase{R"({"format_version": 1, "name": "x", "library": "a.so",
                   "abi": {"major": -1, "minor": 0}})",
                "non-negative integer"},
        BadCase{R"({"format_version": 1, "name": "x", "library": "a.so",
                   "abi": {"major": 1, "minor": 0}, "pci_vendor_ids": ["10de"]})",
                "0xNNNN"},
        BadCase{R"({"format_version": 1, "name": "x", "library": "a.so",
                   "abi": {"major": 1, "minor": 0}, "pci_vendor_ids": ["0x123456"]})",
                "0xNNNN"},
        BadCase{R"({"format_version": 1, "name": "x", "library": "a.so",
                   "abi": {"major": 1, "minor": 0}, "pci_vendor_ids": [4318]})",
                "0xNNNN"}));

TEST(Manifest, ReadingAMissingFileSaysSo) {
  auto m = ReadManifest("/nonexistent/dir/x.json");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().find("cannot be read"), std::string::npos);
}

TEST(Manifest, ManufacturerKeys) {
  EXPECT_TRUE(IsValidManufacturerKey("nvidia"));
  EXPECT_TRUE(IsValidManufacturerKey("my-vendor2"));
  for (const char* bad : {"", "-x", "x-", "Nvidia", "a_b", "a.b", "a/b"}) {
    EXPECT_FALSE(IsValidManufacturerKey(bad)) << bad;
  }
  EXPECT_EQ(FormatVendorId(0x10de), "0x10de");
  EXPECT_EQ(FormatVendorId(0x2), "0x0002");
}

}  // namespace
}  // namespace gpustack::client
