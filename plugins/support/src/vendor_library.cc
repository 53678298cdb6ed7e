#include "gpustack_support/vendor_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace gpustack::support {

std::unique_ptr<VendorLibrary> VendorLibrary::Open(const LibrarySearch& search,
                                                   std::string* error) {
  std::vector<std::string> paths = search.override_path.empty()
                                       ? search.candidates
                                       : std::vector<std::string>{search.override_path};
  std::string tried;
  for (const std::string& path : paths) {
    dlerror();
    // RTLD_NODELETE: a vendor library may start threads or register exit handlers; unmapping it
    // under them would crash the host, so it stays mapped once loaded.
    void* handle =
        dlopen(path.c_str(), RTLD_NOW | RTLD_NODELETE | (search.global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (handle != nullptr) return std::unique_ptr<VendorLibrary>(new VendorLibrary(handle, path));
    const char* why = dlerror();
    if (!tried.empty()) tried += "; ";
    tried += why != nullptr ? why : path + ": cannot be opened";
  }
  if (error != nullptr) *error = paths.empty() ? "no library path to try" : tried;
  return nullptr;
}

VendorLibrary::~VendorLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* VendorLibrary::FindAny(std::initializer_list<std::string_view> names) const {
  for (std::string_view name : names) {
    void* symbol = dlsym(handle_, std::string(name).c_str());
    if (symbol != nullptr) return symbol;
  }
  return nullptr;
}

LibrarySearch MakeSearch(std::optional<std::string_view> config_value, const char* env_name,
                         std::vector<std::string> candidates) {
  LibrarySearch search;
  search.candidates = std::move(candidates);
  if (config_value && !config_value->empty()) {
    search.override_path = std::string(*config_value);
  } else if (const char* env = secure_getenv(env_name); env != nullptr && *env != '\0') {
    search.override_path = env;
  }
  return search;
}

}  // namespace gpustack::support
