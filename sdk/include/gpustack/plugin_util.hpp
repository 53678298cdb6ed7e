// Optional header-only helpers for what most plugins do besides their hooks. NOT part of the ABI.
//
//  - LazyLibrary: open the vendor's management library on first use, from the node's
//    `library_path` setting (the host fills it from the node config or GPUSTACK_<NAME>_LIBRARY)
//    or the vendor's well-known paths, with the one rule for a missing library: nothing to do on
//    a node without the vendor's PCI devices, a clear UNAVAILABLE on a node with them.
//  - SymbolBinder: resolve the library's functions into a table, naming the first one missing.
//  - GroupBuilder: cards grouped by product in discovery order, reported only once all were read;
//    CardBook: the same, remembering each card so a card that later fails to read is reported
//    unhealthy instead of hiding the others.
//  - PCI helpers over the host's inventory: bus id spelling, topology (NUMA, CPU affinity, root
//    port) and DRM node numbers from sysfs.
//  - ReadFirstLine: a sysfs or /proc attribute through ReadSmallFile (gpustack/small_file.hpp),
//    which refuses anything but a regular file of bounded size.
#ifndef GPUSTACK_PLUGIN_UTIL_HPP_
#define GPUSTACK_PLUGIN_UTIL_HPP_

#include <dlfcn.h>

#include <gpustack/plugin.hpp>
#include <gpustack/small_file.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpustack::sdk {

// ---------------------------------------------------------------------------------------------
// Small files (ReadSmallFile is in gpustack/small_file.hpp)

