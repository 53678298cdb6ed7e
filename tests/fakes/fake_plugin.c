/* A minimal C plugin, varied by compile definitions into the loader's contract cases:
 *   (none)              no-op: identifies, inits, discovers nothing
 *   FAKE_INIT_FAILS     init returns UNAVAILABLE with a message
 *   FAKE_NO_ENTRY       exports a differently named symbol instead of the entry point
 *   FAKE_ANSWER_MAJOR=n answers ABI major n and refuses the host's
 *   FAKE_ANSWER_MINOR=n answers ABI minor n (older or newer than the host)
 *   FAKE_TABLE_SIZE=n   reports a function table struct_size of n bytes
 *   FAKE_LARGER_STRUCTS the table and every reported struct carry unknown trailing fields
 *   FAKE_IDENTITY_NAME  identifies under another manufacturer name than its manifest
 *   FAKE_CONSTRUCTOR_MARKER  writes the file named by $FAKE_MARKER when the library is loaded
 *   FAKE_NO_GRANT       claims sharing but leaves grant NULL (a 1.1 host refuses it; at 1.0
 *                       the claim is dropped)
 *   FAKE_ENFORCER       declares a slice enforcer (ABI 1.3), as $FAKE_ENFORCER_CASE says:
 *                         unset: a valid one; slash, unlisted, outside, bad_env, no_slicing,
 *                         small: each breaks one rule the host checks
 *   FAKE_CONFIGURABLE   behaviour chosen at run time through config_get:
 *                         discover_status=<n>  discover returns status n with a message
 *                         discover_emit=small_group|null_string|bad_health|one_card|flood  emits it
 *                           (flood: two million groups, ignoring every refusal)
 *                         log=<text>           logs <text> at INFO during init
 *                         misbehave=crash|abort|exit|hang  does that inside discover, as a
 *                           plugin with a bug (or a vendor library) would
 *                         misbehave=close_stdout  closes the process's stdout inside discover
 *                         misbehave=thread_crash  starts a thread that faults in the plugin's own
 *                           code a second later, after discover has returned
 *                       and, from the environment (before any config exists):
 *                         FAKE_HANG_IN_CONSTRUCTOR=1  the library's constructor never returns */
#include "fake_common.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef FAKE_ANSWER_MAJOR
#define FAKE_ANSWER_MAJOR GPUSTACK_PLUGIN_ABI_MAJOR
#endif
#ifndef FAKE_ANSWER_MINOR
#define FAKE_ANSWER_MINOR GPUSTACK_PLUGIN_ABI_MINOR
#endif
#ifndef FAKE_IDENTITY_NAME
#define FAKE_IDENTITY_NAME FAKE_NAME
#endif

static const uint16_t fake_vendor_ids[] = {0xfa4e};

struct gpustack_plugin_instance {
  const gpustack_host_services* host;
};
__attribute__((unused)) static struct gpustack_plugin_instance fake_instance;

#ifdef FAKE_CONSTRUCTOR_MARKER
__attribute__((constructor)) static void fake_mark_loaded(void) {
  const char* marker = getenv("FAKE_MARKER");
  if (marker != NULL) {
    FILE* f = fopen(marker, "w");
    if (f != NULL) fclose(f);
  }
}
#endif

#ifdef FAKE_CONFIGURABLE
/* A vendor library whose initialiser waits for a device that never answers. */
__attribute__((constructor)) static void fake_maybe_hang_loading(void) {
  const char* hang = getenv("FAKE_HANG_IN_CONSTRUCTOR");
  if (hang != NULL && hang[0] == '1') {
    for (;;) pause();
  }
}
#endif

#ifdef FAKE_ENFORCER
static const gpustack_str fake_enforcer_files[] = {FAKE_STR("libtest_enforcer.so"),
                                                   FAKE_STR("enforcer.conf")};
static const gpustack_str fake_enforcer_bad_files[] = {FAKE_STR("../libtest_enforcer.so")};
static const gpustack_str fake_enforcer_preload[] = {FAKE_STR("libtest_enforcer.so")};
static const gpustack_str fake_enforcer_unlisted[] = {FAKE_STR("libelsewhere.so")};
static const gpustack_str fake_enforcer_env[] = {FAKE_STR("TEST_ENFORCER_LOG=0")};
static const gpustack_str fake_enforcer_bad_env[] = {FAKE_STR("1TEST=0")};
static gpustack_enforcer fake_enforcer;

