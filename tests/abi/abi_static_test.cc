// Compile-time checks of the ABI as C++ sees it: the layout must be the one C produces (the
// layout snapshot pins it), every boundary struct is standard-layout with struct_size first,
// enums are 32-bit with pinned values. A failing static_assert fails the build.
#include <gpustack/plugin.h>
#include <gpustack/plugin.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

namespace {

template <class T>
constexpr bool IsBoundaryStruct() {
  return std::is_standard_layout_v<T> && std::is_trivially_copyable_v<T> &&
         offsetof(T, struct_size) == 0 && offsetof(T, next) == sizeof(size_t);
}

static_assert(IsBoundaryStruct<gpustack_plugin_api>());
static_assert(IsBoundaryStruct<gpustack_negotiate_args>());
static_assert(IsBoundaryStruct<gpustack_plugin_identity>());
static_assert(IsBoundaryStruct<gpustack_init_args>());
static_assert(IsBoundaryStruct<gpustack_host_services>());
static_assert(IsBoundaryStruct<gpustack_pci_device>());
static_assert(IsBoundaryStruct<gpustack_accelerator_group>());
static_assert(IsBoundaryStruct<gpustack_accelerator>());
static_assert(IsBoundaryStruct<gpustack_partition_profile>());
static_assert(IsBoundaryStruct<gpustack_discovery_sink>());
static_assert(IsBoundaryStruct<gpustack_discover_args>());
static_assert(IsBoundaryStruct<gpustack_grant_args>());
static_assert(IsBoundaryStruct<gpustack_container_edit>());
static_assert(IsBoundaryStruct<gpustack_container_edit_sink>());
static_assert(IsBoundaryStruct<gpustack_partition>());
static_assert(IsBoundaryStruct<gpustack_partition_sink>());
static_assert(IsBoundaryStruct<gpustack_list_partitions_args>());
static_assert(IsBoundaryStruct<gpustack_create_partition_args>());
static_assert(IsBoundaryStruct<gpustack_destroy_partition_args>());
static_assert(IsBoundaryStruct<gpustack_device_sample>());
static_assert(IsBoundaryStruct<gpustack_process_sample>());
static_assert(IsBoundaryStruct<gpustack_metrics_sink>());
static_assert(IsBoundaryStruct<gpustack_extension>());
static_assert(IsBoundaryStruct<gpustack_slice>());
static_assert(IsBoundaryStruct<gpustack_slice_sink>());
static_assert(IsBoundaryStruct<gpustack_prepare_slice_args>());
static_assert(IsBoundaryStruct<gpustack_unprepare_slice_args>());
static_assert(IsBoundaryStruct<gpustack_device_node>());
static_assert(IsBoundaryStruct<gpustack_device_node_sink>());
static_assert(IsBoundaryStruct<gpustack_list_device_nodes_args>());
static_assert(IsBoundaryStruct<gpustack_sample_metrics_args>());
static_assert(IsBoundaryStruct<gpustack_health_event>());
static_assert(IsBoundaryStruct<gpustack_health_sink>());
static_assert(IsBoundaryStruct<gpustack_poll_health_args>());

// Frozen value types.
static_assert(sizeof(gpustack_str) == 2 * sizeof(void*));
static_assert(sizeof(gpustack_placement) == 8);
static_assert(sizeof(gpustack_measurement) == 16);

// The newest pinned constant of every struct is the whole struct: no struct ends in padding (a
// later field must never land in bytes an older sender left uninitialised). After a minor bump the
// older constants stay put while sizeof grows (the layout snapshot pins their values).
template <class T>
constexpr bool PinnedToWholeStruct(size_t pinned) {
  return pinned == sizeof(T);
}
static_assert(PinnedToWholeStruct<gpustack_plugin_api>(GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_1));
static_assert(GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_0 < GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_1);
static_assert(PinnedToWholeStruct<gpustack_accelerator>(GPUSTACK_ACCELERATOR_STRUCT_SIZE_V1_0));
static_assert(
    PinnedToWholeStruct<gpustack_accelerator_group>(GPUSTACK_ACCELERATOR_GROUP_STRUCT_SIZE_V1_0));
static_assert(
    PinnedToWholeStruct<gpustack_plugin_identity>(GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_3));
static_assert(GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_2 <
              GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_3);
static_assert(PinnedToWholeStruct<gpustack_enforcer>(GPUSTACK_ENFORCER_STRUCT_SIZE_V1_3));
static_assert(GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_0 <
              GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_1);
static_assert(GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_1 <
              GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_2);
static_assert(PinnedToWholeStruct<gpustack_device_sample>(GPUSTACK_DEVICE_SAMPLE_STRUCT_SIZE_V1_0));
static_assert(
    PinnedToWholeStruct<gpustack_container_edit>(GPUSTACK_CONTAINER_EDIT_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_health_sink>(GPUSTACK_HEALTH_SINK_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_metrics_sink>(GPUSTACK_METRICS_SINK_STRUCT_SIZE_V1_0));
static_assert(
    PinnedToWholeStruct<gpustack_partition_sink>(GPUSTACK_PARTITION_SINK_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_container_edit_sink>(
    GPUSTACK_CONTAINER_EDIT_SINK_STRUCT_SIZE_V1_0));
static_assert(
    PinnedToWholeStruct<gpustack_discovery_sink>(GPUSTACK_DISCOVERY_SINK_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_discover_args>(GPUSTACK_DISCOVER_ARGS_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_list_partitions_args>(
    GPUSTACK_LIST_PARTITIONS_ARGS_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_destroy_partition_args>(
    GPUSTACK_DESTROY_PARTITION_ARGS_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_create_partition_args>(
    GPUSTACK_CREATE_PARTITION_ARGS_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_sample_metrics_args>(
    GPUSTACK_SAMPLE_METRICS_ARGS_STRUCT_SIZE_V1_0));
static_assert(
    PinnedToWholeStruct<gpustack_poll_health_args>(GPUSTACK_POLL_HEALTH_ARGS_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_health_event>(GPUSTACK_HEALTH_EVENT_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_partition>(GPUSTACK_PARTITION_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_grant_args>(GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_1));
static_assert(GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_0 < GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_1);
static_assert(
    PinnedToWholeStruct<gpustack_process_sample>(GPUSTACK_PROCESS_SAMPLE_STRUCT_SIZE_V1_0));
static_assert(
    PinnedToWholeStruct<gpustack_partition_profile>(GPUSTACK_PARTITION_PROFILE_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_pci_device>(GPUSTACK_PCI_DEVICE_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_host_services>(GPUSTACK_HOST_SERVICES_STRUCT_SIZE_V1_0));
static_assert(PinnedToWholeStruct<gpustack_init_args>(GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_1));
static_assert(GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_0 < GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_1);
static_assert(
    PinnedToWholeStruct<gpustack_negotiate_args>(GPUSTACK_NEGOTIATE_ARGS_STRUCT_SIZE_V1_0));

// Structs new in 1.1.
static_assert(PinnedToWholeStruct<gpustack_extension>(GPUSTACK_EXTENSION_STRUCT_SIZE_V1_1));
static_assert(PinnedToWholeStruct<gpustack_slice>(GPUSTACK_SLICE_STRUCT_SIZE_V1_1));
static_assert(PinnedToWholeStruct<gpustack_slice_sink>(GPUSTACK_SLICE_SINK_STRUCT_SIZE_V1_1));
static_assert(
    PinnedToWholeStruct<gpustack_prepare_slice_args>(GPUSTACK_PREPARE_SLICE_ARGS_STRUCT_SIZE_V1_1));
static_assert(PinnedToWholeStruct<gpustack_unprepare_slice_args>(
    GPUSTACK_UNPREPARE_SLICE_ARGS_STRUCT_SIZE_V1_1));
static_assert(PinnedToWholeStruct<gpustack_device_node>(GPUSTACK_DEVICE_NODE_STRUCT_SIZE_V1_1));
static_assert(
    PinnedToWholeStruct<gpustack_device_node_sink>(GPUSTACK_DEVICE_NODE_SINK_STRUCT_SIZE_V1_1));
static_assert(PinnedToWholeStruct<gpustack_list_device_nodes_args>(
    GPUSTACK_LIST_DEVICE_NODES_ARGS_STRUCT_SIZE_V1_1));

// 32-bit enums with pinned numbers (values are ABI).
static_assert(sizeof(gpustack_status) == 4 && std::is_signed_v<gpustack_status>);
static_assert(GPUSTACK_STATUS_OK == 0 && GPUSTACK_STATUS_INVALID_ARGUMENT == 3 &&
              GPUSTACK_STATUS_UNIMPLEMENTED == 12 && GPUSTACK_STATUS_INTERNAL == 13 &&
              GPUSTACK_STATUS_UNAVAILABLE == 14 && GPUSTACK_STATUS_INCOMPATIBLE_VERSION == 17);
static_assert(GPUSTACK_HEALTH_HEALTHY == 1 && GPUSTACK_HEALTH_UNHEALTHY == 2);
static_assert(GPUSTACK_PARTITION_MODE_ENABLED == 2);
static_assert(GPUSTACK_GRANT_EXCLUSIVE == 1 && GPUSTACK_GRANT_PARTITIONED == 4);
static_assert(GPUSTACK_EDIT_ENV == 1 && GPUSTACK_EDIT_CDI_DEVICE == 5);
static_assert(GPUSTACK_CAP_SHARED == 1 && GPUSTACK_CAP_HEALTH_EVENTS == 16);

TEST(Abi, VersionIsOnePointSomething) {
  EXPECT_EQ(GPUSTACK_PLUGIN_ABI_MAJOR, 1);
  EXPECT_STREQ(GPUSTACK_PLUGIN_ENTRY_SYMBOL, "gpustack_plugin_negotiate");
}

TEST(Abi, HasFieldFollowsStructSize) {
  gpustack_device_sample sample{};
  sample.struct_size = GPUSTACK_STRUCT_SIZE(gpustack_device_sample, memory_used_mib);
  EXPECT_TRUE(GPUSTACK_STRUCT_HAS_FIELD(&sample, gpustack_device_sample, memory_used_mib));
  EXPECT_FALSE(GPUSTACK_STRUCT_HAS_FIELD(&sample, gpustack_device_sample, health));
}

}  // namespace

// The C++ helper's Enforcer becomes the ABI struct a plugin hands the host (1.3): every field, the
// arrays pointing at strings that live as long as the identity.
TEST(Abi, AnEnforcerCrossesAsTheStructTheHostReads) {
  static const gpustack::sdk::Enforcer enforcer{.name = "hami-core",
                                                .files = {"libvgpu.so", "ld.so.preload.d"},
                                                .preload = {"libvgpu.so"},
                                                .package_dir = "",
                                                .variant = GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR,
                                                .variant_prefix = "cuda-",
                                                .workdir_env = "",
                                                .default_env = {"LIBCUDA_LOG_LEVEL=0"}};
  const gpustack::sdk::detail::EnforcerTable table(enforcer);
  const gpustack_enforcer& raw = table.raw;
  EXPECT_EQ(raw.struct_size, GPUSTACK_ENFORCER_STRUCT_SIZE_V1_3);
  EXPECT_EQ(std::string_view(raw.name.data, raw.name.size), "hami-core");
  ASSERT_EQ(raw.file_count, 2u);
  EXPECT_EQ(std::string_view(raw.files[1].data, raw.files[1].size), "ld.so.preload.d");
  ASSERT_EQ(raw.preload_count, 1u);
  EXPECT_EQ(std::string_view(raw.preload[0].data, raw.preload[0].size), "libvgpu.so");
  EXPECT_EQ(raw.package_dir.size, 0u);
  EXPECT_EQ(raw.variant, GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR);
  EXPECT_EQ(std::string_view(raw.variant_prefix.data, raw.variant_prefix.size), "cuda-");
  EXPECT_EQ(raw.workdir_env.size, 0u);
  ASSERT_EQ(raw.default_env_count, 1u);
  EXPECT_EQ(std::string_view(raw.default_env[0].data, raw.default_env[0].size),
            "LIBCUDA_LOG_LEVEL=0");
}