// The first line of a small file, trailing whitespace removed; empty when unreadable.
inline std::string ReadFirstLine(const std::string& path) {
  std::string text = ReadSmallFile(path, 64 * 1024).value_or("");
  text = text.substr(0, text.find('\n'));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0) {
    text.pop_back();
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// The vendor's management library

// "<vendor text> (<code>)", or "error (<code>)" when the library has no text for it.
inline std::string ErrorText(const char* text, int code) {
  return std::string(text != nullptr ? text : "error") + " (" + std::to_string(code) + ")";
}

// A library opened with dlopen; stays mapped for the life of the process (RTLD_NODELETE: vendor
// libraries start threads and register exit handlers that must not lose their code).
class VendorLibrary {
 public:
  // Opens the first of `paths` that loads (absolute paths, or sonames through the dynamic
  // linker's search path); nullptr with every path and why it failed in `error` otherwise.
  // RTLD_LOCAL unless `global`: only a dependency another vendor library needs resolved is
  // opened global, so libraries that export NVML's names never leak them.
  static std::unique_ptr<VendorLibrary> Open(const std::vector<std::string>& paths, bool global,
                                             std::string* error) {
    std::string tried;
    for (const std::string& path : paths) {
      ::dlerror();
      void* handle =
          ::dlopen(path.c_str(), RTLD_NOW | RTLD_NODELETE | (global ? RTLD_GLOBAL : RTLD_LOCAL));
      if (handle != nullptr) {
        return std::unique_ptr<VendorLibrary>(new VendorLibrary(handle, path));
      }
      const char* why = ::dlerror();
      tried += (tried.empty() ? "" : "; ") + (why != nullptr ? std::string(why) : path);
      ::dlerror();  // glibc keeps the message until asked again: free it now, on this thread
    }
    if (error != nullptr) *error = paths.empty() ? "no library path to try" : tried;
    return nullptr;
  }
  ~VendorLibrary() { ::dlclose(handle_); }
  VendorLibrary(const VendorLibrary&) = delete;
  VendorLibrary& operator=(const VendorLibrary&) = delete;

  const std::string& path() const { return path_; }

  // The first of `names` the library exports, cast to `Fn`, or nullptr.
  template <class Fn>
  Fn Find(std::initializer_list<std::string_view> names) const {
    for (std::string_view name : names) {
      if (void* symbol = ::dlsym(handle_, std::string(name).c_str())) {
        return reinterpret_cast<Fn>(symbol);
      }
    }
    while (::dlerror() != nullptr) {
    }  // the lookup's message, freed now: an absent optional function is no error
    return nullptr;
  }

 private:
  VendorLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_{};
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
  // Fails when a required function was missing; `missing` then names the first.
  bool Finish(std::string* missing) const {
    if (!missing_.empty() && missing != nullptr) *missing = missing_;
    return missing_.empty();
  }

 private:
  const VendorLibrary& library_;
  std::string missing_{};
};

// True when the inventory holds a function of one of `vendor_ids`.
inline bool HasVendorDevice(std::span<const gpustack_pci_device* const> devices,
                            std::span<const uint16_t> vendor_ids) {
  for (const gpustack_pci_device* device : devices) {
    if (std::find(vendor_ids.begin(), vendor_ids.end(), device->vendor_id) != vendor_ids.end()) {
      return true;
    }
  }
  return false;
}

struct LibraryRequirements {
  std::vector<uint16_t> pci_vendor_ids{};  // a node without them needs no library
  std::vector<std::string> candidates{};   // the vendor's well-known paths and sonames
  std::vector<std::string> preload{};      // opened first, global, best effort
  std::string install_hint{};              // "install the NVIDIA driver"
};

// The vendor library, opened lazily: construct it in the plugin's constructor (which must not
// fail on a node without the vendor's devices) and call Bind() at the top of each hook. Bind is
// thread-safe (a health poll may run beside another hook).
class LazyLibrary {
 public:
  LazyLibrary(Host host, LibraryRequirements requirements)
      : host_(std::move(host)), requirements_(std::move(requirements)) {}

  // Opens the library (once) and fills `api` with `resolve(library, api, &missing)`. False when
  // the library is missing on a node without the vendor's devices: the hook has nothing to do.
  // Throws Error(UNAVAILABLE) saying what was tried and what to install when devices need it,
  // or naming the file and the function it lacks.
  template <class Api, class Resolve>
  bool Bind(Api* api, Resolve resolve) {
    std::lock_guard lock(mutex_);
    if (bound_) return true;
    const VendorLibrary* library = Open();
    if (library == nullptr) return false;
    std::string missing;
    if (!resolve(*library, api, &missing)) {
      const std::string path = library->path();
      library_.reset();
      throw Error(GPUSTACK_STATUS_UNAVAILABLE,
                  path + " lacks " + missing + ": the driver is too old or not this vendor's");
    }
    bound_ = true;
    return true;
  }

 private:
  const VendorLibrary* Open() {
    if (library_ != nullptr) return library_.get();
    for (const std::string& path : requirements_.preload) {
      std::string ignored;
      if (auto preloaded = VendorLibrary::Open({path}, true, &ignored)) {
        preloaded_ = std::move(preloaded);
        break;
      }
    }
    const std::optional<std::string_view> configured = host_.Config("library_path");
    const std::vector<std::string> paths = configured && !configured->empty()
                                               ? std::vector<std::string>{std::string(*configured)}
                                               : requirements_.candidates;
    std::string error;
    library_ = VendorLibrary::Open(paths, false, &error);
    if (library_ != nullptr) return library_.get();
    if (!HasVendorDevice(host_.PciDevices(), requirements_.pci_vendor_ids)) return nullptr;
    throw Error(GPUSTACK_STATUS_UNAVAILABLE,
                "management library not found (" + error + "); " + requirements_.install_hint +
                    (configured ? "" : ", or set the plugin's library_path"));
  }

  Host host_;  // a copy: the one the plugin was constructed with may be a temporary
  LibraryRequirements requirements_;
  std::mutex mutex_;
  std::unique_ptr<VendorLibrary> preloaded_;
  std::unique_ptr<VendorLibrary> library_;
  bool bound_ = false;
};

// ---------------------------------------------------------------------------------------------
// PCI identity and topology

// "00000000:3B:00.0", "0000:3b:00.0" or "3b:00.0" -> "0000:3b:00.0"; nullopt when malformed.
inline std::optional<std::string> NormalizeBusId(std::string_view text) {
  auto hex = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) != 0;
    });
  };
  const size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view function = text.substr(dot + 1);
  std::string_view head = text.substr(0, dot);
  const size_t c2 = head.rfind(':');
  if (c2 == std::string_view::npos) return std::nullopt;
  const std::string_view device = head.substr(c2 + 1);
  head = head.substr(0, c2);
  const size_t c1 = head.rfind(':');
  const std::string_view bus = c1 == std::string_view::npos ? head : head.substr(c1 + 1);
  std::string_view domain = c1 == std::string_view::npos ? "0" : head.substr(0, c1);
  if (!hex(domain) || !hex(bus) || !hex(device) || !hex(function)) return std::nullopt;
  while (domain.size() > 4 && domain.front() == '0') domain.remove_prefix(1);
  if (domain.size() > 4 || bus.size() > 2 || device.size() > 2 || function.size() != 1) {
    return std::nullopt;
  }
  auto pad = [](std::string_view s, size_t width) {
    std::string out(width - s.size(), '0');
    for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  return pad(domain, 4) + ":" + pad(bus, 2) + ":" + pad(device, 2) + "." + pad(function, 1);
}

