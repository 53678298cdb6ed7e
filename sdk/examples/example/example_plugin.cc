// The example plugin: what a manufacturer writes, with the SDK's C++ helpers. Its management
// library is opened on first use and only required where the PCI inventory holds its devices; a
// card that cannot be read is reported unhealthy, never hiding the others; grants become env vars
// and device nodes; what the library cannot measure stays unmeasured, never zero.
#include <gpustack/plugin.hpp>
#include <gpustack/plugin_util.hpp>

#include "examplesmi.h"

namespace {

namespace sdk = gpustack::sdk;
using sdk::Error;

constexpr uint16_t kVendorId = 0x1b36;  // QEMU's PCI vendor id: nothing real is claimed

struct Smi {  // the library's functions, bound once
  decltype(&exsmi_init) init;
  decltype(&exsmi_device_count) device_count;
  decltype(&exsmi_device_info_get) device_info;
  decltype(&exsmi_device_usage_get) device_usage;
  decltype(&exsmi_error_string) error_string;
};

bool Resolve(const sdk::VendorLibrary& library, Smi* smi, std::string* missing) {
  sdk::SymbolBinder bind(library);
  bind.Required(&smi->init, "exsmi_init");
  bind.Required(&smi->device_count, "exsmi_device_count");
  bind.Required(&smi->device_info, "exsmi_device_info_get");
  bind.Required(&smi->device_usage, "exsmi_device_usage_get");
  bind.Required(&smi->error_string, "exsmi_error_string");
  return bind.Finish(missing);
}

class ExamplePlugin final : public sdk::Plugin {
 public:
  static const sdk::Identity& GetIdentity() {
    static const sdk::Identity identity{
        .manufacturer = "example",
        .display_name = "Example Accelerator",
        .base_resource_name = "example.com/accel",
        .plugin_version = "0.2.0",
        .pci_vendor_ids = {kVendorId},
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .install_hint = "install the Example driver (it ships libexamplesmi.so.1)",
        // Its enforcement splits a card in quarters at the finest, and gives a process one card.
        .admission_flags = GPUSTACK_ADMIT_ONE_CARD_PER_CONTAINER,
        .min_slice_memory_percentage = 25,
    };
    return identity;
  }

  explicit ExamplePlugin(const sdk::Host& host)
      : host_(host),
        library_(host, {.pci_vendor_ids = {kVendorId},
                        .candidates = {"libexamplesmi.so.1", "/opt/example/libexamplesmi.so.1"},
                        .install_hint = "install the Example driver"}) {}

  void Discover(sdk::DiscoverySink& sink) override {
    if (!Load()) return;
    uint32_t count = 0;
    Check(smi_.device_count(&count), "counting devices");
    sdk::CardBook::Pass pass = cards_.Begin();
    for (uint32_t i = 0; i < count; ++i) {
      exsmi_device_info info{};
      if (const int r = smi_.device_info(i, &info); r != EXSMI_OK) {
        pass.Unreadable(i, sdk::ErrorText(smi_.error_string(r), r));  // the others still count
        continue;
      }
      sdk::Accelerator card{.id = info.uuid,
                            .physical_indexes = {info.minor},
                            .memory_mib = info.memory_mib,
                            .health = GPUSTACK_HEALTH_HEALTHY,
                            .logical_slice_count = 8};
      if (auto bus = sdk::NormalizeBusId(info.bus_id)) sdk::FillTopology(host_, *bus, card);
      pass.Found(i, info.name, {.memory_mib = info.memory_mib, .cores = info.cores}, card);
    }
    pass.Report(sink);
  }

  void Grant(const sdk::Grant& grant, sdk::ContainerEditSink& sink) override {
    if (grant.accelerator_ids.empty()) throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, "no card");
    std::string visible;
    for (const std::string& id : grant.accelerator_ids) {
      sink.DeviceNode("/dev/" + Node(cards_.at(cards_.IndexOf(id)).card));
      visible += (visible.empty() ? "" : ",") + id;
    }
    sink.Env("EXAMPLE_VISIBLE_DEVICES", visible);
    if (grant.mode == GPUSTACK_GRANT_SLICED) {
      if (grant.memory_limit_mib == 0 || grant.cores_percentage == 0 ||
          grant.cores_percentage > 100) {
        throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, "a slice needs VRAM and 1..100 % compute");
      }
      sink.Env("EXAMPLE_MEMORY_LIMIT_MIB", std::to_string(grant.memory_limit_mib));
      sink.Env("EXAMPLE_CORES_PERCENTAGE", std::to_string(grant.cores_percentage));
    }
  }

  void SampleMetrics(const sdk::MetricsRequest& request, sdk::MetricsSink& sink) override {
    for (const std::string& id : request.accelerator_ids) cards_.IndexOf(id);  // or NOT_FOUND
    for (uint32_t i = 0; i < cards_.size(); ++i) {
      const std::string& id = cards_.at(i).card.id;
      if (id.empty() || !request.Wants(id)) continue;
      sdk::DeviceSample sample{.accelerator_id = id, .timestamp_ns = host_.NowNs()};
      exsmi_device_usage u{};
      if (smi_.device_usage(i, &u) == EXSMI_OK) {
        sample.memory_used_mib = static_cast<double>(u.memory_used_mib);
        sample.cores_utilization_percent = u.utilization_percent;
        if (u.temperature_celsius >= -273) sample.temperature_celsius = u.temperature_celsius;
        sample.health = GPUSTACK_HEALTH_HEALTHY;
      } else {
        sample.health = GPUSTACK_HEALTH_UNHEALTHY;
      }
      sink.Add(sample);
    }
  }

  void ListDeviceNodes(const std::vector<std::string>& ids, sdk::DeviceNodeSink& sink) override {
    for (const std::string& id : ids) cards_.IndexOf(id);  // or NOT_FOUND
    for (size_t i = 0; i < cards_.size(); ++i) {
      const sdk::Accelerator& card = cards_.at(i).card;
      if (!card.id.empty() && sdk::Covers(ids, card.id)) sink.Add({card.id, Node(card)});
    }
  }

 private:
  bool Load() {
    if (!library_.Bind(&smi_, Resolve)) return false;
    if (!initialized_) Check(smi_.init(), "initializing");
    initialized_ = true;
    return true;
  }
  void Check(int r, const std::string& what) const {
    if (r != EXSMI_OK) {
      throw Error(GPUSTACK_STATUS_INTERNAL,
                  "examplesmi: " + what + ": " + sdk::ErrorText(smi_.error_string(r), r));
    }
  }
  static std::string Node(const sdk::Accelerator& card) {
    return "exaccel" + std::to_string(card.physical_indexes.at(0));
  }

  sdk::Host host_;
  sdk::LazyLibrary library_;
  Smi smi_{};
  bool initialized_ = false;
  sdk::CardBook cards_;
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(ExamplePlugin)
