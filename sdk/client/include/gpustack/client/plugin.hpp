// The host side of the plugin ABI: a plugin library opened, negotiated and identified, and its
// hooks called with every struct size checked, every status turned into a Result carrying the
// plugin's message, and everything the plugin reports validated and copied into owned values.
// The host's loader and the conformance suite both read plugins through this one client, so the
// suite checks a plugin exactly the way the host will see it (as PJRT's C API client does).
#ifndef GPUSTACK_CLIENT_PLUGIN_HPP_
#define GPUSTACK_CLIENT_PLUGIN_HPP_

#include <gpustack/plugin.h>
#include <gpustack/client/elf.hpp>
#include <gpustack/client/manifest.hpp>
#include <gpustack/client/result.hpp>
#include <gpustack/plugin_types.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <optional>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

namespace gpustack::client {

struct AbiVersion {
  uint32_t major = GPUSTACK_PLUGIN_ABI_MAJOR;
  uint32_t minor = GPUSTACK_PLUGIN_ABI_MINOR;
};

// A plugin's slice enforcer (1.3; gpustack_enforcer), checked: file names without '/', the
// preload list among the files, environment names that are names.
struct EnforcerDeclaration {
  std::string name;
  std::vector<std::string> files;
  std::vector<std::string> preload;
  std::string package_dir;
  gpustack_enforcer_variant variant = GPUSTACK_ENFORCER_VARIANT_NONE;
  std::string variant_prefix;
  std::string workdir_env;
  std::vector<std::pair<std::string, std::string>> default_env;  // KEY, value
  bool operator==(const EnforcerDeclaration&) const = default;
};

// What identify reported, checked against the manifest and the ABI's rules.
struct Identity {
  std::string manufacturer;
  std::string display_name;
  std::string base_resource_name;
  std::string plugin_version;
  std::vector<uint16_t> pci_vendor_ids;
  gpustack_capabilities capabilities = 0;  // only the bits of the negotiated version
  std::string partition_kind;
  std::string runtime_class;  // 1.1
  gpustack_runtime_flags runtime_flags = 0;
  std::string install_hint;
  gpustack_admission_flags admission_flags = 0;  // 1.2
  uint32_t min_slice_memory_percentage = 0;      // 1.2; 0: any
  std::optional<EnforcerDeclaration> enforcer;   // 1.3
};

// The optional hooks, by their plugin.h names, and the calls around them that every plugin has
// (init, shutdown, and loading the library: its constructors, negotiation and identify). The host
// records these numbers in its crash journal (they are the numbers it always recorded): append
// only.
enum class Hook {
  kInit,
  kShutdown,
  kDiscover,
  kGrant,
  kListPartitions,
  kCreatePartition,
  kDestroyPartition,
  kSampleMetrics,
  kPollHealthEvents,
  kListDeviceNodes,
  kPrepareSlice,
  kUnprepareSlice,
  kLoad,
};
std::string_view HookName(Hook hook);  // "discover", "init"

struct MetricsSnapshot {
  std::vector<sdk::DeviceSample> devices;
  std::vector<sdk::ProcessSample> processes;
  // Figures the plugin reported that no card can have (a temperature of 4294966996 °C, 140 %
  // utilization): each was left unmeasured, and is named here.
  std::vector<std::string> warnings;
};

// Checks the version a plugin answered against the host's; returns the version both will use.
Result<AbiVersion> CheckNegotiation(AbiVersion host, uint32_t plugin_major, uint32_t plugin_minor,
                                    int32_t status);

// What the table lacks for what the identity claims (plugin.h, "Capabilities and hooks"), one
// line per missing hook; empty when the plugin provides everything it claims.
// Enforced from ABI 1.1 on; a plugin negotiated at 1.0 keeps only ProvidedCapabilities().
std::vector<std::string> MissingHooks(const Identity& identity, const gpustack_plugin_api& table);
// The capability bits whose hooks the table provides.
gpustack_capabilities ProvidedCapabilities(const gpustack_plugin_api& table);

struct OpenOptions {
  AbiVersion host_abi;  // tests play an older or newer host
  ElfLimits elf;
  // Refuse a plugin that lacks a hook its capabilities need. The conformance suite opens
  // leniently so that it can report each missing hook as a failure of its own.
  bool require_claimed_hooks = true;
};

// Thread-safe the way plugin.h requires: calls are serialized, except PollHealthEvents, which may
// run beside them; Shutdown (and the destructor) waits until every running call has returned.
// Plugin libraries stay mapped for the life of the process (RTLD_NODELETE): a plugin's code must
// never vanish under a thread or a thread_local destructor it left behind.
class Plugin {
 public:
  // Reads the library's exports from the file (it must export the entry point), loads it with
  // RTLD_NOW | RTLD_LOCAL, negotiates and identifies. Refused, with a message naming the file and
  // the reason, when any step fails or identify disagrees with the manifest.
  static Result<std::unique_ptr<Plugin>> Open(const Manifest& manifest,
                                              const OpenOptions& options = {});
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const Manifest& manifest() const { return manifest_; }
  const Identity& identity() const { return identity_; }
  AbiVersion negotiated() const { return negotiated_; }
  // The negotiated part of the plugin's table (later slots read NULL), for raw checks.
  const gpustack_plugin_api& table() const { return api_; }
  gpustack_plugin_negotiate_fn negotiate() const { return negotiate_; }
  bool Provides(Hook hook) const;  // always for kLoad, kInit and kShutdown
  bool initialized() const { return initialized_.load(std::memory_order_acquire); }

