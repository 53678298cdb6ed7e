// An example GPUStack plugin written with the SDK's C++ helper (gpustack/plugin.hpp).
//
// It drives simulated accelerators so it runs anywhere: the node config setting "devices" (a
// count, default 0) says how many exist. A real plugin would dlopen its vendor's management
// library in the constructor and ask it instead. Everything else is what a real plugin does:
// identify without touching hardware, report each card once, turn a grant into container edits,
// sample metrics with "not measured" kept apart from zero, and reject bad input with a status.
#include <gpustack/plugin.hpp>

#include <algorithm>
#include <charconv>
#include <string>

namespace {

using gpustack::sdk::Error;

constexpr uint64_t kCardMemoryMib = 8192;

class ExamplePlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = "example",
        .display_name = "Example Accelerator",
        .base_resource_name = "example.com/accel",
        .plugin_version = "0.1.0",
        .pci_vendor_ids = {0x1b36},  // QEMU's vendor id: nothing real is claimed
        .capabilities = GPUSTACK_CAP_SHARED | GPUSTACK_CAP_LOGICAL_SLICING,
        .partition_kind = "",
    };
    return identity;
  }

  explicit ExamplePlugin(const gpustack::sdk::Host& host) : host_(host) {
    if (auto text = host_.Config("devices")) {
      auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), devices_);
      if (ec != std::errc() || end != text->data() + text->size() || devices_ > 64) {
        throw Error(
            GPUSTACK_STATUS_INVALID_ARGUMENT,
            "setting \"devices\" must be a count from 0 to 64, got \"" + std::string(*text) + "\"");
      }
    }
    if (host_.LogEnabled(GPUSTACK_LOG_INFO)) {
      host_.Log(GPUSTACK_LOG_INFO, "simulating " + std::to_string(devices_) + " accelerator(s)");
    }
  }

  void Discover(gpustack::sdk::DiscoverySink& sink) override {
    if (devices_ == 0) return;  // nothing present is a valid, empty answer
    gpustack::sdk::AcceleratorGroup group{.product = "Example Accelerator 8G",
                                          .family = "Simulated",
                                          .memory_mib = kCardMemoryMib,
                                          .cores = 1024};
    for (uint32_t i = 0; i < devices_; ++i) {
      group.accelerators.push_back({.id = Id(i),
                                    .index = i,
                                    .physical_indexes = {i},
                                    .memory_mib = kCardMemoryMib,
                                    .health = GPUSTACK_HEALTH_HEALTHY,
                                    .logical_slice_count = 8});
    }
    sink.Add(group);
  }

  void Grant(const gpustack::sdk::Grant& grant, gpustack::sdk::ContainerEditSink& sink) override {
    if (grant.accelerator_ids.empty())
      throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT, "no accelerator granted");
    std::string visible;
    for (const std::string& id : grant.accelerator_ids) {
      Index(id);  // throws NOT_FOUND for a card that does not exist
      visible += (visible.empty() ? "" : ",") + id;
    }
    sink.Env("EXAMPLE_VISIBLE_DEVICES", visible);
    if (grant.mode == GPUSTACK_GRANT_SLICED) {
      if (grant.memory_limit_mib == 0 || grant.cores_percentage == 0 ||
          grant.cores_percentage > 100) {
        throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT,
                    "a slice needs a VRAM budget and 1..100 % compute");
      }
      sink.Env("EXAMPLE_MEMORY_LIMIT_MIB", std::to_string(grant.memory_limit_mib));
      sink.Env("EXAMPLE_CORES_PERCENTAGE", std::to_string(grant.cores_percentage));
    }
  }

  void SampleMetrics(const gpustack::sdk::MetricsRequest& request,
                     gpustack::sdk::MetricsSink& sink) override {
    for (const std::string& id : request.accelerator_ids) Index(id);
    for (uint32_t i = 0; i < devices_; ++i) {
      if (!request.accelerator_ids.empty() &&
          std::find(request.accelerator_ids.begin(), request.accelerator_ids.end(), Id(i)) ==
              request.accelerator_ids.end()) {
        continue;
      }
      gpustack::sdk::DeviceSample sample;
      sample.accelerator_id = Id(i);
      sample.timestamp_ns = host_.NowNs();
      sample.memory_total_mib = static_cast<double>(kCardMemoryMib);
      sample.memory_used_mib = 0.0;
      // Utilization, temperature and power are not simulated: left unmeasured, never zero.
      sample.health = GPUSTACK_HEALTH_HEALTHY;
      sink.Add(sample);
    }
  }

 private:
  static std::string Id(uint32_t i) { return "EXAMPLE-" + std::to_string(i); }
  uint32_t Index(const std::string& id) const {
    for (uint32_t i = 0; i < devices_; ++i) {
      if (Id(i) == id) return i;
    }
    throw Error(GPUSTACK_STATUS_NOT_FOUND, "no accelerator " + id);
  }

  gpustack::sdk::Host host_;
  uint32_t devices_ = 0;
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(ExamplePlugin)
