/* A complete plugin in plain C: every hook of ABI 1.1 implemented over three simulated cards, so
 * the host wrapper and the conformance suite meet real data through the raw ABI (no C++ helper).
 *   FAKE-A-0, FAKE-A-1  "Fake Accel A", 16 GiB, 16 logical slices (slice objects), not
 *                       partitionable
 *   FAKE-P-0            "Fake Accel P", 80 GiB, partition mode enabled, profiles 1g.10gb, 4g.40gb
 */
#include "fake_common.h"

enum { CARD_COUNT = 3, MAX_PARTITIONS = 16, SLICES = 8, MAX_SLICES = 16 };

typedef struct card {
  const char* id;
  const char* bus_id;
  int partitioned;
} card;
static const card cards[CARD_COUNT] = {{"FAKE-A-0", "0000:3b:00.0", 0},
                                       {"FAKE-A-1", "0000:3c:00.0", 0},
                                       {"FAKE-P-0", "0000:5e:00.0", 1}};

static const gpustack_placement placements_1g[] = {{0, 1}, {1, 1}, {2, 1}, {3, 1},
                                                   {4, 1}, {5, 1}, {6, 1}};
static const gpustack_placement placements_4g[] = {{0, 4}, {4, 4}};
static const gpustack_partition_profile profile_1g = {
    sizeof(gpustack_partition_profile), NULL, FAKE_STR("1g.10gb"), 9856, 1, 1, 7, placements_1g, 7};
static const gpustack_partition_profile profile_4g = {sizeof(gpustack_partition_profile),
                                                      NULL,
                                                      FAKE_STR("4g.40gb"),
                                                      40192,
                                                      4,
                                                      4,
                                                      2,
                                                      placements_4g,
                                                      2};
static const gpustack_partition_profile* const profiles[] = {&profile_1g, &profile_4g};

typedef struct partition {
  int used;
  int card;
  char id[32];
  const gpustack_partition_profile* profile;
  gpustack_placement placement;
  char owner[64];
  size_t owner_size;
} partition;

typedef struct slice {
  int used;
  int card;
  char id[32];
  char owner[64];
  size_t owner_size;
} slice;

struct gpustack_plugin_instance {
  const gpustack_host_services* host;
  partition partitions[MAX_PARTITIONS];
  unsigned next_partition;
  slice slices[MAX_SLICES];
  unsigned next_slice;
  int health_reported;
};
static struct gpustack_plugin_instance the_instance;

static const uint16_t vendor_ids[] = {0xfa4e};

static int find_card(gpustack_str id) {
  int i;
  for (i = 0; i < CARD_COUNT; ++i) {
    if (fake_str_eq(id, cards[i].id)) return i;
  }
  return -1;
}

static gpustack_status identify(gpustack_plugin_identity* id) {
  if (id == NULL || id->struct_size < GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_0) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "identity struct too small");
  }
  id->manufacturer.data = FAKE_NAME;
  id->manufacturer.size = strlen(FAKE_NAME);
  id->display_name.data = "Fake Full";
  id->display_name.size = 9;
  id->base_resource_name.data = "full.example.com/accel";
  id->base_resource_name.size = strlen(id->base_resource_name.data);
  id->plugin_version.data = "1.0.0";
  id->plugin_version.size = 5;
  id->pci_vendor_ids = vendor_ids;
  id->pci_vendor_id_count = 1;
  id->capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING |
                     GPUSTACK_CAP_PARTITIONING | GPUSTACK_CAP_PROCESS_METRICS |
                     GPUSTACK_CAP_HEALTH_EVENTS | GPUSTACK_CAP_SLICE_OBJECTS;
  id->partition_kind.data = "mig";
  id->partition_kind.size = 3;
  /* 1.1 fields: written only into a struct that carries them. */
  if (GPUSTACK_STRUCT_HAS_FIELD(id, gpustack_plugin_identity, install_hint)) {
    id->runtime_class.data = NULL;
    id->runtime_class.size = 0;
    id->runtime_flags = 0;
    id->install_hint.data = "nothing to install: the cards are simulated";
    id->install_hint.size = strlen(id->install_hint.data);
  }
  return GPUSTACK_STATUS_OK;
}

