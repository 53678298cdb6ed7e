/*
 * GPUStack Operator plugin ABI.
 *
 * This header is the whole contract between the GPUStack host (the node daemon and the
 * operator's device tools) and a manufacturer plugin (one shared library per manufacturer).
 * Nothing else in the SDK is part of the ABI. It is C99, uses only <stddef.h> and <stdint.h>,
 * and must stay compilable as C99 -pedantic and as C++.
 *
 * ---------------------------------------------------------------------------------------------
 * Versioning
 * ---------------------------------------------------------------------------------------------
 * GPUSTACK_PLUGIN_ABI_MAJOR is bumped (and every plugin must be rebuilt) when anything already
 * published changes: a field or function pointer is removed, retyped, renamed in a way that
 * changes its meaning, or moved; an enum value changes meaning; a documented rule (ownership,
 * lifetime, threading) gets stricter for the other side.
 *
 * GPUSTACK_PLUGIN_ABI_MINOR is bumped for additive changes: a field or function pointer appended
 * at the END of a struct, a new enum value, a new capability bit, a new struct reachable through
 * a `next` chain. Every addition is commented with the minor that introduced it, and every
 * minor gets an entry in sdk/CHANGELOG.md. The minor resets to 0 on a major bump.
 *
 * ---------------------------------------------------------------------------------------------
 * Negotiation
 * ---------------------------------------------------------------------------------------------
 * The plugin exports exactly one symbol, gpustack_plugin_negotiate(). The host fills in the
 * ABI version it speaks; the plugin answers with the version it speaks and its function table,
 * or refuses with GPUSTACK_STATUS_INCOMPATIBLE_VERSION when it does not implement the host's
 * major. Both sides then use min(host minor, plugin minor) features of the common major.
 *
 * ---------------------------------------------------------------------------------------------
 * Struct evolution (struct_size)
 * ---------------------------------------------------------------------------------------------
 * Every struct that crosses the boundary starts with `size_t struct_size` (set by whoever fills
 * the struct, to sizeof the struct as that side was compiled) and `next`, an extension chain:
 * NULL until a minor defines a chained struct. A chained struct starts with the fields of
 * gpustack_extension ({struct_size, next, type}), and a receiver skips entries whose type it does
 * not know. Structs end without tail padding (an explicit `reserved` field where needed), so a
 * later field never lands in bytes an older sender left uninitialised. Receivers follow one rule:
 *  - struct_size smaller than the struct's oldest size constant (GPUSTACK_*_STRUCT_SIZE_V1_0,
 *    or _V1_1 for a struct new in 1.1): refuse with GPUSTACK_STATUS_INVALID_ARGUMENT (or, for
 *    the host, refuse the plugin);
 *  - struct_size larger than the receiver knows: read the known prefix, ignore the rest;
 *  - fields the sender did not include (between the minimum and the receiver's size) read as 0.
 * GPUSTACK_STRUCT_HAS_FIELD() tests whether a received struct carries a field. Both sides send
 * only the enum values and capability bits of the negotiated version. A side that
 * fills a struct the OTHER side allocated (see gpustack_plugin_identity) writes only the fields
 * that fit in the struct_size the allocator set.
 *
 * ---------------------------------------------------------------------------------------------
 * Ownership and lifetime: whoever allocates frees.
 * ---------------------------------------------------------------------------------------------
 *  - Strings are gpustack_str: UTF-8, pointer plus length, NOT NUL-terminated by contract.
 *  - Anything the host passes into a call is valid only for that call, unless its doc says
 *    otherwise (what gpustack_init_args points to lives until shutdown; the args struct
 *    itself only for the call).
 *  - Lists the plugin produces reach the host through host-provided sink callbacks. Everything a
 *    sink receives is valid only during that sink call; the host copies what it keeps.
 *  - What the plugin returns outside a sink (the function table, identity strings) is static:
 *    valid while the library is loaded.
 *  - Bounds: what one hook call may hand back through its sink is bounded, so a plugin (or a
 *    vendor library) gone wrong cannot exhaust the host's memory. Per call: at most 65,536
 *    structs in all (every group, accelerator, edit, partition, sample, process, event and
 *    device node counts one) and 16 MiB of strings and arrays; per string 1 MiB, per array 65,536
 *    entries. Past a bound the sink refuses the value (INVALID_ARGUMENT) and every later one, and
 *    the call fails with "reported invalid output: more than ...", whatever the plugin returns.
 *  - gpustack_str, gpustack_placement and gpustack_measurement are frozen value types: they carry
 *    no struct_size and never change within a major version.
 *  - No memory is ever freed on the other side of the boundary. No C++ types or exceptions cross
 *    it; a plugin written in C++ catches everything at the boundary (see plugin.hpp).
 *
 * ---------------------------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------------------------------
 * Every function that can fail returns gpustack_status (a numbered code, gRPC-style). On any
 * non-OK return the plugin sets a message that the host reads with
 * gpustack_plugin_api.last_error_message() from the same thread, before its next call into the
 * plugin on that thread. An unknown code received by the host is treated as
 * GPUSTACK_STATUS_UNKNOWN.
 *
 * Why a per-thread message and not owned error objects (PJRT's PJRT_Error, freed by the host
 * through the plugin): the host runs every call of one instance on one thread of its own (its
 * watchdog's), reads the message there at once, and never carries a plugin error object past
 * the call, so an object with its own lifetime would buy nothing and add a destroy call the host
 * could forget or make on a hung plugin. A failure path never allocates across the boundary, and
 * a status is still meaningful when the message could not be made (out of memory). Decided for
 * every 1.x minor (sdk/CHANGELOG.md, 1.1).
 *
 * ---------------------------------------------------------------------------------------------
 * Threading
 * ---------------------------------------------------------------------------------------------
 * Unless a function says otherwise: the host serializes calls on one plugin instance (it never
 * makes two calls on the same instance concurrently, except poll_health_events, which runs on its
 * own thread, and last_error_message); a plugin may be called from different threads over time;
 * sinks are called only on the thread that made the call, before the call returns; a plugin never
 * calls back into the host after the call that received a callback has returned, except for the
 * host services given at init, which stay callable from any thread until shutdown returns.
 *
 * Trust model: plugins run inside the host process and are trusted code. The host validates
 * what plugins report (sizes, counts, enum values) so a buggy plugin is refused or reported,
 * but it cannot defend against a plugin that corrupts memory. It calls every hook under a
 * deadline (a plugin that does not return is marked hung and never called again) and records
 * which plugin and hook were running, so a plugin that crashes the process is named and not
 * loaded again until its file changes.
 *
 * ---------------------------------------------------------------------------------------------
 * Capabilities and hooks
 * ---------------------------------------------------------------------------------------------
 * A plugin that claims a capability provides its hooks; the host refuses a plugin whose table
 * leaves one NULL, and the conformance suite fails it:
 *  - discover (any card can be granted whole): grant;
 *  - GPUSTACK_CAP_SHARED, GPUSTACK_CAP_LOGICAL_SLICING: grant;
 *  - GPUSTACK_CAP_PARTITIONING: grant, list_partitions, create_partition, destroy_partition;
 *  - GPUSTACK_CAP_PROCESS_METRICS: sample_metrics;
 *  - GPUSTACK_CAP_HEALTH_EVENTS: poll_health_events;
 *  - GPUSTACK_CAP_SLICE_OBJECTS (since 1.1): prepare_slice, unprepare_slice.
 * A hook the plugin does not provide is NULL in its table, never a function that answers
 * UNIMPLEMENTED, so the host can tell what a plugin does before calling it.
 */
