// The subset of Moore Threads' MTML C API (libmtml.so, mtml_2.2.0.h) the plugin calls, declared
// from the vendor header's documented layouts. Handles are opaque; every call returns MtmlReturn.
#ifndef GPUSTACK_PLUGINS_MTHREADS_MTML_API_H_
#define GPUSTACK_PLUGINS_MTHREADS_MTML_API_H_

#include <gpustack/plugin_util.hpp>

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

inline bool Resolve(const gpustack::sdk::VendorLibrary& lib, Api* api, std::string* missing) {
  gpustack::sdk::SymbolBinder bind(lib);
  bind.Required(&api->library_init, "mtmlLibraryInit");
  bind.Required(&api->library_shut_down, "mtmlLibraryShutDown");
  bind.Required(&api->library_count_device, "mtmlLibraryCountDevice");
  bind.Required(&api->library_init_device_by_index, "mtmlLibraryInitDeviceByIndex");
  bind.Required(&api->device_get_uuid, "mtmlDeviceGetUUID");
  bind.Required(&api->device_get_name, "mtmlDeviceGetName");
  bind.Required(&api->device_get_pci_info, "mtmlDeviceGetPciInfo");
  bind.Required(&api->device_get_gpu_path, "mtmlDeviceGetGpuPath");
  bind.Required(&api->device_init_memory, "mtmlDeviceInitMemory");
  bind.Required(&api->memory_get_total, "mtmlMemoryGetTotal");
  bind.Optional(&api->error_string, "mtmlErrorString");
  bind.Optional(&api->library_init_system, "mtmlLibraryInitSystem");
  bind.Optional(&api->system_get_driver_version, "mtmlSystemGetDriverVersion");
  bind.Optional(&api->device_count_gpu_cores, "mtmlDeviceCountGpuCores");
  bind.Optional(&api->device_get_power_usage, "mtmlDeviceGetPowerUsage");
  bind.Optional(&api->memory_get_used, "mtmlMemoryGetUsed");
  bind.Optional(&api->device_init_gpu, "mtmlDeviceInitGpu");
  bind.Optional(&api->gpu_get_utilization, "mtmlGpuGetUtilization");
  bind.Optional(&api->gpu_get_temperature, "mtmlGpuGetTemperature");
  bind.Optional(&api->device_get_mpc_mode, "mtmlDeviceGetMpcMode");
  return bind.Finish(missing);
}

}  // namespace gpustack::mthreads::mtml

#endif  // GPUSTACK_PLUGINS_MTHREADS_MTML_API_H_
