// A fake MTML (libmtml.so): mtml* functions answering from the fixture's `mtml` section:
//   driver_version, errors (see fake_fixture.h),
//   devices: [{name, uuid, bus_id, node, memory_mib, used_mib, cores, util, temperature,
//              power_mw, mpc}]
// Handles point into the loaded state; it lives until the last mtmlLibraryShutDown.
#include <cstring>
#include <list>
#include <mutex>

#include "fake_fixture.h"
#include "mtml_api.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace mt = gpustack::mthreads::mtml;
using nlohmann::json;

struct gpustack::mthreads::mtml::Library {};
struct gpustack::mthreads::mtml::System {};
// One object per card serves as its Device, Memory and Gpu handle.
struct gpustack::mthreads::mtml::Device {
  json spec;
};
struct gpustack::mthreads::mtml::Memory {};
struct gpustack::mthreads::mtml::Gpu {};

namespace {

constexpr mt::Return kDriverNotLoaded = 1;
constexpr mt::Return kInvalidArgument = 3;

struct Card : mt::Device, mt::Memory, mt::Gpu {};

struct State {
  std::mutex mu;
  int init_count = 0;
  json section;
  fake::Injector injector;
  mt::Library library;
  mt::System system;
  std::list<Card> cards;
} g;

const json& Spec(const void* handle) { return static_cast<const mt::Device*>(handle)->spec; }

void Copy(const std::string& value, char* out, unsigned size) {
  if (size == 0) return;
  std::strncpy(out, value.c_str(), size - 1);
  out[size - 1] = '\0';
}

}  // namespace

#define GUARD(function)                           \
  std::lock_guard<std::mutex> lock(g.mu);         \
  if (g.init_count == 0) return kDriverNotLoaded; \
  if (mt::Return injected = g.injector.Check(function)) return injected

EXPORT mt::Return mtmlLibraryInit(mt::Library** library) {
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count == 0) {
    if (!fake::LoadSection("mtml", &g.section)) return kDriverNotLoaded;
    g.injector.Reset(g.section);
    if (mt::Return injected = g.injector.Check("LibraryInit")) return injected;
    g.cards.clear();
    for (const json& spec : g.section.value("devices", json::array())) {
      Card& card = g.cards.emplace_back();
      card.spec = spec;
    }
  }
  ++g.init_count;
  *library = &g.library;
  return mt::kSuccess;
}

EXPORT mt::Return mtmlLibraryShutDown(mt::Library*) {
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count == 0) return kDriverNotLoaded;
  --g.init_count;
  return mt::kSuccess;
}

EXPORT const char* mtmlErrorString(mt::Return r) {
  switch (r) {
    case 0:
      return "Success";
    case 1:
      return "Driver not loaded";
    case 3:
      return "Invalid argument";
    case 4:
      return "Not supported";
    default:
      return "Unknown error";
  }
}

EXPORT mt::Return mtmlLibraryInitSystem(const mt::Library*, mt::System** system) {
  GUARD("LibraryInitSystem");
  *system = &g.system;
  return mt::kSuccess;
}

EXPORT mt::Return mtmlSystemGetDriverVersion(const mt::System*, char* version, unsigned length) {
  GUARD("SystemGetDriverVersion");
  if (!g.section.contains("driver_version")) return mt::kNotSupported;
  Copy(g.section["driver_version"], version, length);
  return mt::kSuccess;
}

EXPORT mt::Return mtmlLibraryCountDevice(const mt::Library*, unsigned* count) {
  GUARD("LibraryCountDevice");
  *count = static_cast<unsigned>(g.cards.size());
  return mt::kSuccess;
}

EXPORT mt::Return mtmlLibraryInitDeviceByIndex(const mt::Library*, unsigned index,
                                               mt::Device** device) {
  GUARD("LibraryInitDeviceByIndex");
  if (index >= g.cards.size()) return kInvalidArgument;
  *device = &*std::next(g.cards.begin(), index);
  return mt::kSuccess;
}