#ifndef GPUSTACK_PLUGIN_H_
#define GPUSTACK_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================================
 * Version, symbol and helper macros
 * ========================================================================================== */

#define GPUSTACK_PLUGIN_ABI_MAJOR 1
#define GPUSTACK_PLUGIN_ABI_MINOR 4

/* The one symbol a plugin exports, as a string for dlsym. */
#define GPUSTACK_PLUGIN_ENTRY_SYMBOL "gpustack_plugin_negotiate"

#if defined(_WIN32)
#define GPUSTACK_PLUGIN_EXPORT __declspec(dllexport)
#else
#define GPUSTACK_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Size of `type` up to and including `last_field`: pins a struct's size to one ABI version. */
#ifdef __cplusplus
#define GPUSTACK_FIELD_SIZEOF(type, field) sizeof(type::field)
#else
#define GPUSTACK_FIELD_SIZEOF(type, field) sizeof(((type*)0)->field)
#endif
#define GPUSTACK_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + GPUSTACK_FIELD_SIZEOF(type, last_field))

/* Non-zero when the struct at `ptr` (of `type`) was filled far enough to carry `field`. */
#define GPUSTACK_STRUCT_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= GPUSTACK_STRUCT_SIZE(type, field))

/* ============================================================================================
 * Basic types
 * ========================================================================================== */

/* A UTF-8 string: `data` need not be NUL-terminated; `size` is in bytes. {NULL, 0} is empty. */
typedef struct gpustack_str {
  const char* data;
  size_t size;
} gpustack_str;

/* Status codes. Values 0..16 mean what the gRPC codes of the same number mean. */
typedef int32_t gpustack_status;
enum {
  GPUSTACK_STATUS_OK = 0,
  GPUSTACK_STATUS_CANCELLED = 1,
  GPUSTACK_STATUS_UNKNOWN = 2,
  GPUSTACK_STATUS_INVALID_ARGUMENT = 3,
  GPUSTACK_STATUS_DEADLINE_EXCEEDED = 4,
  GPUSTACK_STATUS_NOT_FOUND = 5,
  GPUSTACK_STATUS_ALREADY_EXISTS = 6,
  GPUSTACK_STATUS_PERMISSION_DENIED = 7,
  GPUSTACK_STATUS_RESOURCE_EXHAUSTED = 8,
  GPUSTACK_STATUS_FAILED_PRECONDITION = 9,
  GPUSTACK_STATUS_ABORTED = 10,
  GPUSTACK_STATUS_OUT_OF_RANGE = 11,
  GPUSTACK_STATUS_UNIMPLEMENTED = 12, /* also what a NULL optional function pointer means */
  GPUSTACK_STATUS_INTERNAL = 13,
  GPUSTACK_STATUS_UNAVAILABLE = 14, /* e.g. the vendor management library is not installed */
  GPUSTACK_STATUS_DATA_LOSS = 15,
  GPUSTACK_STATUS_UNAUTHENTICATED = 16,
  GPUSTACK_STATUS_INCOMPATIBLE_VERSION = 17, /* negotiation: no common ABI major */
  GPUSTACK_STATUS_MAX_ENUM = 0x7FFFFFFF
};

/* Log levels for gpustack_host_services.log. */
typedef int32_t gpustack_log_level;
enum {
  GPUSTACK_LOG_TRACE = 0,
  GPUSTACK_LOG_DEBUG = 1,
  GPUSTACK_LOG_INFO = 2,
  GPUSTACK_LOG_WARN = 3,
  GPUSTACK_LOG_ERROR = 4,
  GPUSTACK_LOG_MAX_ENUM = 0x7FFFFFFF
};

/* The head of every struct chained through a `next` pointer (since 1.1): a receiver walks the
 * chain and skips entries whose `type` it does not know. No chained struct is defined yet; each
 * one takes a value of gpustack_extension_type and an entry in sdk/CHANGELOG.md. */
typedef int32_t gpustack_extension_type;
enum { GPUSTACK_EXTENSION_NONE = 0, GPUSTACK_EXTENSION_MAX_ENUM = 0x7FFFFFFF };

typedef struct gpustack_extension {
  size_t struct_size;
  const void* next;
  gpustack_extension_type type;
  int32_t reserved; /* 0 */
} gpustack_extension;
#define GPUSTACK_EXTENSION_STRUCT_SIZE_V1_1 GPUSTACK_STRUCT_SIZE(gpustack_extension, reserved)

