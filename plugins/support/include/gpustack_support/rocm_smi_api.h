// The subset of ROCm SMI's C API (librocm_smi64.so, rocm_smi.h) the AMD and Hygon plugins call,
// declared from AMD's public documentation. Hygon's hyhal ships the same API.
#ifndef GPUSTACK_SUPPORT_ROCM_SMI_API_H_
#define GPUSTACK_SUPPORT_ROCM_SMI_API_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include <gpustack/plugin_util.hpp>

namespace gpustack::support::rsmi {

using Status = int;  // rsmi_status_t
inline constexpr Status kSuccess = 0;
inline constexpr Status kNotSupported = 2;
inline constexpr Status kPermission = 4;
inline constexpr Status kNotFound = 10;
inline constexpr Status kInsufficientSize = 11;

inline constexpr uint32_t kMemTypeVram = 0;        // RSMI_MEM_TYPE_VRAM
inline constexpr uint32_t kTempTypeEdge = 0;       // RSMI_TEMP_TYPE_EDGE
inline constexpr uint32_t kTempCurrent = 0;        // RSMI_TEMP_CURRENT
inline constexpr uint32_t kSwComponentDriver = 0;  // RSMI_SW_COMP_DRIVER

struct ProcessInfo {  // rsmi_process_info_t
  uint32_t process_id;
  uint32_t pasid;
  uint64_t vram_usage;  // bytes
  uint64_t sdma_usage;
  uint32_t cu_occupancy;  // percent
};

struct Api {
  // Required.
  Status (*init)(uint64_t flags) = nullptr;
  Status (*shut_down)() = nullptr;
  Status (*status_string)(Status, const char**) = nullptr;
  Status (*num_monitor_devices)(uint32_t*) = nullptr;
  Status (*dev_name_get)(uint32_t, char*, size_t) = nullptr;
  Status (*dev_pci_id_get)(uint32_t, uint64_t*) = nullptr;
  Status (*dev_memory_total_get)(uint32_t, uint32_t, uint64_t*) = nullptr;
  // Optional.
  Status (*dev_unique_id_get)(uint32_t, uint64_t*) = nullptr;
  Status (*dev_memory_usage_get)(uint32_t, uint32_t, uint64_t*) = nullptr;
  Status (*dev_busy_percent_get)(uint32_t, uint32_t*) = nullptr;
  Status (*dev_temp_metric_get)(uint32_t, uint32_t, uint32_t, int64_t*) = nullptr;  // m°C
  Status (*dev_power_ave_get)(uint32_t, uint32_t, uint64_t*) = nullptr;             // µW
  Status (*version_str_get)(uint32_t, char*, uint32_t) = nullptr;
  Status (*compute_process_info_get)(ProcessInfo*, uint32_t*) = nullptr;
  Status (*compute_process_gpus_get)(uint32_t, uint32_t*, uint32_t*) = nullptr;
};

// Resolves every function; false names the first missing required one in `missing`.
bool Resolve(const sdk::VendorLibrary& library, Api* api, std::string* missing);

// rocm_smi's BDFID: domain << 32 | bus << 8 | device << 3 | function -> "0000:3b:00.0".
std::string BusIdFromBdfId(uint64_t bdfid);

}  // namespace gpustack::support::rsmi

#endif  // GPUSTACK_SUPPORT_ROCM_SMI_API_H_
