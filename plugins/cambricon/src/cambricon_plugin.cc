// The Cambricon plugin (cambricon.com/mlu): discovery, grants and metrics through CNDev
// (libcndev.so, under $NEUWARE_HOME/lib64). The card node /dev/cambricon_dev<N> uses the CNDev
// slot. sMLU and MIM instances are not driven yet. See README.md.
#include <gpustack/plugin.hpp>

#include <gpustack_support/discovery.h>
#include <gpustack_support/injection.h>
#include <gpustack/plugin_util.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "cndev_api.h"

namespace {

namespace sdk = gpustack::sdk;
namespace support = gpustack::support;
namespace cn = gpustack::cambricon::cndev;

std::vector<std::string> Candidates() {
  std::vector<std::string> out;
  if (const char* home = secure_getenv("NEUWARE_HOME"); home != nullptr && *home != '\0') {
    out.push_back(std::string(home) + "/lib64/libcndev.so");
  }
  out.push_back("/usr/local/neuware/lib64/libcndev.so");
  out.push_back("libcndev.so");
  return out;
}

constexpr const char* kInstallHint = "install the Cambricon driver and Neuware (CNDev)";

// The grant carries the card node and the control node; CAMBRICON_VISIBLE_DEVICES names the slots
// for the vendor runtime, where one is used. sMLU slice objects are not made yet.
const support::Injection kInjection{.shared_nodes = {"cambricon_ctl"},
                                    .inject_nodes = true,
                                    .visible_env = "CAMBRICON_VISIBLE_DEVICES"};

class CambriconPlugin final : public sdk::Plugin {
 public:
  static const sdk::Identity& GetIdentity() {
    static const sdk::Identity identity{
        .manufacturer = "cambricon",
        .display_name = "Cambricon",
        .base_resource_name = "cambricon.com/mlu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0xcabc},
        .capabilities =
            GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PROCESS_METRICS,
        .partition_kind = "",
        .runtime_class = "cambricon",  // not required: the grant injects the device nodes
        .install_hint = kInstallHint,
    };
    return identity;
  }

  explicit CambriconPlugin(const sdk::Host& host)
      : host_(host),
        library_(host_, {.pci_vendor_ids = {0xcabc},
                         .candidates = Candidates(),
                         .preload = {},
                         .install_hint = kInstallHint}) {}
  ~CambriconPlugin() override {
    if (initialized_) api_.release();
  }

  void Discover(sdk::DiscoverySink& sink) override {
    if (!EnsureLoaded()) return;
    cn::CardInfo count{cn::kVersion, 0};
    Check(api_.get_device_count(&count), "counting devices");
    // A card that cannot be read is reported unhealthy as it was last read, never hiding the
    // others; CNDev failing as a whole (above) fails the pass.
    sdk::CardBook::Pass pass = book_.Begin();
    std::vector<Card> cards;
    for (unsigned slot = 0; slot < count.number; ++slot) {
      const std::string where = "slot " + std::to_string(slot);
      cn::Device device = static_cast<cn::Device>(slot);
      try {
        if (api_.get_device_handle_by_index != nullptr) {
          Check(api_.get_device_handle_by_index(static_cast<int>(slot), &device),
                where + ": handle");
        }
        cn::Uuid uuid{};
        uuid.version = cn::kVersion;
        Check(api_.get_uuid(&uuid, device), where + ": uuid");
        cn::PcieInfoV2 pcie{};
        Check(api_.get_pcie_info_v2(&pcie, device), where + ": PCIe info");
        cn::MemoryInfoV2 memory{};
        Check(api_.get_memory_usage_v2(&memory, device), where + ": memory");
        const char* raw_uuid = reinterpret_cast<const char*>(uuid.uuid);
        const std::string id(raw_uuid, strnlen(raw_uuid, sizeof uuid.uuid));
        if (id.empty()) {
          host_.Log(GPUSTACK_LOG_WARN, "skipping " + where + ": no UUID");
          continue;
        }
        sdk::Accelerator a;
        a.id = "MLU-" + id;  // CNDev's UUID carries no prefix; Cambricon's tools add this one
        char bus[32];
        std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%x", pcie.domain, pcie.bus, pcie.device,
                      pcie.function);
        sdk::FillTopology(host_, bus, a);
        a.physical_indexes = {slot};  // /dev/cambricon_dev<slot>
        a.memory_mib = static_cast<uint64_t>(memory.physical_memory_total);
        a.health = Health(device, &a.health_reason);
        a.logical_slice_count = 16;  // sMLU: the driver enforces quota and memory
        const char* name = api_.get_card_name_string_by_dev_id != nullptr
                               ? api_.get_card_name_string_by_dev_id(device)
                               : nullptr;
        sdk::AcceleratorGroup g;
        g.memory_mib = a.memory_mib;
        cn::CoreCount cores{cn::kVersion, 0};
        if (api_.get_core_count != nullptr && api_.get_core_count(&cores, device) == cn::kSuccess) {
          g.cores = static_cast<uint64_t>(std::max(cores.count, 0));
        }
        cn::VersionInfo version{};
        version.version = cn::kVersion;
        if (api_.get_version_info != nullptr &&
            api_.get_version_info(&version, device) == cn::kSuccess) {
          g.driver_version = std::to_string(version.driver_major) + "." +
                             std::to_string(version.driver_minor) + "." +
                             std::to_string(version.driver_build);
        }
        cards.push_back({a.id, device, slot, static_cast<uint32_t>(cards.size())});
        pass.Found(slot, name != nullptr ? name : "MLU", std::move(g), std::move(a));
      } catch (const sdk::Error& e) {
        support::KeepUnreadable(
            pass, book_, host_, slot, where, e.what(), [&](const sdk::Accelerator& known) {
              cards.push_back({known.id, device, slot, static_cast<uint32_t>(cards.size())});
            });
      }
    }
    pass.Report(sink);
    cards_ = std::move(cards);
  }