static gpustack_status init(const gpustack_init_args* args, gpustack_plugin_instance** instance) {
  if (args == NULL || args->struct_size < GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_0 ||
      args->host == NULL || args->host->struct_size < GPUSTACK_HOST_SERVICES_STRUCT_SIZE_V1_0 ||
      instance == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "init_args missing or too small");
  }
  memset(&the_instance, 0, sizeof the_instance);
  the_instance.host = args->host;
  *instance = &the_instance;
  return GPUSTACK_STATUS_OK;
}

static gpustack_status create_instance(gpustack_init_args* args) {
  if (args == NULL || args->struct_size < GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_1) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "init_args missing or too small for 1.1");
  }
  args->instance = NULL;
  return init(args, &args->instance);
}

static void shutdown_plugin(gpustack_plugin_instance* instance) {
  if (instance != NULL) instance->host = NULL;
}

static gpustack_status discover(gpustack_plugin_instance* self,
                                const gpustack_discover_args* args) {
  gpustack_accelerator accel[CARD_COUNT];
  const gpustack_accelerator* group_a[2];
  const gpustack_accelerator* group_p[1];
  gpustack_accelerator_group group;
  gpustack_status status;
  uint32_t physical[CARD_COUNT];
  int i;
  (void)self;
  if (args == NULL || args->struct_size < GPUSTACK_DISCOVER_ARGS_STRUCT_SIZE_V1_0 ||
      args->sink == NULL || args->sink->add_group == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "discover_args missing or too small");
  }
  for (i = 0; i < CARD_COUNT; ++i) {
    gpustack_accelerator* a = &accel[i];
    memset(a, 0, sizeof *a);
    physical[i] = (uint32_t)(i + 10);
    a->struct_size = sizeof *a;
    a->id.data = cards[i].id;
    a->id.size = strlen(cards[i].id);
    a->index = (uint32_t)i;
    a->physical_indexes = &physical[i];
    a->physical_index_count = 1;
    a->memory_mib = cards[i].partitioned ? 81559 : 16384;
    a->pci_bus_id.data = cards[i].bus_id;
    a->pci_bus_id.size = strlen(cards[i].bus_id);
    a->pci_class = 0x030200;
    a->numa_affinity = i < 2 ? 0 : 1;
    a->cpu_affinity.data = i < 2 ? "0-15" : "16-31";
    a->cpu_affinity.size = strlen(a->cpu_affinity.data);
    a->health = GPUSTACK_HEALTH_HEALTHY;
    if (cards[i].partitioned) {
      a->partition_mode = GPUSTACK_PARTITION_MODE_ENABLED;
      a->partition_profiles = profiles;
      a->partition_profile_count = 2;
    } else {
      a->logical_slice_count = 16;
      a->partition_mode = GPUSTACK_PARTITION_MODE_UNSUPPORTED;
    }
  }
  group_a[0] = &accel[0];
  group_a[1] = &accel[1];
  group_p[0] = &accel[2];

  memset(&group, 0, sizeof group);
  group.struct_size = sizeof group;
  group.product.data = "Fake Accel A";
  group.product.size = strlen(group.product.data);
  group.family.data = "Testing";
  group.family.size = 7;
  group.memory_mib = 16384;
  group.cores = 2560;
  group.driver_version.data = "1.2.3";
  group.driver_version.size = 5;
  group.accelerators = group_a;
  group.accelerator_count = 2;
  status = args->sink->add_group(args->sink->host_data, &group);
  if (status != GPUSTACK_STATUS_OK) return fake_fail(status, "host refused group A");

  group.product.data = "Fake Accel P";
  group.memory_mib = 81559;
  group.cores = 16896;
  group.compute_capability.data = "9.0";
  group.compute_capability.size = 3;
  group.accelerators = group_p;
  group.accelerator_count = 1;
  status = args->sink->add_group(args->sink->host_data, &group);
  if (status != GPUSTACK_STATUS_OK) return fake_fail(status, "host refused group P");
  return GPUSTACK_STATUS_OK;
}

