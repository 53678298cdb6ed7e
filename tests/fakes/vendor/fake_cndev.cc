// A fake CNDev (libcndev.so): cndev* functions answering from the fixture's `cndev` section:
//   driver_version: [major, minor, build], errors (see fake_fixture.h),
//   devices: [{name, uuid, bus_id, memory_mib, used_mib, cores, util, temperature, power_w,
//              healthy, processes: [{pid, used_kib, ipu_util}]}]
// Versioned structs are checked: an unstamped one is refused, as the real library does.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "cndev_api.h"
#include "fake_fixture.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace cn = gpustack::cambricon::cndev;
using nlohmann::json;

namespace {

constexpr cn::Return kNoDriver = 1;
constexpr cn::Return kUnsupportedApiVersion = 3;
constexpr cn::Return kUninitialized = 4;
constexpr cn::Return kInvalidDeviceId = 6;

struct State {
  std::mutex mu;
  int init_count = 0;
  json section;
  fake::Injector injector;
} g;

const json* Device(cn::Device device) {
  const json& devices = g.section["devices"];
  return device >= 0 && static_cast<size_t>(device) < devices.size() ? &devices[device] : nullptr;
}

}  // namespace

#define GUARD(function)                         \
  std::lock_guard<std::mutex> lock(g.mu);       \
  if (g.init_count == 0) return kUninitialized; \
  if (cn::Return injected = g.injector.Check(function)) return injected

#define DEVICE(handle)            \
  const json* d = Device(handle); \
  if (d == nullptr) return kInvalidDeviceId

#define VERSIONED(s) \
  if ((s)->version < cn::kVersion) return kUnsupportedApiVersion

EXPORT cn::Return cndevInit(int) {
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count == 0) {
    if (!fake::LoadSection("cndev", &g.section)) return kNoDriver;
    if (!g.section.contains("devices")) g.section["devices"] = json::array();
    g.injector.Reset(g.section);
    if (cn::Return injected = g.injector.Check("Init")) return injected;
  }
  ++g.init_count;
  return cn::kSuccess;
}

EXPORT cn::Return cndevRelease() {
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count == 0) return kUninitialized;
  --g.init_count;
  return cn::kSuccess;
}

EXPORT const char* cndevGetErrorString(cn::Return r) {
  switch (r) {
    case 0:
      return "success";
    case 3:
      return "unsupported api version";
    case 4:
      return "uninitialized";
    case 6:
      return "invalid device id";
    case 10:
      return "not supported";
    default:
      return "unknown error";
  }
}