/* Capability bits reported by identify. Unknown bits are ignored by the host. */
typedef uint64_t gpustack_capabilities;
#define GPUSTACK_CAP_SHARED (UINT64_C(1) << 0)          /* <base>.shared ownership slots */
#define GPUSTACK_CAP_LOGICAL_SLICING (UINT64_C(1) << 1) /* <base>.sliced: VRAM + compute budget */
#define GPUSTACK_CAP_PARTITIONING (UINT64_C(1) << 2)    /* <base>.partitioned: hardware instances */
#define GPUSTACK_CAP_PROCESS_METRICS (UINT64_C(1) << 3) /* per-process samples */
#define GPUSTACK_CAP_HEALTH_EVENTS (UINT64_C(1) << 4)   /* poll_health_events delivers events */
/* Since 1.1: a logical slice is a driver object (MetaX sGPU, Cambricon sMLU, Ascend vNPU): the
 * host prepares it before the grant and unprepares it once its owner is gone, and its charge
 * outlives a finished container until then. */
#define GPUSTACK_CAP_SLICE_OBJECTS (UINT64_C(1) << 5)

/* How the manufacturer's container runtime takes part (identity.runtime_flags, since 1.1). */
typedef uint64_t gpustack_runtime_flags;
/* The device manager itself must run under the vendor runtime (it injects the driver). */
#define GPUSTACK_RUNTIME_INJECTS_DRIVER (UINT64_C(1) << 0)
/* Grants only name the cards (an env var); workloads need the vendor runtime to get them. */
#define GPUSTACK_RUNTIME_INJECTS_DEVICES (UINT64_C(1) << 1)

/* Since 1.2: what the worker's admission webhooks refuse for this manufacturer's requests
 * (identity.admission_flags), so a vendor's limits reach admission without a host change: the
 * host's own rules are the same for every manufacturer. Unknown bits are ignored by the host. */
typedef uint64_t gpustack_admission_flags;
/* One container takes at most one card of this manufacturer: a whole-card request of N > 1 is
 * refused (the vendor cannot give one process several of its cards). */
#define GPUSTACK_ADMIT_ONE_CARD_PER_CONTAINER (UINT64_C(1) << 0)

/* Opaque plugin state created by init and destroyed by shutdown. Only the plugin sees inside. */
typedef struct gpustack_plugin_instance gpustack_plugin_instance;

/* ============================================================================================
 * Host services, given to the plugin at init
 * ========================================================================================== */

/* One PCI function from the host's inventory. The host scans PCI once and hands every plugin the
 * same list, so plugins agree on what is present and tests can inject a fixture inventory. */
typedef struct gpustack_pci_device {
  size_t struct_size;
  const void* next;
  gpustack_str bus_id; /* "0000:3b:00.0" (domain:bus:device.function, lowercase hex) */
  uint16_t vendor_id;  /* 0x10de */
  uint16_t device_id;  /* 0x2335 */
  uint32_t class_code; /* 24-bit base class, subclass, prog-if: 0x030200 */
  uint16_t subsystem_vendor_id;
  uint16_t subsystem_device_id;
  int32_t numa_node;       /* -1 when the platform does not say */
  gpustack_str sysfs_path; /* "/sys/bus/pci/devices/0000:3b:00.0" (under the host's sysfs root) */
} gpustack_pci_device;
#define GPUSTACK_PCI_DEVICE_STRUCT_SIZE_V1_0 GPUSTACK_STRUCT_SIZE(gpustack_pci_device, sysfs_path)

/* Functions the host implements for the plugin. All are thread-safe and callable from any thread
 * from init until shutdown returns. None of them calls back into the plugin. */
typedef struct gpustack_host_services {
  size_t struct_size;
  const void* next;
  /* Opaque; pass it back as the first argument of every function below. */
  void* host_data;

  /* Writes one log line to the host's log under the plugin's name. `message` is copied.
   * `file` may be empty and `line` 0. Never fails. */
  void (*log)(void* host_data, gpustack_log_level level, gpustack_str message, gpustack_str file,
              uint32_t line);
  /* Non-zero when `level` would be written: check it before formatting expensive messages. */
  int32_t (*log_enabled)(void* host_data, gpustack_log_level level);
  /* Monotonic clock in nanoseconds (CLOCK_MONOTONIC); never goes back. */
  uint64_t (*monotonic_time_ns)(void* host_data);
  /* Looks up the plugin's configuration value for `key` (the node's per-plugin settings, e.g.
   * "library_path"). Returns OK and sets *value, or NOT_FOUND. The value is host-owned and
   * stays valid until shutdown returns. */
  gpustack_status (*config_get)(void* host_data, gpustack_str key, gpustack_str* value);
} gpustack_host_services;
#define GPUSTACK_HOST_SERVICES_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_host_services, config_get)

/* ============================================================================================
 * Negotiation and identity
 * ========================================================================================== */

typedef struct gpustack_plugin_api gpustack_plugin_api;

typedef struct gpustack_negotiate_args {
  size_t struct_size;
  void* next;                     /* host-allocated: the plugin may fill chained output structs */
  uint32_t host_abi_major;        /* in */
  uint32_t host_abi_minor;        /* in */
  uint32_t plugin_abi_major;      /* out: always set, also when refusing */
  uint32_t plugin_abi_minor;      /* out: always set, also when refusing */
  const gpustack_plugin_api* api; /* out: static table, NULL when refusing */
} gpustack_negotiate_args;
#define GPUSTACK_NEGOTIATE_ARGS_STRUCT_SIZE_V1_0 GPUSTACK_STRUCT_SIZE(gpustack_negotiate_args, api)

/* Since 1.3: a library that makes a logical slice's budgets bind inside the container (HAMi-core's
 * libvgpu.so for NVIDIA, vcann-rt, hggc, vrocm). The host stages its files onto the node, under
 * <data dir>/operator/lib/<manufacturer>[/<variant>], and mounts them read-only into every sliced
 * container of the manufacturer with an /etc/ld.so.preload that names `preload`. The grant's env
 * edits carry the budgets (the enforcer's environment contract); the declaration adds what every
 * sliced container needs besides. Strings and arrays are static, as the identity's. */
typedef int32_t gpustack_enforcer_variant;
enum {
  GPUSTACK_ENFORCER_VARIANT_NONE = 0, /* one build serves every driver */
  /* One build per major of the group's runtime_version ("12.4" -> <variant_prefix>12): the
   * stage holds one directory per major, and a card gets the one of its group's runtime. */
  GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR = 1,
  GPUSTACK_ENFORCER_VARIANT_MAX_ENUM = 0x7FFFFFFF
};