/* The declaration $FAKE_ENFORCER_CASE asks for; sets *slicing to whether to claim slices. */
static const gpustack_enforcer* fake_enforcer_of(const char* which, int* slicing) {
  gpustack_enforcer* e = &fake_enforcer;
  memset(e, 0, sizeof(*e));
  e->struct_size = sizeof(*e);
  e->name = (gpustack_str)FAKE_STR("test-enforcer");
  e->files = fake_enforcer_files;
  e->file_count = 2;
  e->preload = fake_enforcer_preload;
  e->preload_count = 1;
  e->package_dir = (gpustack_str)FAKE_STR("enforcer");
  e->variant = GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR;
  e->variant_prefix = (gpustack_str)FAKE_STR("cuda-");
  e->workdir_env = (gpustack_str)FAKE_STR("TEST_ENFORCER_DIR");
  e->default_env = fake_enforcer_env;
  e->default_env_count = 1;
  *slicing = 1;
  if (which == NULL) return e;
  if (strcmp(which, "slash") == 0) e->files = fake_enforcer_bad_files, e->file_count = 1;
  if (strcmp(which, "unlisted") == 0) e->preload = fake_enforcer_unlisted;
  if (strcmp(which, "outside") == 0) e->package_dir = (gpustack_str)FAKE_STR("../elsewhere");
  if (strcmp(which, "bad_env") == 0) e->default_env = fake_enforcer_bad_env;
  if (strcmp(which, "no_slicing") == 0) *slicing = 0;
  if (strcmp(which, "small") == 0) e->struct_size = 16;
  return e;
}
#endif

static gpustack_status fake_identify(gpustack_plugin_identity* id) {
  if (id == NULL || id->struct_size < GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_0) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "identity struct too small");
  }
  /* Every field exists since 1.0, so the minimum size covers them all. */
  id->manufacturer.data = FAKE_IDENTITY_NAME;
  id->manufacturer.size = strlen(FAKE_IDENTITY_NAME);
  id->display_name.data = "Fake " FAKE_NAME;
  id->display_name.size = strlen(id->display_name.data);
  id->base_resource_name.data = "fake.example.com/accel";
  id->base_resource_name.size = strlen(id->base_resource_name.data);
  id->plugin_version.data = "0.0.1";
  id->plugin_version.size = 5;
  id->pci_vendor_ids = fake_vendor_ids;
  id->pci_vendor_id_count = 1;
  id->capabilities = GPUSTACK_CAP_SHARED;
  id->partition_kind.data = NULL;
  id->partition_kind.size = 0;
  if (GPUSTACK_STRUCT_HAS_FIELD(id, gpustack_plugin_identity, install_hint)) {
    id->install_hint.data = "nothing to install: a fake";
    id->install_hint.size = strlen(id->install_hint.data);
  }
#ifdef FAKE_ENFORCER
  if (GPUSTACK_STRUCT_HAS_FIELD(id, gpustack_plugin_identity, enforcer)) {
    int slicing = 0;
    id->enforcer = fake_enforcer_of(getenv("FAKE_ENFORCER_CASE"), &slicing);
    if (slicing) id->capabilities |= GPUSTACK_CAP_LOGICAL_SLICING;
  }
#endif
  return GPUSTACK_STATUS_OK;
}

__attribute__((unused)) static int fake_config(const struct gpustack_plugin_instance* self,
                                               const char* key, gpustack_str* value) {
  gpustack_str k;
  k.data = key;
  k.size = strlen(key);
  return self->host->config_get(self->host->host_data, k, value) == GPUSTACK_STATUS_OK;
}

static gpustack_status fake_init(const gpustack_init_args* args,
                                 gpustack_plugin_instance** instance) {
#ifdef FAKE_INIT_FAILS
  (void)args;
  (void)instance;
  return fake_fail(GPUSTACK_STATUS_UNAVAILABLE, "fake management library not found");
#else
  if (args == NULL || args->struct_size < GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_0 ||
      args->host == NULL || args->host->struct_size < GPUSTACK_HOST_SERVICES_STRUCT_SIZE_V1_0) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "init_args too small");
  }
  fake_instance.host = args->host;
  {
    gpustack_str text;
    if (fake_config(&fake_instance, "log", &text)) {
      gpustack_str file = FAKE_STR(__FILE__);
      args->host->log(args->host->host_data, GPUSTACK_LOG_INFO, text, file, __LINE__);
    }
  }
  *instance = &fake_instance;
  return GPUSTACK_STATUS_OK;