// The host's PCI function with this (normalized) bus id, or nullptr.
inline const gpustack_pci_device* FindPci(std::span<const gpustack_pci_device* const> devices,
                                          std::string_view bus_id) {
  for (const gpustack_pci_device* device : devices) {
    if (View(device->bus_id) == bus_id) return device;
  }
  return nullptr;
}

// <sysfs_path>/local_cpulist ("0-23,48-71"); empty when absent.
inline std::string ReadCpuAffinity(const std::string& sysfs_path) {
  return ReadFirstLine(sysfs_path + "/local_cpulist");
}

// The root port above the device: the first bus id below the pciDDDD:BB host bridge in the
// resolved path ("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0" -> "0000:3a:00.0");
// empty when the path does not say, or the device sits on the root bus itself.
inline std::string ReadPciRootId(const std::string& sysfs_path) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::canonical(sysfs_path, ec);
  if (ec) return {};
  bool after_bridge = false;
  for (const auto& part : resolved) {
    const std::string name = part.string();
    if (after_bridge) {
      if (part == resolved.filename()) return {};
      return NormalizeBusId(name).value_or("");
    }
    after_bridge = name.rfind("pci", 0) == 0 && name.find(':') != std::string::npos;
  }
  return {};
}

struct DrmNodes {
  std::optional<uint32_t> card;    // /dev/dri/card<N>
  std::optional<uint32_t> render;  // /dev/dri/renderD<M>
};

// Reads <sysfs_path>/drm/: the numbers the device nodes use (never an enumeration index).
inline DrmNodes ReadDrmNodes(const std::string& sysfs_path) {
  auto suffix = [](std::string_view name, std::string_view prefix) -> std::optional<uint32_t> {
    if (name.substr(0, prefix.size()) != prefix || name.size() == prefix.size()) {
      return std::nullopt;
    }
    uint32_t value = 0;
    for (char c : name.substr(prefix.size())) {
      if (c < '0' || c > '9' || value > 100'000'000) return std::nullopt;
      value = value * 10 + static_cast<uint32_t>(c - '0');
    }
    return value;
  };
  DrmNodes nodes;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sysfs_path + "/drm", ec)) {
    const std::string name = entry.path().filename().string();
    if (auto card = suffix(name, "card")) nodes.card = card;
    if (auto render = suffix(name, "renderD")) nodes.render = render;
  }
  return nodes;
}

// Sets pci_bus_id and, when the host's inventory has the function, its class, NUMA node, CPU
// affinity and root port. Returns the inventory entry (nullptr when absent: logged, topology
// left unknown).
inline const gpustack_pci_device* FillTopology(const Host& host, const std::string& bus_id,
                                               Accelerator& card) {
  card.pci_bus_id = bus_id;
  const gpustack_pci_device* pci = FindPci(host.PciDevices(), bus_id);
  if (pci == nullptr) {
    host.Log(GPUSTACK_LOG_WARN,
             card.id + " at " + bus_id + " is not in the host's PCI inventory; topology unknown");
    return nullptr;
  }
  const std::string sysfs(View(pci->sysfs_path));
  card.pci_class = pci->class_code;
  card.numa_affinity = pci->numa_node;
  card.cpu_affinity = ReadCpuAffinity(sysfs);
  card.pci_root_id = ReadPciRootId(sysfs);
  return pci;
}

