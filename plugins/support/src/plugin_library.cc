#include "gpustack_support/plugin_library.h"

#include "gpustack_support/pci_topology.h"

namespace gpustack::support {

const VendorLibrary* PluginLibrary::Open() {
  if (library_ != nullptr) return library_.get();
  for (const std::string& path :
       preloaded_.empty() ? requirements_.preload : std::vector<std::string>{}) {
    std::string ignored;
    if (auto lib = VendorLibrary::Open({.override_path = {}, .candidates = {path}, .global = true},
                                       &ignored)) {
      preloaded_.push_back(std::move(lib));
      break;
    }
  }
  std::string error;
  library_ = VendorLibrary::Open(
      MakeSearch(host_.Config("library_path"), requirements_.env.c_str(), requirements_.candidates),
      &error);
  if (library_ != nullptr) return library_.get();
  if (!HasVendorDevice(host_.PciDevices(), requirements_.pci_vendor_ids)) return nullptr;
  throw sdk::Error(GPUSTACK_STATUS_UNAVAILABLE, "management library not found (" + error + "); " +
                                                    requirements_.install_hint + ", or set " +
                                                    requirements_.env);
}

void PluginLibrary::Reject(const std::string& missing) {
  const std::string path = library_ != nullptr ? library_->path() : std::string("the library");
  library_.reset();
  throw sdk::Error(GPUSTACK_STATUS_UNAVAILABLE,
                   path + " lacks " + missing + ": the driver is too old or not this vendor's");
}

std::string ErrorText(const char* text, int code) {
  return std::string(text != nullptr ? text : "error") + " (" + std::to_string(code) + ")";
}

}  // namespace gpustack::support
