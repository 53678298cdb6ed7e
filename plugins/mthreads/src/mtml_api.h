// The subset of Moore Threads' MTML C API (libmtml.so, mtml_2.2.0.h) the plugin calls, declared
// from the vendor header's documented layouts. Handles are opaque; every call returns MtmlReturn.
#ifndef GPUSTACK_PLUGINS_MTHREADS_MTML_API_H_
#define GPUSTACK_PLUGINS_MTHREADS_MTML_API_H_

#include <gpustack_support/vendor_library.h>

#include <string>

namespace gpustack::mthreads::mtml {

using Return = int;  // MtmlReturn
inline constexpr Return kSuccess = 0;
inline constexpr Return kNotSupported = 4;

struct Library;  // MtmlLibrary
struct System;   // MtmlSystem
struct Device;   // MtmlDevice
struct Memory;   // MtmlMemory
struct Gpu;      // MtmlGpu

inline constexpr unsigned kUuidSize = 48;
inline constexpr unsigned kNameSize = 32;
inline constexpr unsigned kDriverVersionSize = 80;
inline constexpr unsigned kPathSize = 64;

struct PciInfo {  // MtmlPciInfo, 104 bytes
  char sbdf[32];
  unsigned segment;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  unsigned bus_width;  // deprecated
  float pci_max_speed;
  float pci_cur_speed;
  unsigned pci_max_width;
  unsigned pci_cur_width;
  unsigned pci_max_gen;
  unsigned pci_cur_gen;
  int rsvd[6];
};

struct Api {
  Return (*library_init)(Library**) = nullptr;
  Return (*library_shut_down)(Library*) = nullptr;
  Return (*library_count_device)(const Library*, unsigned*) = nullptr;
  Return (*library_init_device_by_index)(const Library*, unsigned, Device**) = nullptr;
  Return (*device_get_uuid)(const Device*, char*, unsigned) = nullptr;
  Return (*device_get_name)(const Device*, char*, unsigned) = nullptr;
  Return (*device_get_pci_info)(const Device*, PciInfo*) = nullptr;
  Return (*device_get_gpu_path)(const Device*, char*, unsigned) = nullptr;
  Return (*device_init_memory)(const Device*, Memory**) = nullptr;
  Return (*memory_get_total)(const Memory*, unsigned long long*) = nullptr;  // bytes
  // Optional.
  const char* (*error_string)(Return) = nullptr;
  Return (*library_init_system)(const Library*, System**) = nullptr;
  Return (*system_get_driver_version)(const System*, char*, unsigned) = nullptr;
  Return (*device_count_gpu_cores)(const Device*, unsigned*) = nullptr;
  Return (*device_get_power_usage)(const Device*, unsigned*) = nullptr;  // mW
  Return (*memory_get_used)(const Memory*, unsigned long long*) = nullptr;
  Return (*device_init_gpu)(const Device*, Gpu**) = nullptr;
  Return (*gpu_get_utilization)(const Gpu*, unsigned*) = nullptr;
  Return (*gpu_get_temperature)(const Gpu*, int*) = nullptr;
  Return (*device_get_mpc_mode)(const Device*, int*) = nullptr;
};

inline bool Resolve(const support::VendorLibrary& lib, Api* api, std::string* missing) {
  bool ok = true;
  auto get = [&](auto* slot, const char* name, bool required) {
    *slot = lib.Find<std::remove_reference_t<decltype(*slot)>>({name});
    if (*slot == nullptr && required) {
      if (missing->empty()) *missing = name;
      ok = false;
    }
  };
  get(&api->library_init, "mtmlLibraryInit", true);
  get(&api->library_shut_down, "mtmlLibraryShutDown", true);
  get(&api->library_count_device, "mtmlLibraryCountDevice", true);
  get(&api->library_init_device_by_index, "mtmlLibraryInitDeviceByIndex", true);
  get(&api->device_get_uuid, "mtmlDeviceGetUUID", true);
  get(&api->device_get_name, "mtmlDeviceGetName", true);
  get(&api->device_get_pci_info, "mtmlDeviceGetPciInfo", true);
  get(&api->device_get_gpu_path, "mtmlDeviceGetGpuPath", true);
  get(&api->device_init_memory, "mtmlDeviceInitMemory", true);
  get(&api->memory_get_total, "mtmlMemoryGetTotal", true);
  get(&api->error_string, "mtmlErrorString", false);
  get(&api->library_init_system, "mtmlLibraryInitSystem", false);
  get(&api->system_get_driver_version, "mtmlSystemGetDriverVersion", false);
  get(&api->device_count_gpu_cores, "mtmlDeviceCountGpuCores", false);
  get(&api->device_get_power_usage, "mtmlDeviceGetPowerUsage", false);
  get(&api->memory_get_used, "mtmlMemoryGetUsed", false);
  get(&api->device_init_gpu, "mtmlDeviceInitGpu", false);
  get(&api->gpu_get_utilization, "mtmlGpuGetUtilization", false);
  get(&api->gpu_get_temperature, "mtmlGpuGetTemperature", false);
  get(&api->device_get_mpc_mode, "mtmlDeviceGetMpcMode", false);
  return ok;
}

}  // namespace gpustack::mthreads::mtml

#endif  // GPUSTACK_PLUGINS_MTHREADS_MTML_API_H_
