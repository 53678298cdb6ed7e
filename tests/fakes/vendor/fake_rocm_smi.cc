// A fake ROCm SMI (librocm_smi64.so): rsmi_* functions answering from the fixture's `rocm_smi`
// section:
//   driver_version, errors (see fake_fixture.h),
//   devices: [{name, unique_id, bus_id, memory_mib, used_mib, busy, temperature_mc, power_uw}],
//   processes: [{pid, vram_mib, cu_occupancy, gpus: [device index]}] (node-wide; the
//   GPUSTACK_FAKE_PROCESSES file's "rocm_smi" key overrides them: see fake_fixture.h)
#include <gpustack_support/rocm_smi_api.h>

#include <cstring>
#include <mutex>

#include "fake_fixture.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace rs = gpustack::support::rsmi;
using nlohmann::json;

namespace {

constexpr rs::Status kInvalidArgs = 1;
constexpr rs::Status kInitError = 8;
constexpr rs::Status kNotFound = 10;

struct State {
  std::mutex mu;
  int init_count = 0;
  json section;
  fake::Injector injector;
} g;

const json* Device(uint32_t index) {
  const json& devices = g.section["devices"];
  return index < devices.size() ? &devices[index] : nullptr;
}

// Parses "0000:86:00.0" into rocm_smi's BDFID.
uint64_t BdfId(const std::string& bus) {
  unsigned domain = 0, b = 0, d = 0, f = 0;
  std::sscanf(bus.c_str(), "%x:%x:%x.%x", &domain, &b, &d, &f);
  return (uint64_t{domain} << 32) | (b << 8) | (d << 3) | f;
}

}  // namespace

#define GUARD(function)                     \
  std::lock_guard<std::mutex> lock(g.mu);   \
  if (g.init_count == 0) return kInitError; \
  if (rs::Status injected = g.injector.Check(function)) return injected