static gpustack_status emit(const gpustack_container_edit_sink* sink, gpustack_edit_kind kind,
                            const char* key, const char* value, const char* path) {
  gpustack_container_edit e;
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.kind = kind;
  e.key.data = key;
  e.key.size = key ? strlen(key) : 0;
  e.value.data = value;
  e.value.size = value ? strlen(value) : 0;
  e.host_path.data = path;
  e.host_path.size = path ? strlen(path) : 0;
  e.container_path = e.host_path;
  e.permissions.data = path ? "rw" : NULL;
  e.permissions.size = path ? 2 : 0;
  return sink->add_edit(sink->host_data, &e);
}

static partition* find_partition(gpustack_plugin_instance* self, gpustack_str id) {
  int i;
  for (i = 0; i < MAX_PARTITIONS; ++i) {
    if (self->partitions[i].used && fake_str_eq(id, self->partitions[i].id)) {
      return &self->partitions[i];
    }
  }
  return NULL;
}

static gpustack_status grant(gpustack_plugin_instance* self, const gpustack_grant_args* args) {
  char visible[128] = {0};
  char number[32];
  size_t i;
  gpustack_status status;
  if (args == NULL || args->struct_size < GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_0 ||
      args->sink == NULL || args->sink->add_edit == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "grant_args missing or too small");
  }
  if (args->mode < GPUSTACK_GRANT_EXCLUSIVE || args->mode > GPUSTACK_GRANT_PARTITIONED) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "unknown grant mode");
  }
  if (args->accelerator_id_count == 0 ||
      (args->mode != GPUSTACK_GRANT_EXCLUSIVE && args->accelerator_id_count != 1)) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "wrong number of accelerators for mode");
  }
  for (i = 0; i < args->accelerator_id_count; ++i) {
    int c = find_card(args->accelerator_ids[i]);
    if (c < 0) return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such accelerator");
    if (strlen(visible) + strlen(cards[c].id) + 2 >= sizeof visible) {
      return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "too many accelerators");
    }
    if (i > 0) strcat(visible, ",");
    strcat(visible, cards[c].id);
  }
  if (args->mode == GPUSTACK_GRANT_SLICED) {
    if (args->memory_limit_mib == 0 || args->cores_percentage == 0 ||
        args->cores_percentage > 100) {
      return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT,
                       "a slice needs a VRAM and a compute budget");
    }
    if (cards[find_card(args->accelerator_ids[0])].partitioned) {
      return fake_fail(GPUSTACK_STATUS_FAILED_PRECONDITION, "card is in partition mode");
    }
  }
  if (args->mode == GPUSTACK_GRANT_SLICED &&
      GPUSTACK_STRUCT_HAS_FIELD(args, gpustack_grant_args, slice_id)) {
    int k, found = 0;
    for (k = 0; k < MAX_SLICES; ++k) {
      if (self->slices[k].used && fake_str_eq(args->slice_id, self->slices[k].id)) found = 1;
    }
    if (!found) return fake_fail(GPUSTACK_STATUS_FAILED_PRECONDITION, "the slice is not prepared");
  }
  if (args->mode == GPUSTACK_GRANT_PARTITIONED) {
    partition* p = find_partition(self, args->partition_id);
    if (p == NULL) return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such partition");
    snprintf(visible, sizeof visible, "%s", p->id);
  }
  status = emit(args->sink, GPUSTACK_EDIT_ENV, "FAKE_VISIBLE_DEVICES", visible, NULL);
  if (status == GPUSTACK_STATUS_OK) {
    status = emit(args->sink, GPUSTACK_EDIT_DEVICE_NODE, NULL, NULL, "/dev/fakectl");
  }
  if (status == GPUSTACK_STATUS_OK && args->mode == GPUSTACK_GRANT_SLICED) {
    snprintf(number, sizeof number, "%llu", (unsigned long long)args->memory_limit_mib);
    status = emit(args->sink, GPUSTACK_EDIT_ENV, "FAKE_MEMORY_LIMIT_MIB", number, NULL);
    snprintf(number, sizeof number, "%u", args->cores_percentage);
    if (status == GPUSTACK_STATUS_OK) {
      status = emit(args->sink, GPUSTACK_EDIT_ENV, "FAKE_CORES_PERCENTAGE", number, NULL);
    }
  }
  return status == GPUSTACK_STATUS_OK ? status : fake_fail(status, "host refused an edit");
}