typedef struct gpustack_enforcer {
  size_t struct_size;
  const void* next;
  gpustack_str name;         /* "hami-core": for logs and the node's conditions */
  const gpustack_str* files; /* file names (no '/') the stage holds, the preloaded ones included */
  size_t file_count;
  const gpustack_str* preload; /* of `files`, what /etc/ld.so.preload names, in this order */
  size_t preload_count;
  /* Where the plugin's package ships the files, relative to the directory of the plugin library
   * (with one subdirectory per variant); empty: the package does not ship them, and slices bind
   * only where the node's settings give a source (a host directory, or an image the chart
   * copies from). */
  gpustack_str package_dir;
  gpustack_enforcer_variant variant;
  int32_t reserved;            /* 0 */
  gpustack_str variant_prefix; /* "cuda-" with GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR */
  /* The environment variable that gets the container path of the Pod's own working directory
   * (the enforcer's shared ledger between the Pod's processes: "VROCM_LEDGER_PATH"); empty: the
   * enforcer needs none. The host creates the directory per Pod and removes it once the Pod is
   * gone; no Pod sees another's. */
  gpustack_str workdir_env;
  /* "KEY=value" settings (log levels, hooks) given to a sliced container only when its own
   * `env:` does not set KEY. */
  const gpustack_str* default_env;
  size_t default_env_count;
} gpustack_enforcer;
#define GPUSTACK_ENFORCER_STRUCT_SIZE_V1_3 \
  GPUSTACK_STRUCT_SIZE(gpustack_enforcer, default_env_count)

/* What the plugin is. The HOST allocates this struct and sets struct_size; the plugin fills the
 * fields that fit. Strings and arrays are static (valid while the library is loaded). */
typedef struct gpustack_plugin_identity {
  size_t struct_size;
  void* next;                      /* host-allocated: the plugin may fill chained output structs */
  gpustack_str manufacturer;       /* key: "nvidia" ([a-z0-9-], the manifest's name) */
  gpustack_str display_name;       /* "NVIDIA" */
  gpustack_str base_resource_name; /* "nvidia.com/gpu" */
  gpustack_str plugin_version;     /* the plugin's own version, e.g. "0.1.0" */
  const uint16_t* pci_vendor_ids;  /* the PCI vendor IDs whose devices this plugin drives */
  size_t pci_vendor_id_count;
  gpustack_capabilities capabilities;
  gpustack_str partition_kind; /* "mig" when GPUSTACK_CAP_PARTITIONING is set, else empty */
  /* Since 1.1: what the node needs besides the plugin, so the host checks it (preflight) and the
   * chart sets it up without knowing the vendor. */
  /* The vendor container runtime's containerd handler and RuntimeClass name ("nvidia"); empty
   * when the vendor has none. Workloads get it where it exists; it is required (and checked)
   * only when runtime_flags say it injects something. */
  gpustack_str runtime_class;
  gpustack_runtime_flags runtime_flags; /* GPUSTACK_RUNTIME_*; 0 when runtime_class is empty */
  /* What to install when the management library is missing: "install the NVIDIA driver (it
   * ships NVML)". Recommended, not required: empty, preflight says "install the driver" and the
   * conformance suite warns (source written for 1.0 and rebuilt against 1.1+ still passes). */
  gpustack_str install_hint;
  /* Since 1.2: admission constraints. GPUSTACK_ADMIT_* bits; 0: none. */
  gpustack_admission_flags admission_flags;
  /* The smallest logical slice the vendor's enforcement can hold, in percent of a card's memory
   * (1..100); a smaller slice is refused at admission with this number. 0: any size. */
  uint32_t min_slice_memory_percentage;
  uint32_t reserved_1_2; /* 0: keeps the struct free of tail padding */
  /* Since 1.3: the library enforcer of this manufacturer's logical slices; NULL when its slices
   * are bound otherwise (a kernel module, sysfs, a driver object, or the vendor's own runtime)
   * or not at all. */
  const gpustack_enforcer* enforcer;
} gpustack_plugin_identity;
#define GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_plugin_identity, partition_kind)
#define GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_1 \
  GPUSTACK_STRUCT_SIZE(gpustack_plugin_identity, install_hint)
#define GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_2 \
  GPUSTACK_STRUCT_SIZE(gpustack_plugin_identity, reserved_1_2)
#define GPUSTACK_PLUGIN_IDENTITY_STRUCT_SIZE_V1_3 \
  GPUSTACK_STRUCT_SIZE(gpustack_plugin_identity, enforcer)

typedef struct gpustack_init_args {
  size_t struct_size;
  const void* next;
  /* The version negotiation agreed on: the plugin uses no feature of a later minor. */
  uint32_t abi_major;
  uint32_t abi_minor;
  /* Host services; the pointer and everything it reaches stay valid until shutdown returns. */
  const gpustack_host_services* host;
  /* The host's PCI inventory (every function of the scanned classes, not only this plugin's
   * vendors); valid until shutdown returns. */
  const gpustack_pci_device* const* pci_devices;
  size_t pci_device_count;
  /* Since 1.1, out: the instance create_instance made (it may stay NULL if the plugin needs no
   * state). init (1.0) ignores it. */
  gpustack_plugin_instance* instance;
} gpustack_init_args;
#define GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_init_args, pci_device_count)
#define GPUSTACK_INIT_ARGS_STRUCT_SIZE_V1_1 GPUSTACK_STRUCT_SIZE(gpustack_init_args, instance)

/* ============================================================================================
 * Discovery
 * ========================================================================================== */

typedef int32_t gpustack_health;
enum {
  GPUSTACK_HEALTH_UNKNOWN = 0,
  GPUSTACK_HEALTH_HEALTHY = 1,
  GPUSTACK_HEALTH_UNHEALTHY = 2,
  GPUSTACK_HEALTH_MAX_ENUM = 0x7FFFFFFF
};