EXPORT mt::Return mtmlDeviceGetUUID(const mt::Device* device, char* uuid, unsigned length) {
  GUARD("DeviceGetUUID");
  Copy(Spec(device).value("uuid", ""), uuid, length);
  return mt::kSuccess;
}

EXPORT mt::Return mtmlDeviceGetName(const mt::Device* device, char* name, unsigned length) {
  GUARD("DeviceGetName");
  Copy(Spec(device).value("name", ""), name, length);
  return mt::kSuccess;
}

EXPORT mt::Return mtmlDeviceGetPciInfo(const mt::Device* device, mt::PciInfo* pci) {
  GUARD("DeviceGetPciInfo");
  *pci = {};
  Copy("0000" + Spec(device).value("bus_id", ""), pci->sbdf, sizeof pci->sbdf);  // 8-digit domain
  return mt::kSuccess;
}

EXPORT mt::Return mtmlDeviceGetGpuPath(const mt::Device* device, char* path, unsigned length) {
  GUARD("DeviceGetGpuPath");
  if (!Spec(device).contains("node")) return mt::kNotSupported;
  Copy("/dev/mtgpu." + std::to_string(Spec(device)["node"].get<unsigned>()), path, length);
  return mt::kSuccess;
}

EXPORT mt::Return mtmlDeviceCountGpuCores(const mt::Device* device, unsigned* cores) {
  GUARD("DeviceCountGpuCores");
  if (!Spec(device).contains("cores")) return mt::kNotSupported;
  *cores = Spec(device)["cores"];
  return mt::kSuccess;
}

EXPORT mt::Return mtmlDeviceGetPowerUsage(const mt::Device* device, unsigned* milliwatts) {
  GUARD("DeviceGetPowerUsage");
  if (!Spec(device).contains("power_mw")) return mt::kNotSupported;
  *milliwatts = Spec(device)["power_mw"];
  return mt::kSuccess;
}

EXPORT mt::Return mtmlDeviceGetMpcMode(const mt::Device* device, int* mode) {
  GUARD("DeviceGetMpcMode");
  if (!Spec(device).contains("mpc")) return mt::kNotSupported;
  *mode = Spec(device)["mpc"];
  return mt::kSuccess;
}

EXPORT mt::Return mtmlDeviceInitMemory(const mt::Device* device, mt::Memory** memory) {
  GUARD("DeviceInitMemory");
  *memory = static_cast<Card*>(const_cast<mt::Device*>(device));
  return mt::kSuccess;
}

EXPORT mt::Return mtmlMemoryGetTotal(const mt::Memory* memory, unsigned long long* total) {
  GUARD("MemoryGetTotal");
  *total = static_cast<const Card*>(memory)->spec.value("memory_mib", 0ull) * 1024 * 1024;
  return mt::kSuccess;
}

EXPORT mt::Return mtmlMemoryGetUsed(const mt::Memory* memory, unsigned long long* used) {
  GUARD("MemoryGetUsed");
  *used = static_cast<const Card*>(memory)->spec.value("used_mib", 0ull) * 1024 * 1024;
  return mt::kSuccess;
}

EXPORT mt::Return mtmlDeviceInitGpu(const mt::Device* device, mt::Gpu** gpu) {
  GUARD("DeviceInitGpu");
  *gpu = static_cast<Card*>(const_cast<mt::Device*>(device));
  return mt::kSuccess;
}

EXPORT mt::Return mtmlGpuGetUtilization(const mt::Gpu* gpu, unsigned* utilization) {
  GUARD("GpuGetUtilization");
  const json& spec = static_cast<const Card*>(gpu)->spec;
  if (!spec.contains("util")) return mt::kNotSupported;
  *utilization = spec["util"];
  return mt::kSuccess;
}

EXPORT mt::Return mtmlGpuGetTemperature(const mt::Gpu* gpu, int* temperature) {
  GUARD("GpuGetTemperature");
  const json& spec = static_cast<const Card*>(gpu)->spec;
  if (!spec.contains("temperature")) return mt::kNotSupported;
  *temperature = spec["temperature"];
  return mt::kSuccess;
}