static gpustack_status report(const gpustack_partition_sink* sink, const partition* p) {
  gpustack_partition out;
  memset(&out, 0, sizeof out);
  out.struct_size = sizeof out;
  out.accelerator_id.data = cards[p->card].id;
  out.accelerator_id.size = strlen(cards[p->card].id);
  out.id.data = p->id;
  out.id.size = strlen(p->id);
  out.profile = p->profile->name;
  out.placement = p->placement;
  out.owner.data = p->owner;
  out.owner.size = p->owner_size;
  return sink->add_partition(sink->host_data, &out);
}

static gpustack_status list_partitions(gpustack_plugin_instance* self,
                                       const gpustack_list_partitions_args* args) {
  int i;
  if (args == NULL || args->struct_size < GPUSTACK_LIST_PARTITIONS_ARGS_STRUCT_SIZE_V1_0 ||
      args->sink == NULL || args->sink->add_partition == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "list_partitions_args too small");
  }
  if (args->accelerator_id.size > 0 && find_card(args->accelerator_id) < 0) {
    return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such accelerator");
  }
  for (i = 0; i < MAX_PARTITIONS; ++i) {
    const partition* p = &self->partitions[i];
    gpustack_status status;
    if (!p->used) continue;
    if (args->accelerator_id.size > 0 && !fake_str_eq(args->accelerator_id, cards[p->card].id)) {
      continue;
    }
    status = report(args->sink, p);
    if (status != GPUSTACK_STATUS_OK) return fake_fail(status, "host refused a partition");
  }
  return GPUSTACK_STATUS_OK;
}

static gpustack_status create_partition(gpustack_plugin_instance* self,
                                        const gpustack_create_partition_args* args) {
  const gpustack_partition_profile* profile = NULL;
  partition* slot = NULL;
  size_t i;
  int c, legal = 0;
  if (args == NULL || args->struct_size < GPUSTACK_CREATE_PARTITION_ARGS_STRUCT_SIZE_V1_0 ||
      args->sink == NULL || args->sink->add_partition == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "create_partition_args too small");
  }
  c = find_card(args->accelerator_id);
  if (c < 0) return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such accelerator");
  if (!cards[c].partitioned)
    return fake_fail(GPUSTACK_STATUS_FAILED_PRECONDITION, "partition mode is off");
  if (args->owner.size == 0 || args->owner.size >= sizeof slot->owner) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "owner must be 1..63 bytes");
  }
  for (i = 0; i < 2; ++i) {
    if (fake_str_eq(args->profile, profiles[i]->name.data)) profile = profiles[i];
  }
  if (profile == NULL) return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such profile");
  for (i = 0; i < profile->placement_count; ++i) {
    if (profile->placements[i].start == args->placement.start &&
        profile->placements[i].length == args->placement.length) {
      legal = 1;
    }
  }
  if (!legal) return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "illegal placement for profile");
  for (i = 0; i < MAX_PARTITIONS; ++i) {
    const partition* p = &self->partitions[i];
    if (!p->used) {
      if (slot == NULL) slot = &self->partitions[i];
      continue;
    }
    if (p->card == c && args->placement.start < p->placement.start + p->placement.length &&
        p->placement.start < args->placement.start + args->placement.length) {
      return fake_fail(GPUSTACK_STATUS_ALREADY_EXISTS, "placement overlaps a partition");
    }
  }
  if (slot == NULL) return fake_fail(GPUSTACK_STATUS_RESOURCE_EXHAUSTED, "too many partitions");
  slot->used = 1;
  slot->card = c;
  snprintf(slot->id, sizeof slot->id, "MIG-FAKE-%u", self->next_partition++);
  slot->profile = profile;
  slot->placement = args->placement;
  memcpy(slot->owner, args->owner.data, args->owner.size);
  slot->owner_size = args->owner.size;
  {
    gpustack_status status = report(args->sink, slot);
    if (status != GPUSTACK_STATUS_OK) return fake_fail(status, "host refused the partition");
  }
  return GPUSTACK_STATUS_OK;
}

