// The subset of NVML's C API the plugins call, declared from NVIDIA's public documentation of
// nvml.h. Three libraries speak it: NVIDIA's libnvidia-ml.so.1 (`nvml` prefix), Iluvatar's
// libixml.so (the same `nvml` names) and T-Head's libhgml.so (`hgml` prefix, names without the
// `_v2` suffixes). Symbols are resolved one by one from the library a plugin opened, never linked,
// so a name two vendors share cannot bind to the wrong library.
#ifndef GPUSTACK_SUPPORT_NVML_API_H_
#define GPUSTACK_SUPPORT_NVML_API_H_

#include <string>
#include <string_view>

#include <gpustack/plugin_util.hpp>

namespace gpustack::support::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorInUse = 19;
inline constexpr Return kErrorInsufficientResources = 23;

struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t
struct GpuInstanceOpaque;
using GpuInstance = GpuInstanceOpaque*;  // nvmlGpuInstance_t
struct ComputeInstanceOpaque;
using ComputeInstance = ComputeInstanceOpaque*;  // nvmlComputeInstance_t
struct EventSetOpaque;
using EventSet = EventSetOpaque*;  // nvmlEventSet_t

inline constexpr unsigned long long kEventTypeXidCriticalError =
    0x8;  // nvmlEventTypeXidCriticalError