// ---------------------------------------------------------------------------------------------
// Discovery

// Cards grouped by product in the order they were found, each card's index its position among
// all cards. Report() sends the groups only at the end, so a failure halfway reports nothing and
// the host keeps its last good result.
class GroupBuilder {
 public:
  // Appends `card` to the group of `product`, made by `make` the first time the product is seen.
  void Add(const std::string& product, const std::function<AcceleratorGroup()>& make,
           Accelerator card) {
    auto group = std::find_if(groups_.begin(), groups_.end(),
                              [&](const AcceleratorGroup& g) { return g.product == product; });
    if (group == groups_.end()) {
      groups_.push_back(make());
      groups_.back().product = product;
      group = groups_.end() - 1;
    }
    card.index = next_index_++;
    group->accelerators.push_back(std::move(card));
  }
  uint32_t next_index() const { return next_index_; }
  void Report(DiscoverySink& sink) const {
    for (const AcceleratorGroup& g : groups_) sink.Add(g);
  }

 private:
  std::vector<AcceleratorGroup> groups_{};
  uint32_t next_index_ = 0;
};

// The cards a plugin found, by the vendor library's own index, as last read. A discovery pass
// records each index as found or unreadable; a card that cannot be read is reported unhealthy, as
// it was last read, so one bad card neither hides the others nor changes its identity. The book
// changes only when a pass reports: a pass that throws halfway leaves it as it was.
class CardBook {
 public:
  struct Card {
    std::string product;     // as the driver names it
    AcceleratorGroup group;  // the product's group fields (its product and cards are filled in)
    Accelerator card;        // id empty: never read
  };

  class Pass {
   public:
    explicit Pass(CardBook& book) : book_(book), cards_(book.cards_) {}
    void Found(size_t index, std::string product, AcceleratorGroup group, Accelerator card) {
      Slot(index) = {std::move(product), std::move(group), std::move(card)};
      seen_.push_back(index);
    }
    // The card at `index` answered with an error: reported unhealthy with `reason` when it was
    // read before; false (left out, nothing known to name it by) otherwise.
    bool Unreadable(size_t index, const std::string& reason) {
      if (index >= cards_.size() || cards_[index].card.id.empty()) return false;
      cards_[index].card.health = GPUSTACK_HEALTH_UNHEALTHY;
      cards_[index].card.health_reason = reason;
      seen_.push_back(index);
      return true;
    }
    // Reports the cards of this pass grouped by product (indexes in pass order) and keeps them.
    void Report(DiscoverySink& sink) {
      GroupBuilder groups;
      for (size_t index : seen_) {
        const Card& c = cards_[index];
        groups.Add(
            c.product, [&] { return c.group; }, c.card);
      }
      groups.Report(sink);
      book_.cards_ = std::move(cards_);
    }

   private:
    Card& Slot(size_t index) {
      if (index >= cards_.size()) cards_.resize(index + 1);
      return cards_[index];
    }
    CardBook& book_;
    std::vector<Card> cards_;
    std::vector<size_t> seen_;
  };

  Pass Begin() { return Pass(*this); }
  size_t size() const { return cards_.size(); }
  const Card& at(size_t index) const { return cards_.at(index); }
  // The library index of card `id`; Error(NOT_FOUND) when the plugin has no such card.
  size_t IndexOf(std::string_view id) const {
    for (size_t i = 0; i < cards_.size(); ++i) {
      if (!id.empty() && cards_[i].card.id == id) return i;
    }
    throw Error(GPUSTACK_STATUS_NOT_FOUND, "no accelerator " + std::string(id) + " on this node");
  }

 private:
  std::vector<Card> cards_{};
};

}  // namespace gpustack::sdk

#endif  // GPUSTACK_PLUGIN_UTIL_HPP_