static gpustack_status destroy_partition(gpustack_plugin_instance* self,
                                         const gpustack_destroy_partition_args* args) {
  partition* p;
  if (args == NULL || args->struct_size < GPUSTACK_DESTROY_PARTITION_ARGS_STRUCT_SIZE_V1_0) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "destroy_partition_args too small");
  }
  p = find_partition(self, args->partition_id);
  if (p == NULL || !fake_str_eq(args->accelerator_id, cards[p->card].id)) {
    return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such partition on that accelerator");
  }
  if (args->owner.size != p->owner_size || memcmp(args->owner.data, p->owner, p->owner_size) != 0) {
    return fake_fail(GPUSTACK_STATUS_FAILED_PRECONDITION, "partition belongs to another owner");
  }
  memset(p, 0, sizeof *p);
  return GPUSTACK_STATUS_OK;
}

static gpustack_measurement measured(double value) {
  gpustack_measurement m;
  m.value = value;
  m.measured = 1;
  m.reserved = 0;
  return m;
}

static gpustack_status sample_metrics(gpustack_plugin_instance* self,
                                      const gpustack_sample_metrics_args* args) {
  int i;
  size_t j;
  if (args == NULL || args->struct_size < GPUSTACK_SAMPLE_METRICS_ARGS_STRUCT_SIZE_V1_0 ||
      args->sink == NULL || args->sink->add_device_sample == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "sample_metrics_args too small");
  }
  for (j = 0; j < args->accelerator_id_count; ++j) {
    if (find_card(args->accelerator_ids[j]) < 0) {
      return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such accelerator");
    }
  }
  for (i = 0; i < CARD_COUNT; ++i) {
    gpustack_device_sample s;
    gpustack_status status;
    int wanted = args->accelerator_id_count == 0;
    for (j = 0; j < args->accelerator_id_count; ++j) {
      if (fake_str_eq(args->accelerator_ids[j], cards[i].id)) wanted = 1;
    }
    if (!wanted) continue;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.accelerator_id.data = cards[i].id;
    s.accelerator_id.size = strlen(cards[i].id);
    s.timestamp_ns = self->host->monotonic_time_ns(self->host->host_data);
    s.memory_total_mib = measured(cards[i].partitioned ? 81559 : 16384);
    s.memory_used_mib = measured(100.0 * (i + 1));
    s.memory_utilization_percent = measured(0.0); /* measured, and really zero */
    s.cores_utilization_percent = measured(12.5);
    /* temperature_celsius stays unmeasured: this fake has no sensor */
    s.power_watts = measured(55.0);
    s.health = GPUSTACK_HEALTH_HEALTHY;
    status = args->sink->add_device_sample(args->sink->host_data, &s);
    if (status != GPUSTACK_STATUS_OK) return fake_fail(status, "host refused a sample");
    if (args->include_processes && args->sink->add_process_sample != NULL) {
      gpustack_process_sample p;
      memset(&p, 0, sizeof p);
      p.struct_size = sizeof p;
      p.accelerator_id = s.accelerator_id;
      p.pid = (uint32_t)(1000 + i);
      p.memory_used_mib = measured(100.0 * (i + 1));
      /* cores_utilization_percent unmeasured: per-process compute is not observable here */
      status = args->sink->add_process_sample(args->sink->host_data, &p);
      if (status != GPUSTACK_STATUS_OK) return fake_fail(status, "host refused a sample");
    }
  }
  return GPUSTACK_STATUS_OK;
}