typedef int32_t gpustack_partition_mode;
enum {
  GPUSTACK_PARTITION_MODE_UNSUPPORTED = 0, /* the device cannot be partitioned */
  GPUSTACK_PARTITION_MODE_DISABLED = 1,    /* it can, but the administrator has not enabled it */
  GPUSTACK_PARTITION_MODE_ENABLED = 2,     /* partition mode is on: only partitions are offered */
  GPUSTACK_PARTITION_MODE_PENDING = 3, /* a mode change waits for a reset; treated as DISABLED */
  GPUSTACK_PARTITION_MODE_MAX_ENUM = 0x7FFFFFFF
};

/* A legal position of a partition, in memory-slice units of an empty card. */
typedef struct gpustack_placement {
  uint32_t start;
  uint32_t length;
} gpustack_placement;

typedef struct gpustack_partition_profile {
  size_t struct_size;
  const void* next;
  gpustack_str name; /* resource-name segment: "3g.40gb" */
  uint64_t memory_mib;
  uint32_t compute_slices;
  uint32_t memory_slices;
  uint32_t max_count;                   /* most instances of this profile on one empty card */
  const gpustack_placement* placements; /* every legal placement on an empty card */
  size_t placement_count;
} gpustack_partition_profile;
#define GPUSTACK_PARTITION_PROFILE_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_partition_profile, placement_count)

typedef struct gpustack_accelerator {
  size_t struct_size;
  const void* next;
  gpustack_str id;                  /* globally unique (UUID), never the PCI bus id */
  uint32_t index;                   /* the plugin's 0-based enumeration order on this node */
  const uint32_t* physical_indexes; /* vendor device numbers (minor, physical id, ...) */
  size_t physical_index_count;
  uint64_t memory_mib; /* driver-reported VRAM of this card */
  /* Topology. */
  gpustack_str pci_bus_id;   /* "0000:3b:00.0"; matches gpustack_pci_device.bus_id */
  gpustack_str pci_root_id;  /* the root port / complex, e.g. "0000:3a:00.0" */
  uint32_t pci_class;        /* 24-bit class code, 0 when unknown */
  int32_t numa_affinity;     /* -1 when unknown */
  gpustack_str cpu_affinity; /* cpulist, e.g. "0-23,48-71"; empty when unknown */
  /* Health. */
  gpustack_health health;
  gpustack_str health_reason; /* why unhealthy; empty otherwise */
  /* Logical slicing (software): 0 means the card offers no logical slices. */
  uint32_t logical_slice_count;
  int32_t cores_percentage_overcommit; /* non-zero: compute budgets may add up past 100 % */
  /* Physical partitioning (hardware). */
  gpustack_partition_mode partition_mode;
  const gpustack_partition_profile* const* partition_profiles; /* offered when ENABLED */
  size_t partition_profile_count;
} gpustack_accelerator;
#define GPUSTACK_ACCELERATOR_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_accelerator, partition_profile_count)

/* A group is one product (model) on this node, with the accelerators of that model. */
typedef struct gpustack_accelerator_group {
  size_t struct_size;
  const void* next;
  gpustack_str product;            /* "NVIDIA A10G", as the driver names it */
  gpustack_str family;             /* "Ampere"; empty when unknown */
  uint64_t memory_mib;             /* per-card VRAM of the model */
  uint64_t cores;                  /* compute cores per card (CUDA cores, AI cores, CUs) */
  gpustack_str driver_version;     /* "580.159.03"; empty when unknown */
  gpustack_str runtime_version;    /* "13.0" (CUDA, CANN, ROCm ...); empty when unknown */
  gpustack_str compute_capability; /* "8.6"; empty when unknown */
  const gpustack_accelerator* const* accelerators;
  size_t accelerator_count;
} gpustack_accelerator_group;
#define GPUSTACK_ACCELERATOR_GROUP_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_accelerator_group, accelerator_count)

/* Host-provided sink for discovery. A non-OK return asks the plugin to stop and return it. */
typedef struct gpustack_discovery_sink {
  size_t struct_size;
  const void* next;
  void* host_data;
  gpustack_status (*add_group)(void* host_data, const gpustack_accelerator_group* group);
} gpustack_discovery_sink;
#define GPUSTACK_DISCOVERY_SINK_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_discovery_sink, add_group)

typedef struct gpustack_discover_args {
  size_t struct_size;
  const void* next;
  const gpustack_discovery_sink* sink;
} gpustack_discover_args;
#define GPUSTACK_DISCOVER_ARGS_STRUCT_SIZE_V1_0 GPUSTACK_STRUCT_SIZE(gpustack_discover_args, sink)

/* ============================================================================================
 * Slicing: a grant turned into container edits
 * ========================================================================================== */

typedef int32_t gpustack_grant_mode;
enum {
  GPUSTACK_GRANT_EXCLUSIVE = 1,   /* whole cards */
  GPUSTACK_GRANT_SHARED = 2,      /* ownership slots of one card, no enforced budget */
  GPUSTACK_GRANT_SLICED = 3,      /* one card with a VRAM and a compute budget */
  GPUSTACK_GRANT_PARTITIONED = 4, /* one hardware partition instance */
  GPUSTACK_GRANT_MAX_ENUM = 0x7FFFFFFF
};

typedef int32_t gpustack_edit_kind;
enum {
  GPUSTACK_EDIT_ENV = 1,         /* key = name, value = value */
  GPUSTACK_EDIT_MOUNT = 2,       /* host_path -> container_path, read_only */
  GPUSTACK_EDIT_DEVICE_NODE = 3, /* host_path -> container_path, permissions ("rw", "rwm") */
  GPUSTACK_EDIT_ANNOTATION = 4,  /* key = annotation key, value = value */
  GPUSTACK_EDIT_CDI_DEVICE = 5,  /* value = fully qualified CDI name "vendor.com/class=name" */
  GPUSTACK_EDIT_MAX_ENUM = 0x7FFFFFFF
};

typedef struct gpustack_container_edit {
  size_t struct_size;
  const void* next;
  gpustack_edit_kind kind;
  gpustack_str key;
  gpustack_str value;
  gpustack_str host_path;
  gpustack_str container_path;
  gpustack_str permissions;
  int32_t read_only;
  int32_t reserved; /* 0 */
} gpustack_container_edit;
#define GPUSTACK_CONTAINER_EDIT_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_container_edit, reserved)