  void Grant(const sdk::Grant& grant, sdk::ContainerEditSink& sink) override {
    support::GrantCards(*this, cards_, kInjection, grant, sink,
                        [this](const Card& card) { return Injected(card); });
  }

  void ListDeviceNodes(const std::vector<std::string>& ids, sdk::DeviceNodeSink& sink) override {
    support::ListCardDeviceNodes(*this, cards_, kInjection, ids, sink,
                                 [this](const Card& card) { return Injected(card); });
  }

  void SampleMetrics(const sdk::MetricsRequest& request, sdk::MetricsSink& sink) override {
    if (!EnsureLoaded() && request.accelerator_ids.empty()) return;
    for (const Card* card_ptr : support::CardsFor(*this, cards_, request.accelerator_ids)) {
      const Card& card = *card_ptr;
      sdk::DeviceSample s;
      s.accelerator_id = card.uuid;
      s.timestamp_ns = host_.NowNs();
      std::string reason;
      s.health = Health(card.device, &reason);
      cn::MemoryInfoV2 memory{};
      if (api_.get_memory_usage_v2(&memory, card.device) == cn::kSuccess &&
          memory.physical_memory_total > 0) {
        s.memory_total_mib = static_cast<double>(memory.physical_memory_total);
        s.memory_used_mib = static_cast<double>(memory.physical_memory_used);
        s.memory_utilization_percent = 100.0 * static_cast<double>(memory.physical_memory_used) /
                                       static_cast<double>(memory.physical_memory_total);
      }
      cn::UtilizationInfo util{};
      util.version = cn::kVersion;
      if (api_.get_device_utilization_info != nullptr &&
          api_.get_device_utilization_info(&util, card.device) == cn::kSuccess) {
        s.cores_utilization_percent = util.average_core_utilization;
      }
      cn::TemperatureInfo temperature{};
      temperature.version = cn::kVersion;
      if (api_.get_temperature_info != nullptr &&
          api_.get_temperature_info(&temperature, card.device) == cn::kSuccess) {
        s.temperature_celsius = temperature.chip;
      }
      cn::DevicePowerInfo power{};
      if (api_.get_device_power_info != nullptr &&
          api_.get_device_power_info(&power, card.device) == cn::kSuccess) {
        s.power_watts = power.usage;
      }
      if (!request.include_processes) {
        sink.Add(s);
        continue;
      }
      std::vector<cn::ProcessInfo> processes;
      s.process_listing = Processes(card.device, processes);
      sink.Add(s);
      if (s.process_listing == GPUSTACK_PROCESS_LISTING_COMPLETE) {
        const std::map<unsigned, double> cores = ProcessCores(card.device);
        for (size_t i = 0; i < processes.size(); ++i) {
          sdk::ProcessSample p;
          p.accelerator_id = card.uuid;
          p.pid = processes[i].pid;
          p.memory_used_mib = static_cast<double>(processes[i].physical_memory_used) / 1024.0;
          if (auto c = cores.find(p.pid); c != cores.end()) p.cores_utilization_percent = c->second;
          sink.Add(p);
        }
      }
    }
  }

