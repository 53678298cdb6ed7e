// A C++ plugin built on plugin.hpp whose hooks throw, to show that no exception crosses the ABI:
// discover throws std::runtime_error (-> INTERNAL), grant throws sdk::Error (-> its status), and
// init throws when the config key "throw_in_init" is set.
#include <gpustack/plugin.hpp>

#include <stdexcept>

namespace {

class ThrowingPlugin final : public gpustack::sdk::Plugin {
 public:
  static const gpustack::sdk::Identity& GetIdentity() {
    static const gpustack::sdk::Identity identity{
        .manufacturer = FAKE_NAME,
        .display_name = "Fake throwing plugin",
        .base_resource_name = "fake.example.com/accel",
        .plugin_version = "0.0.1",
        .pci_vendor_ids = {0xfa4e},
        .capabilities = GPUSTACK_CAP_SHARED,
        .partition_kind = "",
    };
    return identity;
  }

  explicit ThrowingPlugin(const gpustack::sdk::Host& host) {
    if (host.Config("throw_in_init")) throw std::logic_error("init exploded on purpose");
  }

  void Discover(gpustack::sdk::DiscoverySink& /*sink*/) override {
    throw std::runtime_error("discover exploded on purpose");
  }

  void Grant(const gpustack::sdk::Grant& /*grant*/,
             gpustack::sdk::ContainerEditSink& /*sink*/) override {
    throw gpustack::sdk::Error(GPUSTACK_STATUS_PERMISSION_DENIED, "grant refused on purpose");
  }
};

}  // namespace

GPUSTACK_PLUGIN_DEFINE(ThrowingPlugin)