typedef struct gpustack_container_edit_sink {
  size_t struct_size;
  const void* next;
  void* host_data;
  gpustack_status (*add_edit)(void* host_data, const gpustack_container_edit* edit);
} gpustack_container_edit_sink;
#define GPUSTACK_CONTAINER_EDIT_SINK_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_container_edit_sink, add_edit)

typedef struct gpustack_grant_args {
  size_t struct_size;
  const void* next;
  gpustack_str pod_uid;
  gpustack_str container_name;
  gpustack_grant_mode mode;
  const gpustack_str* accelerator_ids; /* the cards granted (exactly 1 unless EXCLUSIVE) */
  size_t accelerator_id_count;
  uint64_t memory_limit_mib; /* SLICED: the VRAM budget; 0 otherwise */
  uint32_t cores_percentage; /* SLICED: the compute budget, 1..100; 0 otherwise */
  gpustack_str partition_id; /* PARTITIONED: the instance, as create_partition
                                reported it; empty otherwise */
  const gpustack_container_edit_sink* sink;
  /* Since 1.1. SLICED on a GPUSTACK_CAP_SLICE_OBJECTS plugin: the slice prepare_slice reported;
   * empty otherwise. A 1.0 host knows neither the capability (the C++ helper does not report it
   * to one) nor prepare_slice, and sends SLICED grants without a slice: such a plugin makes the
   * slice inside grant, or refuses with FAILED_PRECONDITION. */
  gpustack_str slice_id;
} gpustack_grant_args;
#define GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_0 GPUSTACK_STRUCT_SIZE(gpustack_grant_args, sink)
#define GPUSTACK_GRANT_ARGS_STRUCT_SIZE_V1_1 GPUSTACK_STRUCT_SIZE(gpustack_grant_args, slice_id)

/* ============================================================================================
 * Slice objects (since 1.1; GPUSTACK_CAP_SLICE_OBJECTS)
 * ========================================================================================== */

/* A slice made as a driver object on one card. */
typedef struct gpustack_slice {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id;
  gpustack_str id; /* the driver's name for it, passed back to grant and unprepare_slice */
} gpustack_slice;
#define GPUSTACK_SLICE_STRUCT_SIZE_V1_1 GPUSTACK_STRUCT_SIZE(gpustack_slice, id)

typedef struct gpustack_slice_sink {
  size_t struct_size;
  const void* next;
  void* host_data;
  gpustack_status (*add_slice)(void* host_data, const gpustack_slice* slice);
} gpustack_slice_sink;
#define GPUSTACK_SLICE_SINK_STRUCT_SIZE_V1_1 GPUSTACK_STRUCT_SIZE(gpustack_slice_sink, add_slice)

/* Makes (or, for the same owner, finds again) the slice object that a SLICED grant of this budget
 * needs on the card, and reports it through the sink exactly once on success. `owner` is recorded
 * with it the way partition owners are. */
typedef struct gpustack_prepare_slice_args {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id;
  uint64_t memory_limit_mib; /* the VRAM budget */
  uint32_t cores_percentage; /* the compute budget, 1..100 */
  uint32_t reserved;         /* 0 */
  gpustack_str owner;
  const gpustack_slice_sink* sink;
} gpustack_prepare_slice_args;
#define GPUSTACK_PREPARE_SLICE_ARGS_STRUCT_SIZE_V1_1 \
  GPUSTACK_STRUCT_SIZE(gpustack_prepare_slice_args, sink)

/* Removes a slice object once its owner is gone. FAILED_PRECONDITION when another owner holds it,
 * NOT_FOUND when it no longer exists (the host treats both as done for this owner). */
typedef struct gpustack_unprepare_slice_args {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id;
  gpustack_str slice_id;
  gpustack_str owner;
} gpustack_unprepare_slice_args;
#define GPUSTACK_UNPREPARE_SLICE_ARGS_STRUCT_SIZE_V1_1 \
  GPUSTACK_STRUCT_SIZE(gpustack_unprepare_slice_args, owner)

/* ============================================================================================
 * Device nodes (since 1.1)
 * ========================================================================================== */

/* A device node the manufacturer's containers use on this node, whoever injects it (the host
 * through a grant, or the vendor runtime): the host checks that each exists (preflight). */
typedef struct gpustack_device_node {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id; /* the card it belongs to; empty: every card needs it */
  gpustack_str path; /* under the device directory, without "/dev/": "nvidia0", "dri/card1" */
} gpustack_device_node;
#define GPUSTACK_DEVICE_NODE_STRUCT_SIZE_V1_1 GPUSTACK_STRUCT_SIZE(gpustack_device_node, path)

typedef struct gpustack_device_node_sink {
  size_t struct_size;
  const void* next;
  void* host_data;
  gpustack_status (*add_device_node)(void* host_data, const gpustack_device_node* node);
} gpustack_device_node_sink;
#define GPUSTACK_DEVICE_NODE_SINK_STRUCT_SIZE_V1_1 \
  GPUSTACK_STRUCT_SIZE(gpustack_device_node_sink, add_device_node)

typedef struct gpustack_list_device_nodes_args {
  size_t struct_size;
  const void* next;
  const gpustack_str* accelerator_ids; /* the cards; count 0 = every card */
  size_t accelerator_id_count;
  const gpustack_device_node_sink* sink;
} gpustack_list_device_nodes_args;
#define GPUSTACK_LIST_DEVICE_NODES_ARGS_STRUCT_SIZE_V1_1 \
  GPUSTACK_STRUCT_SIZE(gpustack_list_device_nodes_args, sink)

/* ============================================================================================
 * Partitioning
 * ========================================================================================== */

typedef struct gpustack_partition {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id; /* the parent card */
  gpustack_str id;             /* the instance's own id (e.g. "MIG-<uuid>") */
  gpustack_str profile;        /* "3g.40gb" */
  gpustack_placement placement;
  gpustack_str owner; /* the ownership tag given at creation; empty = not ours */
} gpustack_partition;
#define GPUSTACK_PARTITION_STRUCT_SIZE_V1_0 GPUSTACK_STRUCT_SIZE(gpustack_partition, owner)

