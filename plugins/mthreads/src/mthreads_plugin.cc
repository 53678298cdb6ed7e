// The Moore Threads plugin (mthreads.com/gpu): discovery, grants and metrics through MTML
// (libmtml.so).
// The card's device node number is read from the library's /dev/mtgpu.<N> path, never taken from
// the enumeration index. MPC (whole-card partition configurations) is reported, not driven; MTML
// 2.2 lists no processes. See README.md.
#include <gpustack/plugin.hpp>

#include <gpustack_support/discovery.h>
#include <gpustack_support/injection.h>
#include <gpustack/plugin_util.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <vector>

#include "mtml_api.h"

namespace {

namespace sdk = gpustack::sdk;
namespace support = gpustack::support;
namespace mt = gpustack::mthreads::mtml;

std::string Trimmed(const char* text, size_t capacity) { return {text, strnlen(text, capacity)}; }

// "/dev/mtgpu.3" -> 3.
std::optional<uint32_t> NodeNumber(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (path.rfind("/dev/mtgpu.", 0) != 0 || dot == std::string::npos) return std::nullopt;
  uint32_t n = 0;
  const char* begin = path.data() + dot + 1;
  const char* end = path.data() + path.size();
  auto [ptr, ec] = std::from_chars(begin, end, n);
  if (ec != std::errc() || ptr != end || begin == end) return std::nullopt;
  return n;
}

constexpr const char* kInstallHint = "install the Moore Threads driver (MTML)";

// The MT container toolkit (RuntimeClass mthreads) injects the driver and turns
// MTHREADS_VISIBLE_DEVICES into device nodes; a slice's budget is the sGPU module's per-container
// memory limit (bytes) and compute weight.
const support::Injection kInjection{.visible_env = "MTHREADS_VISIBLE_DEVICES",
                                    .memory_env = "MTHREADS_QOS_MEMORY_LIMIT",
                                    .memory_env_positional = false,
                                    .memory_unit_bytes = 1,
                                    .cores_env = "MTHREADS_QOS_COMPUTING_POWER_WEIGHT"};

class MthreadsPlugin final : public sdk::Plugin {
 public:
  static const sdk::Identity& GetIdentity() {
    static const sdk::Identity identity{
        .manufacturer = "mthreads",
        .display_name = "Moore Threads",
        .base_resource_name = "mthreads.com/gpu",
        .plugin_version = GPUSTACK_PLUGIN_VERSION,
        .pci_vendor_ids = {0x1ed5},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .partition_kind = "",
        .runtime_class = "mthreads",
        .runtime_flags = GPUSTACK_RUNTIME_INJECTS_DRIVER,
        .install_hint = kInstallHint,
    };
    return identity;
  }

  explicit MthreadsPlugin(const sdk::Host& host)
      : host_(host),
        library_(host_, {.pci_vendor_ids = {0x1ed5},
                         .candidates = {"/usr/lib/x86_64-linux-gnu/libmtml.so",
                                        "/usr/local/musa/lib/libmtml.so", "libmtml.so"},
                         .preload = {},
                         .install_hint = kInstallHint}) {}
  ~MthreadsPlugin() override {
    if (library_handle_ != nullptr) api_.library_shut_down(library_handle_);
  }