static gpustack_status poll_health_events(gpustack_plugin_instance* self,
                                          const gpustack_poll_health_args* args) {
  int i;
  if (args == NULL || args->struct_size < GPUSTACK_POLL_HEALTH_ARGS_STRUCT_SIZE_V1_0 ||
      args->sink == NULL || args->sink->add_event == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "poll_health_args too small");
  }
  if (self->health_reported) return GPUSTACK_STATUS_OK; /* nothing changed: return at once */
  self->health_reported = 1;
  for (i = 0; i < CARD_COUNT; ++i) {
    gpustack_health_event e;
    gpustack_status status;
    memset(&e, 0, sizeof e);
    e.struct_size = sizeof e;
    e.accelerator_id.data = cards[i].id;
    e.accelerator_id.size = strlen(cards[i].id);
    e.health = GPUSTACK_HEALTH_HEALTHY;
    status = args->sink->add_event(args->sink->host_data, &e);
    if (status != GPUSTACK_STATUS_OK) return fake_fail(status, "host refused an event");
  }
  return GPUSTACK_STATUS_OK;
}

static gpustack_status list_device_nodes(gpustack_plugin_instance* self,
                                         const gpustack_list_device_nodes_args* args) {
  char path[32];
  size_t j;
  int i;
  gpustack_device_node node;
  (void)self;
  if (args == NULL || args->struct_size < GPUSTACK_LIST_DEVICE_NODES_ARGS_STRUCT_SIZE_V1_1 ||
      args->sink == NULL || args->sink->add_device_node == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "list_device_nodes_args too small");
  }
  for (j = 0; j < args->accelerator_id_count; ++j) {
    if (find_card(args->accelerator_ids[j]) < 0) {
      return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such accelerator");
    }
  }
  memset(&node, 0, sizeof node);
  node.struct_size = sizeof node;
  node.path.data = "fakectl";
  node.path.size = 7;
  if (args->sink->add_device_node(args->sink->host_data, &node) != GPUSTACK_STATUS_OK) {
    return fake_fail(GPUSTACK_STATUS_CANCELLED, "host refused a node");
  }
  for (i = 0; i < CARD_COUNT; ++i) {
    int wanted = args->accelerator_id_count == 0;
    for (j = 0; j < args->accelerator_id_count; ++j) {
      if (fake_str_eq(args->accelerator_ids[j], cards[i].id)) wanted = 1;
    }
    if (!wanted) continue;
    snprintf(path, sizeof path, "fake%d", i + 10);
    node.accelerator_id.data = cards[i].id;
    node.accelerator_id.size = strlen(cards[i].id);
    node.path.data = path;
    node.path.size = strlen(path);
    if (args->sink->add_device_node(args->sink->host_data, &node) != GPUSTACK_STATUS_OK) {
      return fake_fail(GPUSTACK_STATUS_CANCELLED, "host refused a node");
    }
  }
  return GPUSTACK_STATUS_OK;
}