  // Creates the plugin's instance. `services` and everything `pci_devices` points to must stay
  // valid until Shutdown returns.
  Status Init(const gpustack_host_services* services,
              std::span<const gpustack_pci_device* const> pci_devices);
  void Shutdown();

  Result<std::vector<sdk::AcceleratorGroup>> Discover();
  Result<std::vector<sdk::ContainerEdit>> Grant(const sdk::Grant& grant);
  Result<std::vector<sdk::Partition>> ListPartitions(std::string_view accelerator_id);
  Result<sdk::Partition> CreatePartition(const sdk::CreatePartitionRequest& request);
  Status DestroyPartition(const sdk::DestroyPartitionRequest& request);
  Result<MetricsSnapshot> SampleMetrics(const sdk::MetricsRequest& request);
  Result<std::vector<sdk::HealthEvent>> PollHealthEvents(uint32_t timeout_ms);
  Result<std::vector<sdk::DeviceNode>> ListDeviceNodes(const std::vector<std::string>& ids);
  Result<sdk::Slice> PrepareSlice(const sdk::PrepareSliceRequest& request);
  Status UnprepareSlice(const sdk::UnprepareSliceRequest& request);

 private:
  // The library itself is never dlclosed: a hung hook may still be running its code.
  Plugin(Manifest manifest, gpustack_plugin_negotiate_fn negotiate, const gpustack_plugin_api& api,
         AbiVersion negotiated, Identity identity);

  // Runs one hook: the instance must exist and the hook be provided; calls are serialized
  // (except health polls); the outcome is the output's first problem, else the plugin's status.
  template <class Call>
  Status Run(Hook hook, const std::string& output_problem, Call&& call);
  Error CallError(std::string_view hook, gpustack_status status) const;

  Manifest manifest_;
  gpustack_plugin_negotiate_fn negotiate_;
  gpustack_plugin_api api_;
  AbiVersion negotiated_;
  Identity identity_;

  mutable std::shared_mutex lifecycle_;  // Init/Shutdown exclusive, every call shared
  std::mutex calls_;                     // serializes the calls other than PollHealthEvents
  gpustack_plugin_instance* instance_ = nullptr;
  std::atomic<bool> initialized_{false};
};

}  // namespace gpustack::client

#endif  // GPUSTACK_CLIENT_PLUGIN_HPP_