EXPORT cn::Return cndevGetDeviceCount(cn::CardInfo* info) {
  GUARD("GetDeviceCount");
  VERSIONED(info);
  info->number = static_cast<unsigned>(g.section["devices"].size());
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetDeviceHandleByIndex(int index, cn::Device* device) {
  GUARD("GetDeviceHandleByIndex");
  if (Device(index) == nullptr) return kInvalidDeviceId;
  *device = index;
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetUUID(cn::Uuid* uuid, cn::Device device) {
  GUARD("GetUUID");
  DEVICE(device);
  VERSIONED(uuid);
  std::memset(uuid->uuid, 0, sizeof uuid->uuid);
  const std::string text = d->value("uuid", "");
  std::memcpy(uuid->uuid, text.data(), std::min(text.size(), sizeof uuid->uuid - 1));
  return cn::kSuccess;
}

EXPORT const char* cndevGetCardNameStringByDevId(cn::Device device) {
  std::lock_guard<std::mutex> lock(g.mu);
  static thread_local std::string name;
  const json* d = Device(device);
  name = d != nullptr ? d->value("name", "Unknown") : "Unknown";
  return name.c_str();
}

EXPORT cn::Return cndevGetPCIeInfoV2(cn::PcieInfoV2* pcie, cn::Device device) {
  GUARD("GetPCIeInfoV2");
  DEVICE(device);
  *pcie = {};
  std::sscanf(d->value("bus_id", "").c_str(), "%x:%x:%x.%x", &pcie->domain, &pcie->bus,
              &pcie->device, &pcie->function);
  pcie->vendor = 0xcabc;
  pcie->slot_id = 0xFFFF;
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetMemoryUsageV2(cn::MemoryInfoV2* memory, cn::Device device) {
  GUARD("GetMemoryUsageV2");
  DEVICE(device);
  *memory = {};
  memory->physical_memory_total = d->value("memory_mib", int64_t{0});
  memory->physical_memory_used = d->value("used_mib", int64_t{0});
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetCoreCount(cn::CoreCount* cores, cn::Device device) {
  GUARD("GetCoreCount");
  DEVICE(device);
  VERSIONED(cores);
  if (!d->contains("cores")) return cn::kNotSupported;
  cores->count = (*d)["cores"];
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetVersionInfo(cn::VersionInfo* version, cn::Device device) {
  GUARD("GetVersionInfo");
  DEVICE(device);
  VERSIONED(version);
  if (!g.section.contains("driver_version")) return cn::kNotSupported;
  const json& v = g.section["driver_version"];
  version->driver_major = v[0];
  version->driver_minor = v[1];
  version->driver_build = v[2];
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetCardHealthState(cn::HealthState* state, cn::Device device) {
  GUARD("GetCardHealthState");
  DEVICE(device);
  VERSIONED(state);
  state->health = d->value("healthy", true) ? 1 : 0;
  state->device_state = state->health;
  state->driver_state = 4;  // RUNNING
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetDeviceUtilizationInfo(cn::UtilizationInfo* util, cn::Device device) {
  GUARD("GetDeviceUtilizationInfo");
  DEVICE(device);
  VERSIONED(util);
  if (!d->contains("util")) return cn::kNotSupported;
  util->average_core_utilization = (*d)["util"];
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetTemperatureInfo(cn::TemperatureInfo* temperature, cn::Device device) {
  GUARD("GetTemperatureInfo");
  DEVICE(device);
  VERSIONED(temperature);
  if (!d->contains("temperature")) return cn::kNotSupported;
  temperature->chip = (*d)["temperature"];
  temperature->board = temperature->chip - 5;
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetDevicePowerInfo(cn::DevicePowerInfo* power, cn::Device device) {
  GUARD("GetDevicePowerInfo");
  DEVICE(device);
  if (!d->contains("power_w")) return cn::kNotSupported;
  *power = {};
  power->usage = (*d)["power_w"];
  return cn::kSuccess;
}

EXPORT cn::Return cndevGetProcessInfo(unsigned* count, cn::ProcessInfo* infos, cn::Device device) {
  GUARD("GetProcessInfo");
  DEVICE(device);
  const json processes = d->value("processes", json::array());
  if (*count < processes.size()) {
    *count = static_cast<unsigned>(processes.size());
    return cn::kInsufficientSpace;
  }
  for (size_t i = 0; i < processes.size(); ++i) {
    VERSIONED(&infos[i]);
    infos[i].pid = processes[i].value("pid", 0u);
    infos[i].physical_memory_used = processes[i].value("used_kib", uint64_t{0});
    infos[i].virtual_memory_used = infos[i].physical_memory_used;
  }
  *count = static_cast<unsigned>(processes.size());
  return cn::kSuccess;
}

// A process's `ipu_util` when the fixture gives one; a device whose processes give none answers
// NOT_SUPPORTED, as a driver without per-process accounting does.
EXPORT cn::Return cndevGetProcessUtilization(unsigned* count, cn::ProcessUtilization* rows,
                                             cn::Device device) {
  GUARD("GetProcessUtilization");
  DEVICE(device);
  const json processes = d->value("processes", json::array());
  if (std::none_of(processes.begin(), processes.end(),
                   [](const json& p) { return p.contains("ipu_util"); }) &&
      !processes.empty())
    return cn::kNotSupported;
  if (*count < processes.size()) {
    *count = static_cast<unsigned>(processes.size());
    return cn::kInsufficientSpace;
  }
  for (size_t i = 0; i < processes.size(); ++i) {
    VERSIONED(&rows[i]);
    rows[i].pid = processes[i].value("pid", 0u);
    rows[i].ipu_util = processes[i].value("ipu_util", 0u);
    rows[i].jpu_util = rows[i].vpu_dec_util = rows[i].vpu_enc_util = 0;
    rows[i].mem_util = 0;
  }
  *count = static_cast<unsigned>(processes.size());
  return cn::kSuccess;
}