typedef struct gpustack_partition_sink {
  size_t struct_size;
  const void* next;
  void* host_data;
  gpustack_status (*add_partition)(void* host_data, const gpustack_partition* partition);
} gpustack_partition_sink;
#define GPUSTACK_PARTITION_SINK_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_partition_sink, add_partition)

typedef struct gpustack_list_partitions_args {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id; /* empty: every card */
  const gpustack_partition_sink* sink;
} gpustack_list_partitions_args;
#define GPUSTACK_LIST_PARTITIONS_ARGS_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_list_partitions_args, sink)

/* Creates one instance of `profile` at `placement` on the card and reports it through the sink
 * (exactly once on success). `owner` is recorded with the instance (durably, where the vendor
 * allows a name; otherwise by the plugin) and reported by list_partitions. */
typedef struct gpustack_create_partition_args {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id;
  gpustack_str profile;
  gpustack_placement placement;
  gpustack_str owner;
  const gpustack_partition_sink* sink;
} gpustack_create_partition_args;
#define GPUSTACK_CREATE_PARTITION_ARGS_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_create_partition_args, sink)

/* Destroys an instance. It must carry `owner`: FAILED_PRECONDITION otherwise, so the host never
 * destroys a partition an administrator made. NOT_FOUND when it no longer exists. */
typedef struct gpustack_destroy_partition_args {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id;
  gpustack_str partition_id;
  gpustack_str owner;
} gpustack_destroy_partition_args;
#define GPUSTACK_DESTROY_PARTITION_ARGS_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_destroy_partition_args, owner)

/* ============================================================================================
 * Metrics
 * ========================================================================================== */

/* One figure. `measured` = 0 means the plugin could not measure it: the value is meaningless
 * and must be reported as absent, never as zero. */
typedef struct gpustack_measurement {
  double value;
  int32_t measured;
  int32_t reserved; /* 0 */
} gpustack_measurement;

/* Since 1.4: whether a card's sample comes with every process on it, so the host can tell a card
 * whose processes could not be listed from one that has none. Only meaningful when the host asked
 * for processes and the plugin has GPUSTACK_CAP_PROCESS_METRICS. COMPLETE (0, what every plugin
 * before 1.4 sends) means every process on the card is among this call's process samples: none
 * means measured idle. Any other value says why the list is missing or partial; the host then
 * ignores the card's process samples and reports its per-process figures as unmeasured. A host
 * before 1.4 ignores the field, and a 1.4 host reads it only from a plugin negotiated at 1.4. */
typedef int32_t gpustack_process_listing;
enum {
  GPUSTACK_PROCESS_LISTING_COMPLETE = 0,
  GPUSTACK_PROCESS_LISTING_UNSUPPORTED = 1,  /* this library or driver cannot list them */
  GPUSTACK_PROCESS_LISTING_PERMISSION = 2,   /* the library refused for lack of permission */
  GPUSTACK_PROCESS_LISTING_DRIVER_ERROR = 3, /* the call failed this time; it may work next time */
  GPUSTACK_PROCESS_LISTING_TRUNCATED = 4,    /* more processes than the plugin could read */
  GPUSTACK_PROCESS_LISTING_MAX_ENUM = 0x7FFFFFFF
};

typedef struct gpustack_device_sample {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id;
  uint64_t timestamp_ns; /* host monotonic clock */
  gpustack_measurement memory_total_mib;
  gpustack_measurement memory_used_mib;
  gpustack_measurement memory_utilization_percent;
  gpustack_measurement cores_utilization_percent;
  gpustack_measurement temperature_celsius;
  gpustack_measurement power_watts;
  gpustack_health health;
  gpustack_process_listing process_listing; /* since 1.4; reserved (0) before */
} gpustack_device_sample;
#define GPUSTACK_DEVICE_SAMPLE_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_device_sample, process_listing)

typedef struct gpustack_process_sample {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id;
  gpustack_str partition_id; /* when the process runs in a partition */
  uint32_t pid;              /* in the host's PID namespace */
  gpustack_measurement memory_used_mib;
  gpustack_measurement cores_utilization_percent;
} gpustack_process_sample;
#define GPUSTACK_PROCESS_SAMPLE_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_process_sample, cores_utilization_percent)

typedef struct gpustack_metrics_sink {
  size_t struct_size;
  const void* next;
  void* host_data;
  gpustack_status (*add_device_sample)(void* host_data, const gpustack_device_sample* sample);
  gpustack_status (*add_process_sample)(void* host_data, const gpustack_process_sample* sample);
} gpustack_metrics_sink;
#define GPUSTACK_METRICS_SINK_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_metrics_sink, add_process_sample)

typedef struct gpustack_sample_metrics_args {
  size_t struct_size;
  const void* next;
  const gpustack_str* accelerator_ids; /* the cards to sample; count 0 = every card */
  size_t accelerator_id_count;
  int32_t include_processes; /* non-zero: also per-process samples (if capable) */
  const gpustack_metrics_sink* sink;
} gpustack_sample_metrics_args;
#define GPUSTACK_SAMPLE_METRICS_ARGS_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_sample_metrics_args, sink)

/* ============================================================================================
 * Health events
 * ========================================================================================== */

typedef struct gpustack_health_event {
  size_t struct_size;
  const void* next;
  gpustack_str accelerator_id;
  gpustack_health health;
  gpustack_str reason; /* e.g. "XID 79: GPU has fallen off the bus" */
} gpustack_health_event;
#define GPUSTACK_HEALTH_EVENT_STRUCT_SIZE_V1_0 GPUSTACK_STRUCT_SIZE(gpustack_health_event, reason)

typedef struct gpustack_health_sink {
  size_t struct_size;
  const void* next;
  void* host_data;
  gpustack_status (*add_event)(void* host_data, const gpustack_health_event* event);
} gpustack_health_sink;
#define GPUSTACK_HEALTH_SINK_STRUCT_SIZE_V1_0 GPUSTACK_STRUCT_SIZE(gpustack_health_sink, add_event)

