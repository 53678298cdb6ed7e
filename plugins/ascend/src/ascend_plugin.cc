// The Huawei Ascend plugin (huawei.com/npu): discovery, grants and metrics through DCMI
// (libdcmi.so).
// An NPU is addressed by (card, device); /dev/davinci<N> and ASCEND_VISIBLE_DEVICES take the
// physical id, mapped from the logic id, never the enumeration index. vNPU templates are not
// driven yet. See README.md.
#include <gpustack/plugin.hpp>

#include <gpustack_support/discovery.h>
#include <gpustack_support/injection.h>
#include <gpustack/plugin_util.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <vector>

#include "dcmi_api.h"

namespace {

namespace sdk = gpustack::sdk;
namespace support = gpustack::support;
namespace dc = gpustack::ascend::dcmi;

std::string Trimmed(const unsigned char* text, size_t capacity) {
  const char* c = reinterpret_cast<const char*>(text);
  return {c, strnlen(c, capacity)};
}

// "910B3" -> "910B", "310P3" -> "310P", "950PR" -> "950": the chip family; every Ascend 950
// variant folds to one.
std::string Family(const std::string& chip) {
  size_t digits = 0;
  while (digits < chip.size() && std::isdigit(static_cast<unsigned char>(chip[digits])) != 0)
    ++digits;
  if (digits + 1 < chip.size() && std::isalpha(static_cast<unsigned char>(chip[digits])) != 0 &&
      std::isdigit(static_cast<unsigned char>(chip[digits + 1])) != 0) {
    return "Ascend" + chip.substr(0, digits + 1);
  }
  return "Ascend" + chip.substr(0, digits);
}

constexpr const char* kInstallHint = "install the Ascend NPU driver (DCMI)";

// The Ascend Docker Runtime (RuntimeClass ascend) turns ASCEND_VISIBLE_DEVICES (physical ids)
// into device nodes; a slice's budget goes to vcann-rt's config file (not written yet).
const support::Injection kInjection{.shared_nodes = {"davinci_manager", "devmm_svm", "hisi_hdc"},
                                    .visible_env = "ASCEND_VISIBLE_DEVICES"};

class AscendPlugin final : public sdk::Plugin {
 public:
  static const sdk::Identity& GetIdentity() {
    static const sdk::Identity identity{
        .manufacturer = "ascend",
        .display_name = "Huawei Ascend",
        .base_resource_name = "huawei.com/npu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x19e5},
        .capabilities =
            GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PROCESS_METRICS,
        .partition_kind = "",
        .runtime_class = "ascend",
        .runtime_flags = GPUSTACK_RUNTIME_INJECTS_DEVICES,
        .install_hint = kInstallHint,
    };
    return identity;
  }

  explicit AscendPlugin(const sdk::Host& host)
      : host_(host),
        library_(host_, {.pci_vendor_ids = {0x19e5},
                         .candidates = {"/usr/local/Ascend/driver/lib64/driver/libdcmi.so",
                                        "/usr/local/dcmi/libdcmi.so", "libdcmi.so"},
                         .preload = {},
                         .install_hint = kInstallHint}) {}

