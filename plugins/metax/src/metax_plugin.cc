// The MetaX plugin (metax-tech.com/gpu): discovery, grants and metrics through mxSml
// (libmxsml.so).
// Cards are exposed through their DRM nodes (read from sysfs, either may be missing); sGPU
// slices are not applied yet. See README.md.
#include <gpustack/plugin.hpp>

#include <gpustack_support/discovery.h>
#include <gpustack_support/injection.h>
#include <gpustack/plugin_util.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "mxsml_api.h"

namespace {

namespace sdk = gpustack::sdk;
namespace support = gpustack::support;
namespace mx = gpustack::metax::mxsml;

std::string Trimmed(const char* text, size_t capacity) { return {text, strnlen(text, capacity)}; }

constexpr const char* kInstallHint = "install the MetaX driver (mxSml under /opt/mxdriver)";

// No runtime needed: the grant carries the control node and the card's DRM nodes.
const support::Injection kInjection{.shared_nodes = {"mxcd"}, .inject_nodes = true};

class MetaxPlugin final : public sdk::Plugin {
 public:
  static const sdk::Identity& GetIdentity() {
    static const sdk::Identity identity{
        .manufacturer = "metax",
        .display_name = "MetaX",
        .base_resource_name = "metax-tech.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x9999},
        .capabilities =
            GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING | GPUSTACK_CAP_PROCESS_METRICS,
        .partition_kind = "",
        .runtime_class = "metax",  // not required: the grant injects the device nodes
        .install_hint = kInstallHint,
    };
    return identity;
  }

  explicit MetaxPlugin(const sdk::Host& host)
      : host_(host),
        library_(host_,
                 {.pci_vendor_ids = {0x9999},
                  .candidates = {"/opt/mxdriver/lib/libmxsml.so", "/opt/maca/lib/libmxsml.so",
                                 "/opt/mxn100/lib/libmxsml.so", "libmxsml.so"},
                  .preload = {},
                  .install_hint = kInstallHint}) {}
  ~MetaxPlugin() override {
    if (initialized_ && api_.shutdown != nullptr) api_.shutdown();
  }