static gpustack_status report_slice(const gpustack_slice_sink* sink, const slice* s) {
  gpustack_slice out;
  memset(&out, 0, sizeof out);
  out.struct_size = sizeof out;
  out.accelerator_id.data = cards[s->card].id;
  out.accelerator_id.size = strlen(cards[s->card].id);
  out.id.data = s->id;
  out.id.size = strlen(s->id);
  return sink->add_slice(sink->host_data, &out);
}

static gpustack_status prepare_slice(gpustack_plugin_instance* self,
                                     const gpustack_prepare_slice_args* args) {
  slice* free_slot = NULL;
  int c, i;
  if (args == NULL || args->struct_size < GPUSTACK_PREPARE_SLICE_ARGS_STRUCT_SIZE_V1_1 ||
      args->sink == NULL || args->sink->add_slice == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "prepare_slice_args too small");
  }
  c = find_card(args->accelerator_id);
  if (c < 0) return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such accelerator");
  if (cards[c].partitioned) return fake_fail(GPUSTACK_STATUS_FAILED_PRECONDITION, "partitioned");
  if (args->owner.size == 0 || args->owner.size >= sizeof free_slot->owner ||
      args->memory_limit_mib == 0 || args->cores_percentage == 0 || args->cores_percentage > 100) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "a slice needs an owner and a budget");
  }
  for (i = 0; i < MAX_SLICES; ++i) {
    slice* s = &self->slices[i];
    if (!s->used) {
      if (free_slot == NULL) free_slot = s;
      continue;
    }
    if (s->card == c && s->owner_size == args->owner.size &&
        memcmp(s->owner, args->owner.data, s->owner_size) == 0) {
      return report_slice(args->sink, s); /* the same owner finds its slice again */
    }
  }
  if (free_slot == NULL) return fake_fail(GPUSTACK_STATUS_RESOURCE_EXHAUSTED, "too many slices");
  free_slot->used = 1;
  free_slot->card = c;
  snprintf(free_slot->id, sizeof free_slot->id, "SLICE-%d-%u", c, self->next_slice++);
  memcpy(free_slot->owner, args->owner.data, args->owner.size);
  free_slot->owner_size = args->owner.size;
  return report_slice(args->sink, free_slot);
}

static gpustack_status unprepare_slice(gpustack_plugin_instance* self,
                                       const gpustack_unprepare_slice_args* args) {
  int i;
  if (args == NULL || args->struct_size < GPUSTACK_UNPREPARE_SLICE_ARGS_STRUCT_SIZE_V1_1) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "unprepare_slice_args too small");
  }
  for (i = 0; i < MAX_SLICES; ++i) {
    slice* s = &self->slices[i];
    if (!s->used || !fake_str_eq(args->slice_id, s->id)) continue;
    if (s->owner_size != args->owner.size || memcmp(s->owner, args->owner.data, s->owner_size)) {
      return fake_fail(GPUSTACK_STATUS_FAILED_PRECONDITION, "the slice belongs to another owner");
    }
    memset(s, 0, sizeof *s);
    return GPUSTACK_STATUS_OK;
  }
  return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "no such slice");
}

static const gpustack_plugin_api api = {sizeof(gpustack_plugin_api),
                                        NULL,
                                        GPUSTACK_PLUGIN_ABI_MAJOR,
                                        GPUSTACK_PLUGIN_ABI_MINOR,
                                        fake_last_error_message,
                                        identify,
                                        init,
                                        shutdown_plugin,
                                        discover,
                                        grant,
                                        list_partitions,
                                        create_partition,
                                        destroy_partition,
                                        sample_metrics,
                                        poll_health_events,
                                        create_instance,
                                        list_device_nodes,
                                        prepare_slice,
                                        unprepare_slice};

GPUSTACK_PLUGIN_EXPORT gpustack_status gpustack_plugin_negotiate(gpustack_negotiate_args* args) {
  return fake_negotiate(args, GPUSTACK_PLUGIN_ABI_MAJOR, GPUSTACK_PLUGIN_ABI_MINOR, &api);
}