typedef struct gpustack_poll_health_args {
  size_t struct_size;
  const void* next;
  uint32_t timeout_ms; /* wait at most this long for an event; 0 = do not wait */
  const gpustack_health_sink* sink;
} gpustack_poll_health_args;
#define GPUSTACK_POLL_HEALTH_ARGS_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_poll_health_args, sink)

/* ============================================================================================
 * The function table
 * ========================================================================================== */

/* Returned by negotiation; static, owned by the plugin, valid while the library is loaded.
 * Function pointers marked OPTIONAL may be NULL, which means UNIMPLEMENTED; what a capability
 * requires is listed in this header's top comment. */
struct gpustack_plugin_api {
  size_t struct_size;
  const void* next;
  uint32_t abi_major; /* the version the plugin was compiled against */
  uint32_t abi_minor;

  /* The message of the last non-OK status this plugin returned on the calling thread; empty if
   * none. Valid until the calling thread's next call into the plugin. Any thread; never fails. */
  gpustack_str (*last_error_message)(void);

  /* Fills `identity` (host-allocated; see gpustack_plugin_identity). Needs no init, touches no
   * hardware, is cheap and may be called from any thread at any time. */
  gpustack_status (*identify)(gpustack_plugin_identity* identity);

  /* Creates the plugin's state. It should not load the vendor library: load it on first use,
   * and only fail for a missing library when the host's PCI inventory holds one of the plugin's
   * devices (a node without them is a valid, empty answer). On OK, *instance is set (it may be
   * NULL if the plugin needs no state) and later passed to every call and to shutdown. On any
   * other status the plugin has released everything it made, stopped any thread it started, and
   * never calls a host service again; the host does not call shutdown. The host may create more
   * than one instance over the life of the process, one at a time. */
  gpustack_status (*init)(const gpustack_init_args* args, gpustack_plugin_instance** instance);

  /* Releases everything init created and stops any plugin thread. The host calls it only when no
   * other call on the instance is running (it stops polling health and waits for a running poll
   * to return first). After it returns the plugin never calls a host service again. NULL-safe;
   * never fails. */
  void (*shutdown)(gpustack_plugin_instance* instance);

  /* Reports every accelerator this plugin drives, grouped by product, through args->sink.
   * Reporting nothing is a valid, OK result (no device present). A failure (the vendor library
   * failed mid-enumeration) must be a non-OK status, never a silently shortened list: the host
   * then keeps its last good result. OPTIONAL. */
  gpustack_status (*discover)(gpustack_plugin_instance* instance,
                              const gpustack_discover_args* args);

  /* Turns a grant into the container edits that make the manufacturer's own facility apply it
   * (visibility, device nodes, VRAM and compute budgets). Pure: changes no device state.
   * OPTIONAL. */
  gpustack_status (*grant)(gpustack_plugin_instance* instance, const gpustack_grant_args* args);

  /* Partition lifecycle; required when GPUSTACK_CAP_PARTITIONING is set, else OPTIONAL. */
  gpustack_status (*list_partitions)(gpustack_plugin_instance* instance,
                                     const gpustack_list_partitions_args* args);
  gpustack_status (*create_partition)(gpustack_plugin_instance* instance,
                                      const gpustack_create_partition_args* args);
  gpustack_status (*destroy_partition)(gpustack_plugin_instance* instance,
                                       const gpustack_destroy_partition_args* args);

  /* One sample per requested card (and per process when asked and capable). OPTIONAL. */
  gpustack_status (*sample_metrics)(gpustack_plugin_instance* instance,
                                    const gpustack_sample_metrics_args* args);

  /* Waits up to args->timeout_ms for health changes and delivers them through the sink. Called
   * from one dedicated host thread, concurrently with other calls on the same instance (never
   * with init or shutdown), so the timeout bounds how long shutdown waits. OPTIONAL. */
  gpustack_status (*poll_health_events)(gpustack_plugin_instance* instance,
                                        const gpustack_poll_health_args* args);

  /* ---- since 1.1 ---- */

  /* init with its result in its args: as init, the instance written to args->instance. A 1.1
   * host calls it when present (else init); a plugin provides both to serve 1.0 hosts. */
  gpustack_status (*create_instance)(gpustack_init_args* args);

  /* Reports the device nodes the given cards' containers use (see gpustack_device_node), shared
   * ones once, with an empty accelerator_id. NOT_FOUND names a card the plugin does not have.
   * OPTIONAL. */
  gpustack_status (*list_device_nodes)(gpustack_plugin_instance* instance,
                                       const gpustack_list_device_nodes_args* args);

  /* Slice objects; required when GPUSTACK_CAP_SLICE_OBJECTS is set, else OPTIONAL. */
  gpustack_status (*prepare_slice)(gpustack_plugin_instance* instance,
                                   const gpustack_prepare_slice_args* args);
  gpustack_status (*unprepare_slice)(gpustack_plugin_instance* instance,
                                     const gpustack_unprepare_slice_args* args);
};
#define GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_0 \
  GPUSTACK_STRUCT_SIZE(gpustack_plugin_api, poll_health_events)
#define GPUSTACK_PLUGIN_API_STRUCT_SIZE_V1_1 \
  GPUSTACK_STRUCT_SIZE(gpustack_plugin_api, unprepare_slice)

/* The entry point. The host sets struct_size, host_abi_major and host_abi_minor.
 * The plugin always writes plugin_abi_major/minor, then either sets api and returns OK (it speaks
 * host_abi_major: plugin_abi_major == host_abi_major == api->abi_major, and plugin_abi_minor is
 * the newest minor it implements) or returns GPUSTACK_STATUS_INCOMPATIBLE_VERSION. It does
 * nothing else: no allocation, no vendor library, no logging. Any thread; may be called more
 * than once. The version both then use is min(host_abi_minor, plugin_abi_minor); init says it. */
typedef gpustack_status (*gpustack_plugin_negotiate_fn)(gpustack_negotiate_args* args);
GPUSTACK_PLUGIN_EXPORT gpustack_status gpustack_plugin_negotiate(gpustack_negotiate_args* args);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUSTACK_PLUGIN_H_ */
