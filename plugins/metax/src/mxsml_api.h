// The subset of MetaX's mxSml C API (libmxsml.so, MxSml.h 2.3.1) the plugin calls, declared from
// the vendor header's documented layouts. Resolved one symbol at a time from the opened library.
#ifndef GPUSTACK_PLUGINS_METAX_MXSML_API_H_
#define GPUSTACK_PLUGINS_METAX_MXSML_API_H_

#include <gpustack/plugin_util.hpp>

#include <string>

namespace gpustack::metax::mxsml {

using Return = unsigned int;  // mxSmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kOperationNotSupport = 3;
inline constexpr Return kInsufficientSize = 10;

inline constexpr unsigned kModePf = 1;         // SR-IOV physical function (host side)
inline constexpr unsigned kUsageXcore = 4;     // mxSmlUsageIp_t Xcore
inline constexpr unsigned kSensorHotspot = 0;  // mxSmlTemperatureSensors_t, hundredths of °C
inline constexpr unsigned kVersionDriver = 1;  // mxSmlVersionUnit_t

struct DeviceInfo {  // mxSmlDeviceInfo_t, 184 bytes
  unsigned device_id;
  unsigned type;  // deprecated
  char bdf_id[32];
  unsigned gpu_id;
  unsigned node_id;
  char uuid[96];
  unsigned brand;
  unsigned mode;  // 0 bare metal, 1 PF, 2 VF
  char device_name[32];
};

struct MemoryInfo {  // mxSmlMemoryInfo_t, KB
  long vis_vram_total;
  long vis_vram_use;
  long vram_total;
  long vram_use;
  long xtt_total;
  long xtt_use;
};

struct BoardWayElectricInfo {  // mxSmlBoardWayElectricInfo_t
  unsigned voltage_mv;
  unsigned current_ma;
  unsigned power_mw;
};

struct ProcessGpuInfo {  // mxSmlProcessGpuInfo_t
  char bdf_id[32];
  unsigned gpu_id;
  unsigned long gpu_memory_usage;  // bytes
};
struct ProcessInfo {  // mxSmlProcessInfo_t
  unsigned process_id;
  char process_name[64];
  unsigned gpu_number;
  ProcessGpuInfo gpus[64];
};

struct Api {
  Return (*init)() = nullptr;
  unsigned (*get_device_count)() = nullptr;
  Return (*get_device_info)(unsigned, DeviceInfo*) = nullptr;
  Return (*get_memory_info)(unsigned, MemoryInfo*) = nullptr;
  // Optional.
  Return (*shutdown)() = nullptr;  // absent in 2.3.1
  const char* (*get_error_string)(Return) = nullptr;
  Return (*get_device_ip_usage)(unsigned, unsigned, int*) = nullptr;
  Return (*get_temperature_info)(unsigned, unsigned, int*) = nullptr;
  Return (*get_board_power_info)(unsigned, unsigned*, BoardWayElectricInfo*) = nullptr;
  Return (*get_device_version)(unsigned, unsigned, char*, unsigned*) = nullptr;
  Return (*get_maca_version)(char*, unsigned*) = nullptr;
  Return (*get_single_gpu_process)(unsigned, unsigned*, ProcessInfo*) = nullptr;
};

inline bool Resolve(const gpustack::sdk::VendorLibrary& lib, Api* api, std::string* missing) {
  gpustack::sdk::SymbolBinder bind(lib);
  bind.Required(&api->init, "mxSmlInit");
  bind.Required(&api->get_device_count, "mxSmlGetDeviceCount");
  bind.Required(&api->get_device_info, "mxSmlGetDeviceInfo");
  bind.Required(&api->get_memory_info, "mxSmlGetMemoryInfo");
  bind.Optional(&api->shutdown, "mxSmlShutdown");
  bind.Optional(&api->get_error_string, "mxSmlGetErrorString");
  bind.Optional(&api->get_device_ip_usage, "mxSmlGetDeviceIpUsage");
  bind.Optional(&api->get_temperature_info, "mxSmlGetTemperatureInfo");
  bind.Optional(&api->get_board_power_info, "mxSmlGetBoardPowerInfo");
  bind.Optional(&api->get_device_version, "mxSmlGetDeviceVersion");
  bind.Optional(&api->get_maca_version, "mxSmlGetMacaVersion");
  bind.Optional(&api->get_single_gpu_process, "mxSmlGetSingleGpuProcess");
  return bind.Finish(missing);
}

}  // namespace gpustack::metax::mxsml

#endif  // GPUSTACK_PLUGINS_METAX_MXSML_API_H_