#endif
}

static void fake_shutdown(gpustack_plugin_instance* instance) {
  if (instance != NULL) instance->host = NULL;
}

#ifdef FAKE_LARGER_STRUCTS
/* Structs as a future minor might send them: the 1.0 layout followed by fields this host does
 * not know. The host must read the prefix and ignore the rest. */
struct future_accelerator {
  gpustack_accelerator base;
  uint64_t future_field[4];
};
struct future_group {
  gpustack_accelerator_group base;
  uint64_t future_field[4];
};
#endif

#ifdef FAKE_CONFIGURABLE
/* A plugin's own worker thread with a bug. A trap instruction faults at an address inside the
 * plugin in every build (a sanitizer would intercept a null store first). */
static void* fake_crash_later(void* unused) {
  (void)unused;
  sleep(1);
  __builtin_trap();
  return NULL;
}
#endif

static gpustack_status fake_discover(gpustack_plugin_instance* instance,
                                     const gpustack_discover_args* args) {
  if (args == NULL || args->struct_size < GPUSTACK_DISCOVER_ARGS_STRUCT_SIZE_V1_0 ||
      args->sink == NULL || args->sink->add_group == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "discover_args too small");
  }
  (void)instance;
#ifdef FAKE_CONFIGURABLE
  {
    gpustack_str value;
    if (fake_config(instance, "misbehave", &value)) {
      if (fake_str_eq(value, "crash")) {
#if defined(__SANITIZE_ADDRESS__)
        raise(SIGSEGV); /* UBSan would stop the null store below before it faults */
#else
        volatile int* nowhere = NULL;
        *nowhere = 1; /* a real fault: SIGSEGV raised by the kernel */
#endif
      }
      if (fake_str_eq(value, "abort")) abort();
      if (fake_str_eq(value, "exit")) exit(0);
      if (fake_str_eq(value, "hang")) {
        for (;;) pause();
      }
      if (fake_str_eq(value, "close_stdout")) close(STDOUT_FILENO);
      if (fake_str_eq(value, "thread_crash")) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, fake_crash_later, NULL) == 0) pthread_detach(thread);
      }
    }
    if (fake_config(instance, "discover_status", &value)) {
      char text[32] = {0};
      char message[64];
      memcpy(text, value.data, value.size < sizeof text - 1 ? value.size : sizeof text - 1);
      snprintf(message, sizeof message, "fake status %s", text);
      return fake_fail((gpustack_status)atoi(text), message);
    }
    if (fake_config(instance, "discover_emit", &value)) {
      gpustack_accelerator a;
      const gpustack_accelerator* list[1];
      gpustack_accelerator_group g;
      memset(&a, 0, sizeof a);
      memset(&g, 0, sizeof g);
      a.struct_size = sizeof a;
      a.id.data = "FAKE-0";
      a.id.size = 6;
      a.health = GPUSTACK_HEALTH_HEALTHY;
      list[0] = &a;
      g.struct_size = sizeof g;
      g.product.data = "Fake";
      g.product.size = 4;
      g.memory_mib = 1024;
      g.accelerators = list;
      g.accelerator_count = 1;
      if (fake_str_eq(value, "small_group")) g.struct_size = 16;
      if (fake_str_eq(value, "null_string")) a.id.data = NULL;
      if (fake_str_eq(value, "bad_health")) a.health = 77;
      a.memory_mib = 1024;
      if (fake_str_eq(value, "flood")) {
        /* Two million groups, every refusal ignored: the host must refuse at its bound. */
        for (int i = 0; i < 2000000; ++i) (void)args->sink->add_group(args->sink->host_data, &g);
        return GPUSTACK_STATUS_OK;
      }
      return args->sink->add_group(args->sink->host_data, &g);
    }
  }
