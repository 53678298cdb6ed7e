// Loading a manufacturer's management library at run time. Plugins never link a vendor library:
// a node without the driver must still load the plugin and get a clear "unsupported" answer.
#ifndef GPUSTACK_SUPPORT_VENDOR_LIBRARY_H_
#define GPUSTACK_SUPPORT_VENDOR_LIBRARY_H_

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpustack::support {

// Where to look for a library: an explicit override (plugin config `library_path`, else the
// GPUSTACK_<MFR>_LIBRARY variable) replaces the candidates; otherwise each candidate is tried in
// order (absolute paths first, then bare sonames through the dynamic linker's search path).
struct LibrarySearch {
  std::string override_path;
  std::vector<std::string> candidates;
  // RTLD_LOCAL unless set: Hygon's and Iluvatar's libraries export NVML's names and must not
  // leak them. Only a dependency another vendor library needs resolved (T-Head's libuki) is
  // opened global.
  bool global = false;
};

class VendorLibrary {
 public:
  // Opens the first loadable candidate. On failure returns nullptr and sets `error` to every
  // path tried and why it failed.
  static std::unique_ptr<VendorLibrary> Open(const LibrarySearch& search, std::string* error);
  ~VendorLibrary();
  VendorLibrary(const VendorLibrary&) = delete;
  VendorLibrary& operator=(const VendorLibrary&) = delete;

  const std::string& path() const { return path_; }

  // The first of `names` the library exports, cast to `Fn`, or nullptr.
  template <class Fn>
  Fn Find(std::initializer_list<std::string_view> names) const {
    return reinterpret_cast<Fn>(FindAny(names));
  }

 private:
  VendorLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* FindAny(std::initializer_list<std::string_view> names) const;

  void* handle_;
  std::string path_;
};

// Resolves a library's functions into a table, remembering the first required one missing.
class SymbolBinder {
 public:
  explicit SymbolBinder(const VendorLibrary& library) : library_(library) {}
  template <class Fn>
  void Required(Fn* slot, const char* name) {
    *slot = library_.Find<Fn>({name});
    if (*slot == nullptr && missing_.empty()) missing_ = name;
  }
  template <class Fn>
  void Optional(Fn* slot, const char* name) {
    *slot = library_.Find<Fn>({name});
  }
  // Fails when any required function was missing; `missing` then names the first.
  bool Finish(std::string* missing) const {
    if (!missing_.empty() && missing != nullptr) *missing = missing_;
    return missing_.empty();
  }

 private:
  const VendorLibrary& library_;
  std::string missing_;
};

// Builds a search from the conventional override sources: `config_value` (plugin config
// "library_path") wins over the environment variable `env_name`.
LibrarySearch MakeSearch(std::optional<std::string_view> config_value, const char* env_name,
                         std::vector<std::string> candidates);

}  // namespace gpustack::support

#endif  // GPUSTACK_SUPPORT_VENDOR_LIBRARY_H_
