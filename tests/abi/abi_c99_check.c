/* The ABI header must be plain C99: this file is compiled with -std=c99 -pedantic-errors. It also
 * checks, in C, that each pinned 1.0 size constant equals the struct as C lays it out. */
#include <gpustack/plugin.h>

#include <stdio.h>

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                        \
    }                                                                    \
  } while (0)

int main(void) {
  int failures = 0;
  CHECK(GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_1 == sizeof(gpustack_plugin_api));
  CHECK(GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_0 < GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_1);
  CHECK(GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_3 == sizeof(gpustack_plugin_identity));
  CHECK(GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_2 < GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_3);
  CHECK(GPUSTACK_ENFORCER_STRUCT_SIZE_V1_3 == sizeof(gpustack_enforcer));
  CHECK(GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_0 < GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_1);
  CHECK(GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_1 < GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_2);
  CHECK(GPUSTACK_NEGOTIATE_ARGS_STRUCT_SIZE_V1_0 == sizeof(gpustack_negotiate_args));
  CHECK(GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_1 == sizeof(gpustack_init_args));
  CHECK(GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_0 < GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_1);
  CHECK(GPUSTACK_HOST_SERVICES_STRUCT_SIZE_V1_0 == sizeof(gpustack_host_services));
  CHECK(GPUSTACK_PCI_DEVICE_STRUCT_SIZE_V1_0 == sizeof(gpustack_pci_device));
  CHECK(GPUSTACK_ACCELERATOR_STRUCT_SIZE_V1_0 == sizeof(gpustack_accelerator));
  CHECK(GPUSTACK_ACCELERATOR_GROUP_STRUCT_SIZE_V1_0 == sizeof(gpustack_accelerator_group));
  CHECK(GPUSTACK_PARTITION_PROFILE_STRUCT_SIZE_V1_0 == sizeof(gpustack_partition_profile));
  CHECK(GPUSTACK_DEVICE_SAMPLE_STRUCT_SIZE_V1_0 == sizeof(gpustack_device_sample));
  CHECK(GPUSTACK_PROCESS_SAMPLE_STRUCT_SIZE_V1_0 == sizeof(gpustack_process_sample));
  CHECK(GPUSTACK_CONTAINER_EDIT_STRUCT_SIZE_V1_0 == sizeof(gpustack_container_edit));
  CHECK(GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_1 == sizeof(gpustack_grant_args));
  CHECK(GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_0 < GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_1);
  CHECK(GPUSTACK_PARTITION_STRUCT_SIZE_V1_0 == sizeof(gpustack_partition));
  CHECK(GPUSTACK_HEALTH_EVENT_STRUCT_SIZE_V1_0 == sizeof(gpustack_health_event));
  CHECK(sizeof(gpustack_status) == 4 && sizeof(gpustack_health) == 4);
  CHECK(GPUSTACK_STATUS_INCOMPATIBLE_VERSION == 17);
  CHECK(GPUSTACK_EXTENSION_STRUCT_SIZE_V1_1 == sizeof(gpustack_extension));
  CHECK(GPUSTACK_DEVICE_NODE_STRUCT_SIZE_V1_1 == sizeof(gpustack_device_node));
  CHECK(GPUSTACK_PREPARE_SLICE_ARGS_STRUCT_SIZE_V1_1 == sizeof(gpustack_prepare_slice_args));
  CHECK(GPUSTACK_CAP_SLICE_OBJECTS == 32);
  {
    gpustack_accelerator a;
    a.struct_size = GPUSTACK_ACCELERATOR_STRUCT_SIZE_V1_0;
    CHECK(GPUSTACK_STRUCT_HAS_FIELD(&a, gpustack_accelerator, partition_profile_count));
    a.struct_size = GPUSTACK_STRUCT_SIZE(gpustack_accelerator, index);
    CHECK(!GPUSTACK_STRUCT_HAS_FIELD(&a, gpustack_accelerator, memory_mib));
  }
  if (failures == 0) printf("plugin.h is valid C99 and its 1.0 size constants hold\n");
  return failures == 0 ? 0 : 1;
}