#endif
#ifdef FAKE_LARGER_STRUCTS
  {
    static const uint32_t physical[] = {0};
    struct future_accelerator a;
    const gpustack_accelerator* list[1];
    struct future_group g;
    memset(&a, 0xab, sizeof a); /* garbage in the unknown tail must not matter */
    memset(&a.base, 0, sizeof a.base);
    a.base.struct_size = sizeof a;
    a.base.id.data = "FUTURE-0";
    a.base.id.size = 8;
    a.base.physical_indexes = physical;
    a.base.physical_index_count = 1;
    a.base.memory_mib = 2048;
    a.base.numa_affinity = -1;
    a.base.health = GPUSTACK_HEALTH_HEALTHY;
    list[0] = &a.base;
    memset(&g, 0xcd, sizeof g);
    memset(&g.base, 0, sizeof g.base);
    g.base.struct_size = sizeof g;
    g.base.product.data = "Future Accelerator";
    g.base.product.size = strlen(g.base.product.data);
    g.base.memory_mib = 2048;
    g.base.accelerators = list;
    g.base.accelerator_count = 1;
    return args->sink->add_group(args->sink->host_data, &g.base);
  }
#else
  return GPUSTACK_STATUS_OK; /* no device present */
#endif
}

#ifndef FAKE_NO_GRANT
/* The smallest honest grant: it names the cards it was given. */
static gpustack_status fake_grant(gpustack_plugin_instance* instance,
                                  const gpustack_grant_args* args) {
  gpustack_container_edit e;
  (void)instance;
  if (args == NULL || args->struct_size < GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_0 ||
      args->sink == NULL || args->sink->add_edit == NULL) {
    return fake_fail(GPUSTACK_STATUS_INVALID_ARGUMENT, "grant_args too small");
  }
  if (args->accelerator_id_count != 1 || (!fake_str_eq(args->accelerator_ids[0], "FAKE-0") &&
                                          !fake_str_eq(args->accelerator_ids[0], "FUTURE-0"))) {
    return fake_fail(GPUSTACK_STATUS_NOT_FOUND, "this fake has one card, FAKE-0 (or FUTURE-0)");
  }
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.kind = GPUSTACK_EDIT_ENV;
  e.key.data = "FAKE_VISIBLE_DEVICES";
  e.key.size = strlen(e.key.data);
  e.value = args->accelerator_ids[0];
  return args->sink->add_edit(args->sink->host_data, &e);
}
#endif

#ifdef FAKE_NO_GRANT
#define FAKE_GRANT NULL
#else
#define FAKE_GRANT fake_grant
#endif

#ifdef FAKE_LARGER_STRUCTS
struct future_api {
  gpustack_plugin_api base;
  void (*future_hooks[8])(void);
};
static const struct future_api fake_api_storage = {
    {sizeof(struct future_api), NULL, FAKE_ANSWER_MAJOR, FAKE_ANSWER_MINOR, fake_last_error_message,
     fake_identify, fake_init, fake_shutdown, fake_discover, FAKE_GRANT, NULL, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, NULL},
    {NULL}};
#define FAKE_API (&fake_api_storage.base)
#else
#ifndef FAKE_TABLE_SIZE
#define FAKE_TABLE_SIZE sizeof(gpustack_plugin_api)
#endif
static const gpustack_plugin_api fake_api_storage = {FAKE_TABLE_SIZE,
                                                     NULL,
                                                     FAKE_ANSWER_MAJOR,
                                                     FAKE_ANSWER_MINOR,
                                                     fake_last_error_message,
                                                     fake_identify,
                                                     fake_init,
                                                     fake_shutdown,
                                                     fake_discover,
                                                     FAKE_GRANT,
                                                     NULL,
                                                     NULL,
                                                     NULL,
                                                     NULL,
                                                     NULL,
                                                     NULL, /* 1.1: create_instance */
                                                     NULL,
                                                     NULL,
                                                     NULL};
#define FAKE_API (&fake_api_storage)
#endif

#ifdef FAKE_NO_ENTRY
GPUSTACK_PLUGIN_EXPORT gpustack_status
gpustack_plugin_negotiate_misspelled(gpustack_negotiate_args* args)
#else
GPUSTACK_PLUGIN_EXPORT gpustack_status gpustack_plugin_negotiate(gpustack_negotiate_args* args)
#endif
{
  return fake_negotiate(args, FAKE_ANSWER_MAJOR, FAKE_ANSWER_MINOR, FAKE_API);
}