  void Discover(sdk::DiscoverySink& sink) override {
    if (!EnsureLoaded()) return;
    unsigned count = 0;
    Check(api_.library_count_device(library_handle_, &count), "counting devices");
    std::string driver;
    mt::System* system = nullptr;
    char version[mt::kDriverVersionSize] = {};
    if (api_.library_init_system != nullptr && api_.system_get_driver_version != nullptr &&
        api_.library_init_system(library_handle_, &system) == mt::kSuccess &&
        api_.system_get_driver_version(system, version, sizeof version) == mt::kSuccess) {
      driver = Trimmed(version, sizeof version);
    }
    // A card that cannot be read is reported unhealthy as it was last read, never hiding the
    // others; MTML failing as a whole (above) fails the pass.
    sdk::CardBook::Pass pass = book_.Begin();
    std::vector<Card> cards;
    for (unsigned i = 0; i < count; ++i) {
      const std::string where = "device " + std::to_string(i);
      mt::Device* device = nullptr;
      try {
        Check(api_.library_init_device_by_index(library_handle_, i, &device), where);
        char uuid[mt::kUuidSize] = {};
        char name[mt::kNameSize] = {};
        char path[mt::kPathSize] = {};
        mt::PciInfo pci{};
        mt::Memory* memory = nullptr;
        unsigned long long total = 0;
        Check(api_.device_get_uuid(device, uuid, sizeof uuid), where + ": uuid");
        Check(api_.device_get_name(device, name, sizeof name), where + ": name");
        Check(api_.device_get_pci_info(device, &pci), where + ": PCI info");
        Check(api_.device_init_memory(device, &memory), where + ": memory");
        Check(api_.memory_get_total(memory, &total), where + ": memory total");
        sdk::Accelerator a;
        a.id = Trimmed(uuid, sizeof uuid);
        const auto bus = sdk::NormalizeBusId(Trimmed(pci.sbdf, sizeof pci.sbdf));
        const mt::Return path_status = api_.device_get_gpu_path(device, path, sizeof path);
        if (path_status != mt::kNotSupported) Check(path_status, where + ": device path");
        const auto node =
            path_status == mt::kSuccess ? NodeNumber(Trimmed(path, sizeof path)) : std::nullopt;
        if (!bus || !node) {
          host_.Log(GPUSTACK_LOG_WARN, "skipping MTML " + where + " (" + a.id +
                                           "): no bus id or /dev/mtgpu node number");
          continue;
        }
        sdk::FillTopology(host_, *bus, a);
        a.physical_indexes = {*node};
        a.memory_mib = total / (1024 * 1024);
        a.health = GPUSTACK_HEALTH_UNKNOWN;  // MTML 2.2 has no health query
        a.logical_slice_count = 16;          // sGPU: max_inst up to 16
        int mpc = 0;
        if (api_.device_get_mpc_mode != nullptr &&
            api_.device_get_mpc_mode(device, &mpc) == mt::kSuccess && mpc == 1) {
          // Its instances are whole-card configurations this plugin does not drive: the card is
          // not offered for slicing while MPC holds it.
          host_.Log(GPUSTACK_LOG_WARN, a.id + " is in MPC mode; it is offered whole only");
          a.logical_slice_count = 0;
        }
        unsigned cores = 0;
        if (api_.device_count_gpu_cores == nullptr ||
            api_.device_count_gpu_cores(device, &cores) != mt::kSuccess) {
          cores = 0;
        }
        sdk::AcceleratorGroup g;
        g.memory_mib = a.memory_mib;
        g.cores = cores;
        g.driver_version = driver;
        cards.push_back({a.id, device, *node, static_cast<uint32_t>(cards.size())});
        pass.Found(i, Trimmed(name, sizeof name), std::move(g), std::move(a));
      } catch (const sdk::Error& e) {
        support::KeepUnreadable(pass, book_, host_, i, where, e.what(),
                                [&](const sdk::Accelerator& known) {
                                  cards.push_back({known.id, nullptr, known.physical_indexes.at(0),
                                                   static_cast<uint32_t>(cards.size())});
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
      if (card.device == nullptr) {  // it did not answer at the last discovery
        s.health = GPUSTACK_HEALTH_UNHEALTHY;
        sink.Add(s);
        continue;
      }
      mt::Memory* memory = nullptr;
      unsigned long long total = 0, used = 0;
      if (api_.device_init_memory(card.device, &memory) == mt::kSuccess &&
          api_.memory_get_total(memory, &total) == mt::kSuccess && total > 0) {
        s.memory_total_mib = static_cast<double>(total) / (1024.0 * 1024.0);
        if (api_.memory_get_used != nullptr &&
            api_.memory_get_used(memory, &used) == mt::kSuccess) {
          s.memory_used_mib = static_cast<double>(used) / (1024.0 * 1024.0);
          s.memory_utilization_percent =
              100.0 * static_cast<double>(used) / static_cast<double>(total);
        }
      }
      mt::Gpu* gpu = nullptr;
      if (api_.device_init_gpu != nullptr &&
          api_.device_init_gpu(card.device, &gpu) == mt::kSuccess) {
        unsigned utilization = 0;
        if (api_.gpu_get_utilization != nullptr &&
            api_.gpu_get_utilization(gpu, &utilization) == mt::kSuccess) {
          s.cores_utilization_percent = utilization;
        }
        int temperature = 0;
        if (api_.gpu_get_temperature != nullptr &&
            api_.gpu_get_temperature(gpu, &temperature) == mt::kSuccess) {
          s.temperature_celsius = temperature;
        }
      }
      unsigned milliwatts = 0;
      if (api_.device_get_power_usage != nullptr &&
          api_.device_get_power_usage(card.device, &milliwatts) == mt::kSuccess) {
        s.power_watts = milliwatts / 1000.0;
      }
      sink.Add(s);
    }
  }

 private:
  struct Card {
    std::string uuid;
    mt::Device* device = nullptr;  // null: it did not answer at the last discovery
    uint32_t node = 0;             // /dev/mtgpu.<node>
    uint32_t position = 0;         // the index it was reported at
  };
  static support::InjectedCard Injected(const Card& card) {
    return {card.uuid,
            card.position,
            std::to_string(card.node),
            {"mtgpu." + std::to_string(card.node)}};
  }

  bool EnsureLoaded() {
    if (library_handle_ != nullptr) return true;
    if (!library_.Bind(&api_, &mt::Resolve)) return false;
    mt::Library* handle = nullptr;
    if (const mt::Return r = api_.library_init(&handle); r != mt::kSuccess) {
      throw sdk::Error(GPUSTACK_STATUS_UNAVAILABLE, "MTML: initialization failed: " + Text(r));
    }
    library_handle_ = handle;
    return true;
  }
  std::string Text(mt::Return r) const {
    return sdk::ErrorText(api_.error_string != nullptr ? api_.error_string(r) : nullptr,
                          static_cast<int>(r));
  }
  void Check(mt::Return r, const std::string& what) const {
    if (r != mt::kSuccess)
      throw sdk::Error(GPUSTACK_STATUS_INTERNAL, "MTML: " + what + ": " + Text(r));
  }

  sdk::Host host_;
  sdk::LazyLibrary library_;
  mt::Api api_{};
  mt::Library* library_handle_ = nullptr;
  std::vector<Card> cards_;
  sdk::CardBook book_;
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(MthreadsPlugin)