  void Discover(sdk::DiscoverySink& sink) override {
    if (!EnsureLoaded()) return;
    int card_count = 0;
    int card_ids[dc::kMaxCards] = {};
    Check(api_.get_card_list(&card_count, card_ids, dc::kMaxCards), "listing cards");
    char driver[64] = {};
    if (api_.get_driver_version == nullptr ||
        api_.get_driver_version(driver, sizeof driver) != dc::kOk) {
      driver[0] = '\0';
    }
    // An NPU that cannot be read is reported unhealthy as it was last read, never hiding the
    // others; DCMI failing as a whole (above) fails the pass.
    sdk::CardBook::Pass pass = book_.Begin();
    std::vector<Npu> npus;
    size_t slot = 0;  // the library's enumeration: (card, device) in order
    for (int c = 0; c < std::min(card_count, dc::kMaxCards); ++c) {
      const int card = card_ids[c];
      int devices = 0;
      Check(api_.get_device_num_in_card(card, &devices), "card " + std::to_string(card));
      for (int dev = 0; dev < devices; ++dev, ++slot) {
        const std::string where = "card " + std::to_string(card) + " device " + std::to_string(dev);
        try {
          // /dev/davinci<N> is the physical id: an NPU without one is left out (fail closed).
          int logic = -1;
          unsigned physical = 0;
          int r = api_.get_device_logic_id(&logic, card, dev);
          if (r == dc::kOk)
            r = logic < 0
                    ? dc::kNotSupport
                    : api_.get_device_phyid_from_logicid(static_cast<unsigned>(logic), &physical);
          if (r == dc::kNotSupport) {
            host_.Log(GPUSTACK_LOG_WARN, "skipping " + where + ": no physical id");
            continue;
          }
          Check(r, where + ": physical id");
          dc::ChipInfo chip{};
          Check(api_.get_device_chip_info(card, dev, &chip), where + ": chip info");
          dc::DieId die{};
          Check(api_.get_device_die_v2(card, dev, dc::kDieVdie, &die), where + ": die id");
          char uuid[64];
          std::snprintf(uuid, sizeof uuid, "%08X-%08X-%08X-%08X-%08X", die.soc_die[0],
                        die.soc_die[1], die.soc_die[2], die.soc_die[3], die.soc_die[4]);
          sdk::Accelerator a;
          a.id = uuid;
          a.physical_indexes = {physical};
          if (auto bus = BusId(card, dev)) sdk::FillTopology(host_, *bus, a);
          a.memory_mib = MemoryMib(card, dev, nullptr);
          a.health = Health(card, dev, &a.health_reason);
          a.logical_slice_count = 63;  // vNPU-style AI-core quota, compute may be overcommitted
          a.cores_percentage_overcommit = true;
          const std::string chip_name = Trimmed(chip.chip_name, sizeof chip.chip_name);
          sdk::AcceleratorGroup g;
          g.memory_mib = a.memory_mib;
          g.cores = chip.aicore_cnt;
          g.family = Family(chip_name);
          g.driver_version = std::string(driver, strnlen(driver, sizeof driver));
          npus.push_back({a.id, card, dev, physical, static_cast<uint32_t>(npus.size())});
          pass.Found(slot, Trimmed(chip.chip_type, sizeof chip.chip_type) + " " + chip_name,
                     std::move(g), std::move(a));
        } catch (const sdk::Error& e) {
          support::KeepUnreadable(
              pass, book_, host_, slot, where, e.what(), [&](const sdk::Accelerator& known) {
                npus.push_back({known.id, card, dev, known.physical_indexes.at(0),
                                static_cast<uint32_t>(npus.size())});
              });
        }
      }
    }
    pass.Report(sink);
    npus_ = std::move(npus);
  }

  void Grant(const sdk::Grant& grant, sdk::ContainerEditSink& sink) override {
    support::GrantCards(*this, npus_, kInjection, grant, sink,
                        [this](const Npu& card) { return Injected(card); });
  }

  void ListDeviceNodes(const std::vector<std::string>& ids, sdk::DeviceNodeSink& sink) override {
    support::ListCardDeviceNodes(*this, npus_, kInjection, ids, sink,
                                 [this](const Npu& card) { return Injected(card); });
  }

  void SampleMetrics(const sdk::MetricsRequest& request, sdk::MetricsSink& sink) override {
    if (!EnsureLoaded() && request.accelerator_ids.empty()) return;
    for (const Npu* npu_ptr : support::CardsFor(*this, npus_, request.accelerator_ids)) {
      const Npu& npu = *npu_ptr;
      sdk::DeviceSample s;
      s.accelerator_id = npu.uuid;
      s.timestamp_ns = host_.NowNs();
      std::string reason;
      s.health = Health(npu.card, npu.device, &reason);
      uint64_t used = 0;
      if (const uint64_t total = MemoryMib(npu.card, npu.device, &used); total > 0) {
        s.memory_total_mib = static_cast<double>(total);
        s.memory_used_mib = static_cast<double>(used);
        s.memory_utilization_percent =
            100.0 * static_cast<double>(used) / static_cast<double>(total);
      }
      unsigned rate = 0;
      if (api_.get_device_utilization_rate != nullptr &&
          api_.get_device_utilization_rate(npu.card, npu.device, dc::kUtilizationAicore, &rate) ==
              dc::kOk) {
        s.cores_utilization_percent = rate;
      }
      int temperature = 0;
      if (api_.get_device_temperature != nullptr &&
          api_.get_device_temperature(npu.card, npu.device, &temperature) == dc::kOk) {
        s.temperature_celsius = temperature;
      }
      int tenths = 0;
      if (api_.get_device_power_info != nullptr &&
          api_.get_device_power_info(npu.card, npu.device, &tenths) == dc::kOk) {
        s.power_watts = tenths / 10.0;
      }
      if (!request.include_processes) {
        sink.Add(s);
        continue;
      }
      // No capacity argument: the library fills up to its own maximum (32 documented), so the
      // buffer is a generous multiple of it.
      dc::ProcMemInfo processes[dc::kProcessBuffer] = {};
      int count = 0;
      const int listed =
          api_.get_device_resource_info == nullptr
              ? dc::kNotSupport
              : api_.get_device_resource_info(npu.card, npu.device, processes, &count);
      if (listed == dc::kNotSupport) {
        s.process_listing = GPUSTACK_PROCESS_LISTING_UNSUPPORTED;
      } else if (listed != dc::kOk) {
        s.process_listing = GPUSTACK_PROCESS_LISTING_DRIVER_ERROR;
      } else if (count > dc::kProcessBuffer) {
        s.process_listing = GPUSTACK_PROCESS_LISTING_TRUNCATED;
      }
      sink.Add(s);
      if (s.process_listing == GPUSTACK_PROCESS_LISTING_COMPLETE) {
        for (int i = 0; i < count; ++i) {
          sdk::ProcessSample p;
          p.accelerator_id = npu.uuid;
          p.pid = static_cast<uint32_t>(processes[i].proc_id);
          p.memory_used_mib = static_cast<double>(processes[i].proc_mem_usage) / (1024.0 * 1024.0);
          sink.Add(p);
        }
      }
    }
  }