struct EventData {  // nvmlEventData_t
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID for an XID event
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

struct PciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

struct Memory {  // nvmlMemory_t, bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct MemoryV2 {        // nvmlMemory_v2_t: `total` is the physical size, reserved memory included
  unsigned int version;  // sizeof | 2 << 24
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
inline constexpr unsigned int kMemoryV2Version =
    static_cast<unsigned int>(sizeof(MemoryV2)) | (2u << 24);

struct Utilization {  // nvmlUtilization_t, percent
  unsigned int gpu;
  unsigned int memory;
};

struct ProcessInfo {  // nvmlProcessInfo_t (v2 layout, used by the _v3 query)
  unsigned int pid;
  unsigned long long used_gpu_memory;  // bytes
  unsigned int gpu_instance_id;        // 0xFFFFFFFF without MIG
  unsigned int compute_instance_id;
};

struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long timestamp;
  unsigned int sm_util;
  unsigned int mem_util;
  unsigned int enc_util;
  unsigned int dec_util;
};

struct GpuInstancePlacement {  // nvmlGpuInstancePlacement_t, memory slices
  unsigned int start;
  unsigned int size;
};

struct GpuInstanceProfileInfo {  // nvmlGpuInstanceProfileInfo_t
  unsigned int id;               // the creation id, not the enum index
  unsigned int is_p2p_supported;
  unsigned int slice_count;
  unsigned int instance_count;
  unsigned int multiprocessor_count;
  unsigned int copy_engine_count;
  unsigned int decoder_count;
  unsigned int encoder_count;
  unsigned int jpeg_count;
  unsigned int ofa_count;
  unsigned long long memory_size_mb;
};

struct GpuInstanceProfileInfoV2 {  // nvmlGpuInstanceProfileInfo_v2_t: adds the profile's name
  unsigned int version;            // sizeof | 2 << 24
  unsigned int id;
  unsigned int is_p2p_supported;
  unsigned int slice_count;
  unsigned int instance_count;
  unsigned int multiprocessor_count;
  unsigned int copy_engine_count;
  unsigned int decoder_count;
  unsigned int encoder_count;
  unsigned int jpeg_count;
  unsigned int ofa_count;
  unsigned long long memory_size_mb;
  char name[96];
};
inline constexpr unsigned int kGpuInstanceProfileInfoV2Version =
    static_cast<unsigned int>(sizeof(GpuInstanceProfileInfoV2)) | (2u << 24);

struct GpuInstanceInfo {  // nvmlGpuInstanceInfo_t
  Device device;
  unsigned int id;
  unsigned int profile_id;
  GpuInstancePlacement placement;
};

struct ComputeInstanceProfileInfo {  // nvmlComputeInstanceProfileInfo_t
  unsigned int id;
  unsigned int slice_count;
  unsigned int instance_count;
  unsigned int multiprocessor_count;
  unsigned int shared_copy_engine_count;
  unsigned int shared_decoder_count;
  unsigned int shared_encoder_count;
  unsigned int shared_jpeg_count;
  unsigned int shared_ofa_count;
};

inline constexpr unsigned int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
inline constexpr unsigned int kMigEnable = 1;       // NVML_DEVICE_MIG_ENABLE
inline constexpr unsigned int kComputeEngineShared =
    0;  // NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
inline constexpr unsigned int kNoInstance = 0xFFFFFFFFu;
// NVML_COMPUTE_INSTANCE_PROFILE_COUNT: 1,2,3,4,7,8,6-slice, then the 1- and 2-slice REV1.
inline constexpr unsigned int kComputeInstanceProfileCount = 9;

// One resolved function table. Required functions are checked by Resolve; optional ones may be
// null and their figures are then reported as not measured.
struct Api {
  // Required: without them no device can be named.
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*device_get_count)(unsigned int*) = nullptr;
  Return (*device_get_handle_by_index)(unsigned int, Device*) = nullptr;
  Return (*device_get_name)(Device, char*, unsigned int) = nullptr;
  Return (*device_get_uuid)(Device, char*, unsigned int) = nullptr;
  Return (*device_get_pci_info)(Device, PciInfo*) = nullptr;
  Return (*device_get_minor_number)(Device, unsigned int*) = nullptr;
  Return (*device_get_memory_info)(Device, Memory*) = nullptr;
  // Optional.
  Return (*device_get_memory_info_v2)(Device, MemoryV2*) = nullptr;
  Return (*system_get_driver_version)(char*, unsigned int) = nullptr;
  Return (*system_get_cuda_driver_version)(int*) = nullptr;
  Return (*device_get_cuda_compute_capability)(Device, int*, int*) = nullptr;
  Return (*device_get_num_gpu_cores)(Device, unsigned int*) = nullptr;
  Return (*device_get_architecture)(Device, unsigned int*) = nullptr;
  Return (*device_get_utilization_rates)(Device, Utilization*) = nullptr;
  Return (*device_get_temperature)(Device, unsigned int, unsigned int*) = nullptr;
  Return (*device_get_power_usage)(Device, unsigned int*) = nullptr;  // milliwatts
  Return (*device_get_compute_running_processes)(Device, unsigned int*, ProcessInfo*) = nullptr;
  Return (*device_get_process_utilization)(Device, ProcessUtilizationSample*, unsigned int*,
                                           unsigned long long) = nullptr;
  // MIG (optional as a set: partitioning is offered only when every one resolved).
  Return (*device_get_mig_mode)(Device, unsigned int*, unsigned int*) = nullptr;
  Return (*device_get_gpu_instance_profile_info)(Device, unsigned int,
                                                 GpuInstanceProfileInfo*) = nullptr;
  Return (*device_get_gpu_instance_profile_info_v)(Device, unsigned int,
                                                   GpuInstanceProfileInfoV2*) = nullptr;
  Return (*device_get_gpu_instance_possible_placements)(Device, unsigned int, GpuInstancePlacement*,
                                                        unsigned int*) = nullptr;
  Return (*device_create_gpu_instance_with_placement)(Device, unsigned int,
                                                      const GpuInstancePlacement*,
                                                      GpuInstance*) = nullptr;
  Return (*device_get_gpu_instances)(Device, unsigned int, GpuInstance*, unsigned int*) = nullptr;
  Return (*gpu_instance_get_info)(GpuInstance, GpuInstanceInfo*) = nullptr;
  Return (*gpu_instance_destroy)(GpuInstance) = nullptr;
  Return (*gpu_instance_get_compute_instance_profile_info)(GpuInstance, unsigned int, unsigned int,
                                                           ComputeInstanceProfileInfo*) = nullptr;
  Return (*gpu_instance_create_compute_instance)(GpuInstance, unsigned int,
                                                 ComputeInstance*) = nullptr;
  Return (*gpu_instance_get_compute_instances)(GpuInstance, unsigned int, ComputeInstance*,
                                               unsigned int*) = nullptr;
  Return (*compute_instance_destroy)(ComputeInstance) = nullptr;
  Return (*device_get_max_mig_device_count)(Device, unsigned int*) = nullptr;
  Return (*device_get_mig_device_handle_by_index)(Device, unsigned int, Device*) = nullptr;
  Return (*device_get_gpu_instance_id)(Device, unsigned int*) = nullptr;
  // Driver events (XID errors): optional, NVML only.
  Return (*event_set_create)(EventSet*) = nullptr;
  Return (*device_register_events)(Device, unsigned long long, EventSet) = nullptr;
  Return (*event_set_wait)(EventSet, EventData*, unsigned int) = nullptr;  // timeout in ms
  Return (*event_set_free)(EventSet) = nullptr;

  bool has_mig() const;
  bool has_events() const;
};

// Resolves every function under `prefix` ("nvml", "hgml"), preferring the newest versioned name.
// Returns false and names the first missing required function in `missing`.
bool Resolve(const sdk::VendorLibrary& library, std::string_view prefix, Api* api,
             std::string* missing);

}  // namespace gpustack::support::nvml

#endif  // GPUSTACK_SUPPORT_NVML_API_H_