  void Discover(sdk::DiscoverySink& sink) override {
    if (!EnsureLoaded()) return;
    const unsigned count = api_.get_device_count();
    char maca[64] = {};
    unsigned maca_size = sizeof maca;
    if (api_.get_maca_version == nullptr ||
        api_.get_maca_version(maca, &maca_size) != mx::kSuccess) {
      maca[0] = '\0';
    }
    // A card that cannot be read is reported unhealthy as it was last read, never hiding the
    // others.
    sdk::CardBook::Pass pass = book_.Begin();
    std::vector<Card> cards;
    for (unsigned id = 0; id < count; ++id) {
      const std::string where = "device " + std::to_string(id);
      try {
        mx::DeviceInfo info{};
        Check(api_.get_device_info(id, &info), where + ": info");
        // On an SR-IOV host the physical function is not a card a container can use; its VFs
        // are.
        if (info.mode == mx::kModePf) continue;
        mx::MemoryInfo memory{};
        Check(api_.get_memory_info(id, &memory), where + ": memory");
        const auto bus = sdk::NormalizeBusId(Trimmed(info.bdf_id, sizeof info.bdf_id));
        sdk::Accelerator a;
        a.id = Trimmed(info.uuid, sizeof info.uuid);
        if (!bus || a.id.empty()) {
          host_.Log(GPUSTACK_LOG_WARN, "skipping mxSml " + where + ": no bus id or UUID");
          continue;
        }
        const gpustack_pci_device* pci = sdk::FillTopology(host_, *bus, a);
        const sdk::DrmNodes drm = pci != nullptr
                                      ? sdk::ReadDrmNodes(std::string(sdk::View(pci->sysfs_path)))
                                      : sdk::DrmNodes{};
        // Positions matter ([card, render]): without the card node the card cannot be exposed.
        if (!drm.card) {
          host_.Log(GPUSTACK_LOG_WARN, "skipping " + a.id + ": no DRM card node in sysfs");
          continue;
        }
        a.physical_indexes.push_back(*drm.card);
        if (drm.render) a.physical_indexes.push_back(*drm.render);
        a.memory_mib = static_cast<uint64_t>(memory.vram_total) / 1024;
        a.health = GPUSTACK_HEALTH_UNKNOWN;  // not queried
        a.logical_slice_count = 16;          // sGPU: up to 16 subdevices per card
        a.cores_percentage_overcommit = false;
        char driver[64] = {};
        unsigned driver_size = sizeof driver;
        if (api_.get_device_version == nullptr ||
            api_.get_device_version(id, mx::kVersionDriver, driver, &driver_size) != mx::kSuccess) {
          driver[0] = '\0';
        }
        sdk::AcceleratorGroup g;
        g.memory_mib = a.memory_mib;
        g.driver_version = Trimmed(driver, sizeof driver);
        g.runtime_version = Trimmed(maca, sizeof maca);
        cards.push_back(
            {a.id, id, info.gpu_id, a.physical_indexes, static_cast<uint32_t>(cards.size())});
        pass.Found(id, Trimmed(info.device_name, sizeof info.device_name), std::move(g),
                   std::move(a));
      } catch (const sdk::Error& e) {
        support::KeepUnreadable(
            pass, book_, host_, id, where, e.what(), [&](const sdk::Accelerator& known) {
              cards.push_back(
                  {known.id, id, 0, known.physical_indexes, static_cast<uint32_t>(cards.size())});
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
      mx::MemoryInfo memory{};
      if (api_.get_memory_info(card.id, &memory) == mx::kSuccess && memory.vram_total > 0) {
        s.memory_total_mib = static_cast<double>(memory.vram_total) / 1024.0;
        s.memory_used_mib = static_cast<double>(memory.vram_use) / 1024.0;
        s.memory_utilization_percent =
            100.0 * static_cast<double>(memory.vram_use) / static_cast<double>(memory.vram_total);
      }
      int usage = 0;
      if (api_.get_device_ip_usage != nullptr &&
          api_.get_device_ip_usage(card.id, mx::kUsageXcore, &usage) == mx::kSuccess) {
        s.cores_utilization_percent = usage;
      }
      int hundredths = 0;
      if (api_.get_temperature_info != nullptr &&
          api_.get_temperature_info(card.id, mx::kSensorHotspot, &hundredths) == mx::kSuccess) {
        s.temperature_celsius = hundredths / 100.0;
      }
      // Board power is the sum over the board's supply ways (2 or 3).
      mx::BoardWayElectricInfo ways[4] = {};
      unsigned n = 4;
      if (api_.get_board_power_info != nullptr &&
          api_.get_board_power_info(card.id, &n, ways) == mx::kSuccess && n > 0) {
        double milliwatts = 0;
        for (unsigned i = 0; i < std::min(n, 4u); ++i) milliwatts += ways[i].power_mw;
        s.power_watts = milliwatts / 1000.0;
      }
      if (!request.include_processes) {
        sink.Add(s);
        continue;
      }
      std::vector<mx::ProcessInfo> processes;
      s.process_listing = Processes(card.id, processes);
      sink.Add(s);
      if (s.process_listing == GPUSTACK_PROCESS_LISTING_COMPLETE) {
        for (size_t i = 0; i < processes.size(); ++i) {
          sdk::ProcessSample p;
          p.accelerator_id = card.uuid;
          p.pid = processes[i].process_id;
          double bytes = 0;
          for (unsigned j = 0; j < std::min(processes[i].gpu_number, 64u); ++j) {
            // A process lists every GPU it uses; only this card's share is this card's.
            if (processes[i].gpus[j].gpu_id == card.gpu_id) {
              bytes += static_cast<double>(processes[i].gpus[j].gpu_memory_usage);
            }
          }
          p.memory_used_mib = bytes / (1024.0 * 1024.0);
          sink.Add(p);
        }
      }
    }
  }

 private:
  // Every process on the card, or why not all: INSUFFICIENT_SIZE leaves the count needed, so the
  // buffer grows once.
  gpustack_process_listing Processes(unsigned card, std::vector<mx::ProcessInfo>& out) const {
    if (api_.get_single_gpu_process == nullptr) return GPUSTACK_PROCESS_LISTING_UNSUPPORTED;
    unsigned count = 16;
    mx::Return r = mx::kInsufficientSize;
    for (int attempt = 0; attempt < 2 && r == mx::kInsufficientSize; ++attempt) {
      out.resize(std::max<size_t>(count + (attempt == 0 ? 0 : 8), out.size()));
      count = static_cast<unsigned>(out.size());
      r = api_.get_single_gpu_process(card, &count, out.data());
    }
    if (r == mx::kInsufficientSize) return GPUSTACK_PROCESS_LISTING_TRUNCATED;
    if (r == mx::kOperationNotSupport) return GPUSTACK_PROCESS_LISTING_UNSUPPORTED;
    if (r != mx::kSuccess) return GPUSTACK_PROCESS_LISTING_DRIVER_ERROR;
    out.resize(std::min<size_t>(count, out.size()));
    return GPUSTACK_PROCESS_LISTING_COMPLETE;
  }

  struct Card {
    std::string uuid;
    unsigned id = 0;            // mxSml's device id
    unsigned gpu_id = 0;        // how process entries name the GPU
    std::vector<uint32_t> drm;  // card, and render when present
    uint32_t position = 0;      // the index it was reported at
  };
  static support::InjectedCard Injected(const Card& card) {
    support::InjectedCard out{card.uuid, card.position, card.uuid, {}};
    out.nodes.push_back("dri/card" + std::to_string(card.drm.at(0)));
    if (card.drm.size() > 1) out.nodes.push_back("dri/renderD" + std::to_string(card.drm[1]));
    return out;
  }

  bool EnsureLoaded() {
    if (initialized_) return true;
    if (!library_.Bind(&api_, &mx::Resolve)) return false;
    if (const mx::Return r = api_.init(); r != mx::kSuccess) {
      throw sdk::Error(GPUSTACK_STATUS_UNAVAILABLE, "mxSml: initialization failed: " + Text(r));
    }
    initialized_ = true;
    return true;
  }
  std::string Text(mx::Return r) const {
    return sdk::ErrorText(api_.get_error_string != nullptr ? api_.get_error_string(r) : nullptr,
                          static_cast<int>(r));
  }
  void Check(mx::Return r, const std::string& what) const {
    if (r != mx::kSuccess)
      throw sdk::Error(GPUSTACK_STATUS_INTERNAL, "mxSml: " + what + ": " + Text(r));
  }

  sdk::Host host_;
  sdk::LazyLibrary library_;
  mx::Api api_{};
  bool initialized_ = false;
  std::vector<Card> cards_;
  sdk::CardBook book_;
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(MetaxPlugin)
