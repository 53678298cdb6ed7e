// A fake mxSml (libmxsml.so): mxSml* functions answering from the fixture's `mxsml` section:
//   driver_version, maca_version, errors (see fake_fixture.h),
//   devices: [{name, uuid, bus_id, mode, memory_mib, used_mib, xcore, temperature_centi,
//              power_ways_mw: [..], processes: [{pid, used_mib, other_gpu: {gpu_id, used_mib}}]}]
#include <algorithm>
#include <cstring>
#include <mutex>

#include "fake_fixture.h"
#include "mxsml_api.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace mx = gpustack::metax::mxsml;
using nlohmann::json;

namespace {

constexpr mx::Return kFailure = 1;
constexpr mx::Return kInvalidDeviceId = 6;

struct State {
  std::mutex mu;
  bool loaded = false;
  std::string fixture_text;  // the scenario loaded
  json section;
  fake::Injector injector;
} g;

const json* Device(unsigned id) {
  const json& devices = g.section["devices"];
  return id < devices.size() ? &devices[id] : nullptr;
}

void Copy(const std::string& value, char* out, size_t size) {
  std::strncpy(out, value.c_str(), size - 1);
  out[size - 1] = '\0';
}

}  // namespace

#define GUARD(function)                   \
  std::lock_guard<std::mutex> lock(g.mu); \
  if (!g.loaded) return kFailure;         \
  if (mx::Return injected = g.injector.Check(function)) return injected

// mxSml has no shutdown: initialization is once per process, as the real library's is.
EXPORT mx::Return mxSmlInit() {
  std::lock_guard<std::mutex> lock(g.mu);
  if (std::string text = fake::FixtureText(); !g.loaded || text != g.fixture_text) {
    g.loaded = false;
    g.fixture_text = std::move(text);
    if (!fake::LoadSection("mxsml", &g.section)) return kFailure;
    if (!g.section.contains("devices")) g.section["devices"] = json::array();
    g.injector.Reset(g.section);
    if (mx::Return injected = g.injector.Check("Init")) return injected;
    g.loaded = true;
  }
  return mx::kSuccess;
}

EXPORT const char* mxSmlGetErrorString(mx::Return r) {
  switch (r) {
    case 0:
      return "Success";
    case 1:
      return "Failure";
    case 3:
      return "Operation not supported";
    case 6:
      return "Invalid device id";
    default:
      return "Unknown error";
  }
}

EXPORT unsigned mxSmlGetDeviceCount() {
  std::lock_guard<std::mutex> lock(g.mu);
  return g.loaded ? static_cast<unsigned>(g.section["devices"].size()) : 0;
}

EXPORT mx::Return mxSmlGetDeviceInfo(unsigned id, mx::DeviceInfo* info) {
  GUARD("GetDeviceInfo");
  const json* d = Device(id);
  if (d == nullptr) return kInvalidDeviceId;
  *info = {};
  info->device_id = id;
  Copy(d->value("bus_id", ""), info->bdf_id, sizeof info->bdf_id);
  info->gpu_id = id;
  Copy(d->value("uuid", ""), info->uuid, sizeof info->uuid);
  info->brand = 2;  // C-class
  info->mode = d->value("mode", 0u);
  Copy(d->value("name", ""), info->device_name, sizeof info->device_name);
  return mx::kSuccess;
}

EXPORT mx::Return mxSmlGetMemoryInfo(unsigned id, mx::MemoryInfo* memory) {
  GUARD("GetMemoryInfo");
  const json* d = Device(id);
  if (d == nullptr) return kInvalidDeviceId;
  *memory = {};
  memory->vram_total = d->value("memory_mib", 0L) * 1024;
  memory->vram_use = d->value("used_mib", 0L) * 1024;
  memory->vis_vram_total = memory->vram_total;
  memory->vis_vram_use = memory->vram_use;
  return mx::kSuccess;
}