 private:
  struct Npu {
    std::string uuid;
    int card = 0;
    int device = 0;
    uint32_t physical = 0;  // /dev/davinci<physical>, ASCEND_VISIBLE_DEVICES
    uint32_t position = 0;  // the index it was reported at
  };
  static support::InjectedCard Injected(const Npu& npu) {
    return {npu.uuid,
            npu.position,
            std::to_string(npu.physical),
            {"davinci" + std::to_string(npu.physical)}};
  }

  bool EnsureLoaded() {
    if (initialized_) return true;
    if (!library_.Bind(&api_, &dc::Resolve)) return false;
    if (const int r = api_.init(); r != dc::kOk) {
      throw sdk::Error(GPUSTACK_STATUS_UNAVAILABLE,
                       "DCMI: initialization failed: error " + std::to_string(r));
    }
    initialized_ = true;
    return true;
  }
  void Check(int r, const std::string& what) const {
    if (r != dc::kOk) {
      throw sdk::Error(GPUSTACK_STATUS_INTERNAL, "DCMI: " + what + ": error " + std::to_string(r));
    }
  }
  std::optional<std::string> BusId(int card, int dev) const {
    char text[32];
    dc::PcieInfoAll all{};
    if (api_.get_device_pcie_info_v2 != nullptr &&
        api_.get_device_pcie_info_v2(card, dev, &all) == dc::kOk) {
      std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", static_cast<unsigned>(all.domain),
                    all.bdf_busid, all.bdf_deviceid, all.bdf_funcid);
      return sdk::NormalizeBusId(text);
    }
    dc::PcieInfo v1{};
    if (api_.get_device_pcie_info != nullptr &&
        api_.get_device_pcie_info(card, dev, &v1) == dc::kOk) {
      std::snprintf(text, sizeof text, "0000:%02x:%02x.%x", v1.bdf_busid, v1.bdf_deviceid,
                    v1.bdf_funcid);
      return sdk::NormalizeBusId(text);
    }
    return std::nullopt;
  }
  // Total MiB (0 when unknown); `used` receives the used MiB when asked.
  uint64_t MemoryMib(int card, int dev, uint64_t* used) const {
    dc::HbmInfo hbm{};
    if (api_.get_device_hbm_info != nullptr &&
        api_.get_device_hbm_info(card, dev, &hbm) == dc::kOk && hbm.memory_size > 0) {
      if (used != nullptr) *used = hbm.memory_usage;
      return hbm.memory_size;
    }
    dc::MemoryInfo memory{};  // parts without HBM
    if (api_.get_device_memory_info_v3 != nullptr &&
        api_.get_device_memory_info_v3(card, dev, &memory) == dc::kOk) {
      if (used != nullptr)
        *used = memory.memory_size - std::min(memory.memory_size, memory.memory_available);
      return memory.memory_size;
    }
    return 0;
  }
  gpustack_health Health(int card, int dev, std::string* reason) const {
    unsigned health = 0;
    if (api_.get_device_health == nullptr ||
        api_.get_device_health(card, dev, &health) != dc::kOk) {
      return GPUSTACK_HEALTH_UNKNOWN;
    }
    if (health == 0 || health == 1) return GPUSTACK_HEALTH_HEALTHY;  // 1: a minor alarm
    *reason = health == dc::kHealthMissing ? "the device does not exist"
              : health == 2                ? "major alarm"
                                           : "critical alarm";
    return GPUSTACK_HEALTH_UNHEALTHY;
  }

  sdk::Host host_;
  sdk::LazyLibrary library_;
  dc::Api api_{};
  bool initialized_ = false;
  std::vector<Npu> npus_;
  sdk::CardBook book_;
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(AscendPlugin)
