#include "host/pci/pci_inventory.h"

#include <algorithm>
#include <cctype>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <system_error>

#include "host/common/logging.h"

extern "C" {
#include <pci/pci.h>
}

namespace gpustack::pci {
namespace {

// libpci reports fatal errors through a noreturn hook whose default calls exit(1). Ours records
// the message and longjmps back to the scan, which then returns an error. Only C frames (libpci's)
// lie between setjmp and longjmp, so no C++ destructor is skipped.
struct ErrorTrap {
  std::jmp_buf jump;
  char message[512];
};
thread_local ErrorTrap* current_trap = nullptr;

[[noreturn]] void OnError(char* format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof message, format, args);
  va_end(args);
  if (current_trap == nullptr) {
    // Only reachable if libpci reports an error outside a scan: there is nowhere to return to.
    std::fprintf(stderr, "libpci fatal error outside a scan: %s\n", message);
    std::abort();
  }
  std::snprintf(current_trap->message, sizeof current_trap->message, "%s", message);
  std::longjmp(current_trap->jump, 1);
}

// Called from inside libpci's C frames: nothing may unwind out of it.
void OnWarning(char* format, ...) noexcept {
  char message[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof message, format, args);
  va_end(args);
  try {
    Logger("pci")->warn("libpci: {}", message);
  } catch (...) {
  }
}

void OnDebug(char*, ...) {}

bool KeepClass(uint32_t class_code, const std::vector<std::string>& prefixes) {
  if (prefixes.empty()) return true;
  char base[3];
  std::snprintf(base, sizeof base, "%02x", (class_code >> 16) & 0xff);
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& prefix) { return prefix == base; });
}

// Runs the libpci part of the scan in one function with no C++ objects alive across the
// setjmp, as longjmp requires. Fills `raw` with plain structs.
struct RawDevice {
  unsigned domain, bus, dev, func;
  uint16_t vendor, device, subsystem_vendor, subsystem_device;
  uint32_t class_code;
  int numa;
};

bool ScanRaw(const char* sysfs_pci, std::vector<RawDevice>* raw, ErrorTrap* trap) {
  struct pci_access* access = pci_alloc();
  access->method = PCI_ACCESS_SYS_BUS_PCI;  // never fall back to /proc or I/O ports
  access->error = OnError;
  access->warning = OnWarning;
  access->debug = OnDebug;
  current_trap = trap;
  if (setjmp(trap->jump) != 0) {
    pci_cleanup(access);
    current_trap = nullptr;
    return false;
  }
  pci_set_param(access, const_cast<char*>("sysfs.path"), const_cast<char*>(sysfs_pci));
  pci_init(access);
  pci_scan_bus(access);
  for (struct pci_dev* d = access->devices; d != nullptr; d = d->next) {
    pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS |
                         PCI_FILL_NUMA_NODE);
    RawDevice r{};
    r.domain = static_cast<unsigned>(d->domain);
    r.bus = d->bus;
    r.dev = d->dev;
    r.func = d->func;
    r.vendor = d->vendor_id;
    r.device = d->device_id;
    r.class_code = (static_cast<uint32_t>(d->device_class) << 8) | d->prog_if;
    r.subsystem_vendor = d->subsys_vendor_id;
    r.subsystem_device = d->subsys_id;
    r.numa = (d->known_fields & PCI_FILL_NUMA_NODE) != 0 ? d->numa_node : -1;
    raw->push_back(r);  // may throw bad_alloc: acceptable, nothing to unwind past but libpci
  }
  pci_cleanup(access);
  current_trap = nullptr;
  return true;
}

bool IsBusId(const std::string& name) {
  // dddd:bb:dd.f (libpci also accepts longer domains)
  const size_t first = name.find(':');
  if (first == std::string::npos || first < 4 || name.size() != first + 8) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool separator = i == first || i == first + 3 || i == first + 6;
    if (separator ? c != (i == first + 6 ? '.' : ':')
                  : !std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return name.back() >= '0' && name.back() <= '7';
}

// Finds what would make libpci call its fatal error hook, and says it in our words. libpci's hook
// can only escape by longjmp, which leaks the scan's open directory and buffers, so a tree that
// is known to be bad is refused before libpci sees it; the hook stays as the backstop for races.
std::optional<std::string> TreeProblem(const std::string& sysfs_pci) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path devices = fs::path(sysfs_pci) / "devices";
  if (!fs::is_directory(devices, ec)) return devices.string() + " is not a directory";
  fs::directory_iterator it(devices, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!IsBusId(name)) return "entry " + it->path().string() + " is not a PCI bus id";
    for (const char* file : {"vendor", "device", "class"}) {
      std::error_code file_ec;
      if (!fs::is_regular_file(it->path() / file, file_ec)) {
        return "device " + name + " has no readable " + file + " file";
      }
    }
  }
  if (ec) return devices.string() + ": " + ec.message();
  return std::nullopt;
}

}  // namespace

Result<std::vector<PciDevice>> Scan(const ScanOptions& options) {
  // struct pci_access is single-threaded and libpci keeps some global state: one scan at a time.
  static std::mutex mutex;
  std::lock_guard lock(mutex);

  const std::string sysfs_pci = options.sysfs_root + "/bus/pci";
  if (auto problem = TreeProblem(sysfs_pci)) {
    return Error{"PCI scan of " + sysfs_pci + " failed: " + *problem};
  }
  std::vector<RawDevice> raw;
  ErrorTrap trap{};
  if (!ScanRaw(sysfs_pci.c_str(), &raw, &trap)) {
    return Error{"PCI scan of " + sysfs_pci + " failed: " + trap.message};
  }

  std::vector<PciDevice> devices;
  for (const RawDevice& r : raw) {
    if (!KeepClass(r.class_code, options.class_prefixes)) continue;
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.%x", r.domain, r.bus, r.dev, r.func);
    devices.push_back(PciDevice{bus_id, r.vendor, r.device, r.class_code, r.subsystem_vendor,
                                r.subsystem_device, r.numa, sysfs_pci + "/devices/" + bus_id});
  }
  std::sort(devices.begin(), devices.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.bus_id < b.bus_id; });
  return devices;
}

Result<std::vector<std::string>> ParseClassPrefixes(const std::string& text) {
  std::vector<std::string> prefixes;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    std::transform(item.begin(), item.end(), item.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (item.size() != 2 || !std::isxdigit(static_cast<unsigned char>(item[0])) ||
        !std::isxdigit(static_cast<unsigned char>(item[1]))) {
      return Error{"PCI class prefix '" + item + "' in '" + text +
                   "' is not two hex digits (e.g. 03,12)"};
    }
    prefixes.push_back(item);
    start = end + 1;
  }
  return prefixes;
}

}  // namespace gpustack::pci
