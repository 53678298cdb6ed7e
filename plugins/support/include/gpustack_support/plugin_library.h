// How a plugin opens its vendor's management library: the override (plugin config
// `library_path`, else GPUSTACK_<MFR>_LIBRARY) or the well-known paths; any dependency preloaded
// first; and the one rule for a missing library: nothing to do on a node without the vendor's
// devices, a clear UNAVAILABLE (what was tried, what to install) on a node with them.
#ifndef GPUSTACK_SUPPORT_PLUGIN_LIBRARY_H_
#define GPUSTACK_SUPPORT_PLUGIN_LIBRARY_H_

#include <gpustack/plugin.hpp>

#include <memory>
#include <string>
#include <vector>

#include "gpustack_support/vendor_library.h"

namespace gpustack::support {

struct LibraryRequirements {
  std::vector<uint16_t> pci_vendor_ids;  // a node without them needs no library
  std::string env;                       // "GPUSTACK_NVIDIA_LIBRARY"
  std::vector<std::string> candidates;
  std::vector<std::string> preload;  // opened first, global, best effort (T-Head's libuki)
  std::string install_hint;          // "install the NVIDIA driver"
};

class PluginLibrary {
 public:
  PluginLibrary(const sdk::Host& host, LibraryRequirements requirements)
      : host_(host), requirements_(std::move(requirements)) {}

  // The open library, or nullptr when it is missing on a node without the vendor's devices.
  // Throws sdk::Error(UNAVAILABLE) when devices need it. Opens once; later calls are cheap.
  const VendorLibrary* Open();
  // For a library that opened but is unusable (a required symbol is missing): forget it and
  // throw UNAVAILABLE naming the file and what it lacks.
  [[noreturn]] void Reject(const std::string& missing);

  // Opens the library and binds its function table with `resolve`, once. False when the library
  // is missing on a node without the vendor's devices; throws as Open and Reject do.
  // `resolve(library, api, &missing)` fills the table and says whether it is complete.
  template <class Api, class Resolve>
  bool Bind(Api* api, Resolve resolve) {
    if (bound_) return true;
    const VendorLibrary* library = Open();
    if (library == nullptr) return false;
    std::string missing;
    if (!resolve(*library, api, &missing)) Reject(missing);
    bound_ = true;
    return true;
  }

 private:
  const sdk::Host& host_;
  LibraryRequirements requirements_;
  std::vector<std::unique_ptr<VendorLibrary>> preloaded_;
  std::unique_ptr<VendorLibrary> library_;
  bool bound_ = false;
};

// "<vendor text> (<code>)", or "error (<code>)" when the library has no text for it.
std::string ErrorText(const char* text, int code);

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_PLUGIN_LIBRARY_H_