 private:
  // Every process on the card, or why not all.
  gpustack_process_listing Processes(cn::Device device, std::vector<cn::ProcessInfo>& out) const {
    if (api_.get_process_info == nullptr) return GPUSTACK_PROCESS_LISTING_UNSUPPORTED;
    const cn::Return r = ReadRows(out, [&](unsigned* n, cn::ProcessInfo* rows) {
      return api_.get_process_info(n, rows, device);
    });
    if (r == cn::kInsufficientSpace) return GPUSTACK_PROCESS_LISTING_TRUNCATED;
    if (r == cn::kNotSupported) return GPUSTACK_PROCESS_LISTING_UNSUPPORTED;
    if (r != cn::kSuccess) return GPUSTACK_PROCESS_LISTING_DRIVER_ERROR;
    return GPUSTACK_PROCESS_LISTING_COMPLETE;
  }

  // Each process's MLU-core utilization on a card (cndevGetProcessUtilization); empty when the
  // library or driver cannot tell, so the rows' compute stays unmeasured.
  std::map<unsigned, double> ProcessCores(cn::Device device) const {
    std::map<unsigned, double> out;
    if (api_.get_process_utilization == nullptr) return out;
    std::vector<cn::ProcessUtilization> rows;
    const cn::Return r = ReadRows(rows, [&](unsigned* n, cn::ProcessUtilization* data) {
      return api_.get_process_utilization(n, data, device);
    });
    if (r != cn::kSuccess) return out;
    for (const cn::ProcessUtilization& row : rows) out[row.pid] = row.ipu_util;
    return out;
  }

  // A cnDev list call into `rows` (each stamped with the struct version). INSUFFICIENT_SPACE
  // leaves the needed count: the buffer grows once and the call is retried. On success `rows`
  // holds what was written.
  template <class Row, class Call>
  static cn::Return ReadRows(std::vector<Row>& rows, Call call) {
    rows.resize(16);
    unsigned n = 0;
    cn::Return r = cn::kInsufficientSpace;
    for (int attempt = 0; attempt < 2 && r == cn::kInsufficientSpace; ++attempt) {
      if (n > rows.size()) rows.resize(n);
      for (Row& row : rows) row.version = cn::kVersion;
      n = static_cast<unsigned>(rows.size());
      r = call(&n, rows.data());
    }
    if (r == cn::kSuccess) rows.resize(std::min<size_t>(n, rows.size()));
    return r;
  }

  struct Card {
    std::string uuid;
    cn::Device device = 0;
    uint32_t slot = 0;      // /dev/cambricon_dev<slot>
    uint32_t position = 0;  // the index it was reported at
  };
  static support::InjectedCard Injected(const Card& card) {
    return {card.uuid,
            card.position,
            std::to_string(card.slot),
            {"cambricon_dev" + std::to_string(card.slot)}};
  }

  bool EnsureLoaded() {
    if (initialized_) return true;
    if (!library_.Bind(&api_, &cn::Resolve)) return false;
    if (const cn::Return r = api_.init(0); r != cn::kSuccess) {
      throw sdk::Error(GPUSTACK_STATUS_UNAVAILABLE, "CNDev: initialization failed: " + Text(r));
    }
    initialized_ = true;
    return true;
  }
  std::string Text(cn::Return r) const {
    return sdk::ErrorText(api_.get_error_string != nullptr ? api_.get_error_string(r) : nullptr,
                          static_cast<int>(r));
  }
  void Check(cn::Return r, const std::string& what) const {
    if (r != cn::kSuccess)
      throw sdk::Error(GPUSTACK_STATUS_INTERNAL, "CNDev: " + what + ": " + Text(r));
  }
  gpustack_health Health(cn::Device device, std::string* reason) const {
    cn::HealthState state{cn::kVersion, 0, 0, 0};
    if (api_.get_card_health_state == nullptr ||
        api_.get_card_health_state(&state, device) != cn::kSuccess) {
      return GPUSTACK_HEALTH_UNKNOWN;
    }
    if (state.health == 1) return GPUSTACK_HEALTH_HEALTHY;
    *reason = "CNDev reports the card unhealthy";
    return GPUSTACK_HEALTH_UNHEALTHY;
  }

  sdk::Host host_;
  sdk::LazyLibrary library_;
  cn::Api api_{};
  bool initialized_ = false;
  std::vector<Card> cards_;
  sdk::CardBook book_;
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(CambriconPlugin)