EXPORT mx::Return mxSmlGetDeviceIpUsage(unsigned id, unsigned ip, int* usage) {
  GUARD("GetDeviceIpUsage");
  const json* d = Device(id);
  if (d == nullptr) return kInvalidDeviceId;
  if (ip != mx::kUsageXcore || !d->contains("xcore")) return mx::kOperationNotSupport;
  *usage = (*d)["xcore"];
  return mx::kSuccess;
}

EXPORT mx::Return mxSmlGetTemperatureInfo(unsigned id, unsigned sensor, int* value) {
  GUARD("GetTemperatureInfo");
  const json* d = Device(id);
  if (d == nullptr) return kInvalidDeviceId;
  if (sensor != mx::kSensorHotspot || !d->contains("temperature_centi"))
    return mx::kOperationNotSupport;
  *value = (*d)["temperature_centi"];
  return mx::kSuccess;
}

EXPORT mx::Return mxSmlGetBoardPowerInfo(unsigned id, unsigned* size,
                                         mx::BoardWayElectricInfo* ways) {
  GUARD("GetBoardPowerInfo");
  const json* d = Device(id);
  if (d == nullptr) return kInvalidDeviceId;
  const json power = d->value("power_ways_mw", json::array());
  if (power.empty()) return mx::kOperationNotSupport;
  if (*size < power.size()) {
    *size = static_cast<unsigned>(power.size());
    return mx::kInsufficientSize;
  }
  *size = static_cast<unsigned>(power.size());
  for (size_t i = 0; i < power.size(); ++i) ways[i] = {12000, 0, power[i].get<unsigned>()};
  return mx::kSuccess;
}

EXPORT mx::Return mxSmlGetDeviceVersion(unsigned id, unsigned unit, char* text, unsigned* size) {
  GUARD("GetDeviceVersion");
  if (Device(id) == nullptr) return kInvalidDeviceId;
  if (unit != mx::kVersionDriver || !g.section.contains("driver_version"))
    return mx::kOperationNotSupport;
  const std::string version = g.section["driver_version"];
  if (*size <= version.size()) {
    *size = static_cast<unsigned>(version.size() + 1);
    return mx::kInsufficientSize;
  }
  Copy(version, text, *size);
  return mx::kSuccess;
}

EXPORT mx::Return mxSmlGetMacaVersion(char* text, unsigned* size) {
  GUARD("GetMacaVersion");
  if (!g.section.contains("maca_version")) return mx::kOperationNotSupport;
  Copy(g.section["maca_version"], text, *size);
  return mx::kSuccess;
}

EXPORT mx::Return mxSmlGetSingleGpuProcess(unsigned id, unsigned* count, mx::ProcessInfo* infos) {
  GUARD("GetSingleGpuProcess");
  const json* d = Device(id);
  if (d == nullptr) return kInvalidDeviceId;
  const json processes = d->value("processes", json::array());
  const unsigned n = std::min<unsigned>(*count, static_cast<unsigned>(processes.size()));
  for (unsigned i = 0; i < n; ++i) {
    infos[i] = {};
    infos[i].process_id = processes[i].value("pid", 0u);
    infos[i].gpu_number = 1;
    Copy(d->value("bus_id", ""), infos[i].gpus[0].bdf_id, sizeof infos[i].gpus[0].bdf_id);
    infos[i].gpus[0].gpu_id = id;
    infos[i].gpus[0].gpu_memory_usage = processes[i].value("used_mib", 0UL) * 1024 * 1024;
    // A process using another GPU too lists it as well, as mxSml does.
    if (processes[i].contains("other_gpu")) {
      const json& other = processes[i]["other_gpu"];
      infos[i].gpu_number = 2;
      infos[i].gpus[1].gpu_id = other.value("gpu_id", 0u);
      infos[i].gpus[1].gpu_memory_usage = other.value("used_mib", 0UL) * 1024 * 1024;
    }
  }
  *count = static_cast<unsigned>(processes.size());
  return mx::kSuccess;
}