EXPORT rs::Status rsmi_init(uint64_t) {
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count == 0) {
    if (!fake::LoadSection("rocm_smi", &g.section)) return kInitError;
    if (!g.section.contains("devices")) g.section["devices"] = json::array();
    g.injector.Reset(g.section);
    if (rs::Status injected = g.injector.Check("init")) return injected;
  }
  ++g.init_count;
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_shut_down() {
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count == 0) return kInitError;
  --g.init_count;
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_status_string(rs::Status status, const char** text) {
  switch (status) {
    case 0:
      *text = "RSMI_STATUS_SUCCESS: The function has been executed successfully.";
      break;
    case 2:
      *text = "RSMI_STATUS_NOT_SUPPORTED: This function is not supported";
      break;
    case 8:
      *text = "RSMI_STATUS_INIT_ERROR: An error occurred during initialization";
      break;
    case 10:
      *text = "RSMI_STATUS_NOT_FOUND: An item was searched for but not found";
      break;
    default:
      *text = "RSMI_STATUS_UNKNOWN_ERROR: An unknown error occurred";
      break;
  }
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_num_monitor_devices(uint32_t* count) {
  GUARD("num_monitor_devices");
  *count = static_cast<uint32_t>(g.section["devices"].size());
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_dev_name_get(uint32_t index, char* name, size_t length) {
  GUARD("dev_name_get");
  const json* d = Device(index);
  if (d == nullptr || length == 0) return kInvalidArgs;
  std::strncpy(name, d->value("name", "").c_str(), length - 1);
  name[length - 1] = '\0';
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_dev_unique_id_get(uint32_t index, uint64_t* id) {
  GUARD("dev_unique_id_get");
  const json* d = Device(index);
  if (d == nullptr) return kInvalidArgs;
  if (!d->contains("unique_id")) return rs::kNotSupported;
  *id = (*d)["unique_id"];
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_dev_pci_id_get(uint32_t index, uint64_t* bdfid) {
  GUARD("dev_pci_id_get");
  const json* d = Device(index);
  if (d == nullptr) return kInvalidArgs;
  *bdfid = BdfId(d->value("bus_id", ""));
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_dev_memory_total_get(uint32_t index, uint32_t type, uint64_t* total) {
  GUARD("dev_memory_total_get");
  const json* d = Device(index);
  if (d == nullptr || type != rs::kMemTypeVram) return kInvalidArgs;
  *total = d->value("memory_mib", uint64_t{0}) * 1024 * 1024;
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_dev_memory_usage_get(uint32_t index, uint32_t type, uint64_t* used) {
  GUARD("dev_memory_usage_get");
  const json* d = Device(index);
  if (d == nullptr || type != rs::kMemTypeVram) return kInvalidArgs;
  if (!d->contains("used_mib")) return rs::kNotSupported;
  *used = (*d)["used_mib"].get<uint64_t>() * 1024 * 1024;
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_dev_busy_percent_get(uint32_t index, uint32_t* busy) {
  GUARD("dev_busy_percent_get");
  const json* d = Device(index);
  if (d == nullptr) return kInvalidArgs;
  if (!d->contains("busy")) return rs::kNotSupported;
  *busy = (*d)["busy"];
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_dev_temp_metric_get(uint32_t index, uint32_t sensor, uint32_t metric,
                                           int64_t* value) {
  GUARD("dev_temp_metric_get");
  const json* d = Device(index);
  if (d == nullptr) return kInvalidArgs;
  if (sensor != rs::kTempTypeEdge || metric != rs::kTempCurrent || !d->contains("temperature_mc")) {
    return rs::kNotSupported;
  }
  *value = (*d)["temperature_mc"];
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_dev_power_ave_get(uint32_t index, uint32_t, uint64_t* power) {
  GUARD("dev_power_ave_get");
  const json* d = Device(index);
  if (d == nullptr) return kInvalidArgs;
  if (!d->contains("power_uw")) return rs::kNotSupported;
  *power = (*d)["power_uw"];
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_version_str_get(uint32_t component, char* text, uint32_t length) {
  GUARD("version_str_get");
  if (component != rs::kSwComponentDriver || !g.section.contains("driver_version")) {
    return rs::kNotSupported;
  }
  std::strncpy(text, g.section["driver_version"].get<std::string>().c_str(), length - 1);
  text[length - 1] = '\0';
  return rs::kSuccess;
}

EXPORT rs::Status rsmi_compute_process_info_get(rs::ProcessInfo* procs, uint32_t* count) {
  GUARD("compute_process_info_get");
  const json processes = fake::ProcessRows("rocm_smi", g.section.value("processes", json::array()));
  if (procs == nullptr) {
    *count = static_cast<uint32_t>(processes.size());
    return rs::kSuccess;
  }
  const uint32_t n = std::min<uint32_t>(*count, static_cast<uint32_t>(processes.size()));
  for (uint32_t i = 0; i < n; ++i) {
    procs[i] = {processes[i].value("pid", 0u), 0,
                processes[i].value("vram_mib", uint64_t{0}) * 1024 * 1024, 0,
                processes[i].value("cu_occupancy", 0u)};
  }
  *count = n;
  return n < processes.size() ? rs::kInsufficientSize : rs::kSuccess;
}

EXPORT rs::Status rsmi_compute_process_gpus_get(uint32_t pid, uint32_t* indices, uint32_t* count) {
  GUARD("compute_process_gpus_get");
  for (const json& p : fake::ProcessRows("rocm_smi", g.section.value("processes", json::array()))) {
    if (p.value("pid", 0u) != pid) continue;
    const json gpus = p.value("gpus", json::array());
    if (*count < gpus.size()) return rs::kInsufficientSize;
    for (size_t i = 0; i < gpus.size(); ++i) indices[i] = gpus[i];
    *count = static_cast<uint32_t>(gpus.size());
    return rs::kSuccess;
  }
  return kNotFound;
}
