// The client's pure parts: version negotiation and what a capability requires of the table.
#include <gpustack/client/plugin.hpp>

#include <gtest/gtest.h>

namespace gpustack::client {
namespace {

TEST(Negotiation, SameMajorUsesTheLowerMinor) {
  auto older_plugin = CheckNegotiation({1, 3}, 1, 1, GPUSTACK_STATUS_OK);
  ASSERT_TRUE(older_plugin) << older_plugin.error();
  EXPECT_EQ(older_plugin->minor, 1u);
  auto newer_plugin = CheckNegotiation({1, 0}, 1, 7, GPUSTACK_STATUS_OK);
  ASSERT_TRUE(newer_plugin) << newer_plugin.error();
  EXPECT_EQ(newer_plugin->minor, 0u);
}

TEST(Negotiation, RefusalsNameBothVersions) {
  auto refused = CheckNegotiation({1, 0}, 2, 0, GPUSTACK_STATUS_INCOMPATIBLE_VERSION);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), "the plugin refused the host's ABI (host ABI 1.0, plugin ABI 2.0)");
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
  auto lied = CheckNegotiation({1, 0}, 2, 0, GPUSTACK_STATUS_OK);
  ASSERT_FALSE(lied);
  EXPECT_NE(lied.error().find("different ABI major"), std::string::npos);
  auto broken = CheckNegotiation({1, 0}, 1, 0, GPUSTACK_STATUS_INTERNAL);
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().find("INTERNAL"), std::string::npos);
}

gpustack_status Dummy(gpustack_plugin_instance*, const void*) { return GPUSTACK_STATUS_OK; }

TEST(MissingHooks, AClaimWithoutItsHookIsNamedOnce) {
  Identity id;
  id.capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PARTITIONING;
  gpustack_plugin_api table{};
  const std::vector<std::string> missing = MissingHooks(id, table);
  EXPECT_EQ(missing,
            (std::vector<std::string>{"claims sharing but provides no grant",
                                      "claims partitioning but provides no list_partitions",
                                      "claims partitioning but provides no create_partition",
                                      "claims partitioning but provides no destroy_partition"}));

  Identity plain;
  table.discover = reinterpret_cast<decltype(table.discover)>(&Dummy);
  EXPECT_EQ(MissingHooks(plain, table),
            std::vector<std::string>{
                "discovers cards (any card can be granted whole) but provides no grant"});
  table.grant = reinterpret_cast<decltype(table.grant)>(&Dummy);
  EXPECT_TRUE(MissingHooks(plain, table).empty());

  Identity slices;
  slices.capabilities = GPUSTACK_CAP_SLICE_OBJECTS | GPUSTACK_CAP_HEALTH_EVENTS;
  EXPECT_EQ(MissingHooks(slices, table),
            (std::vector<std::string>{"claims health events but provides no poll_health_events",
                                      "claims slice objects but provides no prepare_slice",
                                      "claims slice objects but provides no unprepare_slice"}));
}

}  // namespace
}  // namespace gpustack::client
