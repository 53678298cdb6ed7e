// The subset of Cambricon's CNDev C API (libcndev.so, cndev.h) the plugin calls, declared from
// the vendor's published header. Versioned structs start with `int version`, which the caller
// sets (CNDEV_VERSION_5); the V2 structs have none.
#ifndef GPUSTACK_PLUGINS_CAMBRICON_CNDEV_API_H_
#define GPUSTACK_PLUGINS_CAMBRICON_CNDEV_API_H_

#include <gpustack/plugin_util.hpp>

#include <cstdint>
#include <string>

namespace gpustack::cambricon::cndev {

using Return = int;  // cndevRet_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kInsufficientSpace = 9;
inline constexpr Return kNotSupported = 10;
inline constexpr int kVersion = 5;  // CNDEV_VERSION_5

using Device = int32_t;  // cndevDevice_t

struct CardInfo {  // cndevCardInfo_t
  int version;
  unsigned number;
};

struct Uuid {  // cndevUUID_t, 56 bytes
  int version;
  uint8_t uuid[37];
  uint64_t ncs_uuid64;
};

struct PcieInfoV2 {  // cndevPCIeInfoV2_t, 64 bytes
  uint32_t subsystem_id;
  uint32_t device_id;
  uint16_t vendor;
  uint16_t subsystem_vendor;
  uint32_t domain;
  uint32_t bus;
  uint32_t device;
  uint32_t function;
  uint16_t module_id;
  uint16_t slot_id;
  uint32_t reserved[8];
};

struct MemoryInfoV2 {  // cndevMemoryInfoV2_t, MB
  int64_t physical_memory_total;
  int64_t physical_memory_used;
  int64_t reserved_memory;
  int64_t virtual_memory_total;
  int64_t virtual_memory_used;
  uint64_t global_memory;
  uint64_t reserved[16];
};

struct UtilizationInfo {  // cndevUtilizationInfo_t
  int version;
  int average_core_utilization;
  int core_utilization[80];
};

struct TemperatureInfo {  // cndevTemperatureInfo_t, °C
  int version;
  int board;
  int cluster[20];
  int memory_die[8];
  int chip;
  int air_inlet;
  int air_outlet;
  int memory;
  int video_input;
  int cpu;
  int isp;
};

struct DevicePowerInfo {  // cndevDevicePowerInfo_t, W
  int usage;
  int cap;
  int machine;
  int tdp;
  int max_power;
  int reserved[16];
};

struct ProcessInfo {  // cndevProcessInfo_t, KiB
  int version;
  unsigned pid;
  uint64_t physical_memory_used;
  uint64_t virtual_memory_used;
};

struct ProcessUtilization {  // cndevProcessUtilization_t, percent
  int version;
  unsigned pid;
  unsigned ipu_util;  // the MLU cores
  unsigned jpu_util;
  unsigned vpu_dec_util;
  unsigned vpu_enc_util;
  unsigned mem_util;
};

struct VersionInfo {  // cndevVersionInfo_t
  int version;
  unsigned mcu_major, mcu_minor, mcu_build;
  unsigned driver_major, driver_minor, driver_build;
};

struct CoreCount {  // cndevCardCoreCount_t
  int version;
  int count;
};

struct HealthState {  // cndevCardHealthState_t
  int version;
  int health;  // 1: good
  int device_state;
  int driver_state;
};

struct Api {
  Return (*init)(int) = nullptr;
  Return (*release)() = nullptr;
  Return (*get_device_count)(CardInfo*) = nullptr;
  Return (*get_uuid)(Uuid*, Device) = nullptr;
  Return (*get_pcie_info_v2)(PcieInfoV2*, Device) = nullptr;
  Return (*get_memory_usage_v2)(MemoryInfoV2*, Device) = nullptr;
  // Optional.
  const char* (*get_error_string)(Return) = nullptr;
  Return (*get_device_handle_by_index)(int, Device*) = nullptr;
  const char* (*get_card_name_string_by_dev_id)(Device) = nullptr;
  Return (*get_core_count)(CoreCount*, Device) = nullptr;
  Return (*get_version_info)(VersionInfo*, Device) = nullptr;
  Return (*get_card_health_state)(HealthState*, Device) = nullptr;
  Return (*get_device_utilization_info)(UtilizationInfo*, Device) = nullptr;
  Return (*get_temperature_info)(TemperatureInfo*, Device) = nullptr;
  Return (*get_device_power_info)(DevicePowerInfo*, Device) = nullptr;
  Return (*get_process_info)(unsigned*, ProcessInfo*, Device) = nullptr;
  Return (*get_process_utilization)(unsigned*, ProcessUtilization*, Device) = nullptr;
};

inline bool Resolve(const gpustack::sdk::VendorLibrary& lib, Api* api, std::string* missing) {
  gpustack::sdk::SymbolBinder bind(lib);
  bind.Required(&api->init, "cndevInit");
  bind.Required(&api->release, "cndevRelease");
  bind.Required(&api->get_device_count, "cndevGetDeviceCount");
  bind.Required(&api->get_uuid, "cndevGetUUID");
  bind.Required(&api->get_pcie_info_v2, "cndevGetPCIeInfoV2");
  bind.Required(&api->get_memory_usage_v2, "cndevGetMemoryUsageV2");
  bind.Optional(&api->get_error_string, "cndevGetErrorString");
  bind.Optional(&api->get_device_handle_by_index, "cndevGetDeviceHandleByIndex");
  bind.Optional(&api->get_card_name_string_by_dev_id, "cndevGetCardNameStringByDevId");
  bind.Optional(&api->get_core_count, "cndevGetCoreCount");
  bind.Optional(&api->get_version_info, "cndevGetVersionInfo");
  bind.Optional(&api->get_card_health_state, "cndevGetCardHealthState");
  bind.Optional(&api->get_device_utilization_info, "cndevGetDeviceUtilizationInfo");
  bind.Optional(&api->get_temperature_info, "cndevGetTemperatureInfo");
  bind.Optional(&api->get_device_power_info, "cndevGetDevicePowerInfo");
  bind.Optional(&api->get_process_info, "cndevGetProcessInfo");
  bind.Optional(&api->get_process_utilization, "cndevGetProcessUtilization");
  return bind.Finish(missing);
}

}  // namespace gpustack::cambricon::cndev

#endif  // GPUSTACK_PLUGINS_CAMBRICON_CNDEV_API_H_
