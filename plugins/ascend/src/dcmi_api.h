// The subset of Huawei's DCMI C API (libdcmi.so, dcmi_interface_api.h) the Ascend plugin calls,
// declared from the vendor's published header and API reference. Every call returns int, 0 on
// success and -8000 minus a code on failure.
#ifndef GPUSTACK_PLUGINS_ASCEND_DCMI_API_H_
#define GPUSTACK_PLUGINS_ASCEND_DCMI_API_H_

#include <gpustack/plugin_util.hpp>

#include <string>

namespace gpustack::ascend::dcmi {

inline constexpr int kOk = 0;
inline constexpr int kNotSupport = -8255;
inline constexpr int kMaxCards = 64;
inline constexpr int kUtilizationAicore = 2;
inline constexpr int kDieVdie = 1;  // enum dcmi_die_type VDIE
inline constexpr unsigned kHealthMissing = 0xFFFFFFFFu;

struct ChipInfo {  // struct dcmi_chip_info, 100 bytes
  unsigned char chip_type[32];
  unsigned char chip_name[32];
  unsigned char chip_ver[32];
  unsigned int aicore_cnt;
};

struct PcieInfoAll {  // struct dcmi_pcie_info_all (v2, with the domain), 64 bytes
  unsigned int venderid;
  unsigned int subvenderid;
  unsigned int deviceid;
  unsigned int subdeviceid;
  int domain;
  unsigned int bdf_busid;
  unsigned int bdf_deviceid;
  unsigned int bdf_funcid;
  unsigned char reserve[32];
};

struct PcieInfo {  // struct dcmi_pcie_info (v1, no domain), 28 bytes
  unsigned int deviceid;
  unsigned int venderid;
  unsigned int subvenderid;
  unsigned int subdeviceid;
  unsigned int bdf_deviceid;
  unsigned int bdf_busid;
  unsigned int bdf_funcid;
};

struct HbmInfo {  // struct dcmi_hbm_info, MB
  unsigned long long memory_size;
  unsigned int freq;
  unsigned long long memory_usage;
  int temp;
  unsigned int bandwith_util_rate;
};

struct MemoryInfo {  // struct dcmi_get_memory_info_stru (for parts without HBM), MB
  unsigned long long memory_size;
  unsigned long long memory_available;
  unsigned int freq;
  unsigned long hugepagesize;
  unsigned long hugepages_total;
  unsigned long hugepages_free;
  unsigned int utiliza;
  unsigned char reserve[60];
};

struct DieId {  // struct dcmi_die_id
  unsigned int soc_die[5];
};

struct ProcMemInfo {  // struct dcmi_proc_mem_info
  int proc_id;
  unsigned long proc_mem_usage;  // bytes
};
inline constexpr int kMaxProcesses = 32;    // what the API reference documents
inline constexpr int kProcessBuffer = 128;  // what the plugin passes (no capacity argument)

struct Api {
  int (*init)() = nullptr;
  int (*get_card_list)(int*, int*, int) = nullptr;
  int (*get_device_num_in_card)(int, int*) = nullptr;
  int (*get_device_logic_id)(int*, int, int) = nullptr;
  int (*get_device_phyid_from_logicid)(unsigned int, unsigned int*) = nullptr;
  int (*get_device_chip_info)(int, int, ChipInfo*) = nullptr;
  int (*get_device_die_v2)(int, int, int, DieId*) = nullptr;
  // Optional.
  int (*get_device_pcie_info_v2)(int, int, PcieInfoAll*) = nullptr;
  int (*get_device_pcie_info)(int, int, PcieInfo*) = nullptr;
  int (*get_device_hbm_info)(int, int, HbmInfo*) = nullptr;
  int (*get_device_memory_info_v3)(int, int, MemoryInfo*) = nullptr;
  int (*get_device_utilization_rate)(int, int, int, unsigned int*) = nullptr;
  int (*get_device_temperature)(int, int, int*) = nullptr;
  int (*get_device_power_info)(int, int, int*) = nullptr;  // 0.1 W
  int (*get_device_health)(int, int, unsigned int*) = nullptr;
  int (*get_driver_version)(char*, unsigned int) = nullptr;
  int (*get_device_resource_info)(int, int, ProcMemInfo*, int*) = nullptr;
};

inline bool Resolve(const gpustack::sdk::VendorLibrary& lib, Api* api, std::string* missing) {
  gpustack::sdk::SymbolBinder bind(lib);
  bind.Required(&api->init, "dcmi_init");
  bind.Required(&api->get_card_list, "dcmi_get_card_list");
  bind.Required(&api->get_device_num_in_card, "dcmi_get_device_num_in_card");
  bind.Required(&api->get_device_logic_id, "dcmi_get_device_logic_id");
  bind.Required(&api->get_device_phyid_from_logicid, "dcmi_get_device_phyid_from_logicid");
  bind.Required(&api->get_device_chip_info, "dcmi_get_device_chip_info");
  bind.Required(&api->get_device_die_v2, "dcmi_get_device_die_v2");
  bind.Optional(&api->get_device_pcie_info_v2, "dcmi_get_device_pcie_info_v2");
  bind.Optional(&api->get_device_pcie_info, "dcmi_get_device_pcie_info");
  bind.Optional(&api->get_device_hbm_info, "dcmi_get_device_hbm_info");
  bind.Optional(&api->get_device_memory_info_v3, "dcmi_get_device_memory_info_v3");
  bind.Optional(&api->get_device_utilization_rate, "dcmi_get_device_utilization_rate");
  bind.Optional(&api->get_device_temperature, "dcmi_get_device_temperature");
  bind.Optional(&api->get_device_power_info, "dcmi_get_device_power_info");
  bind.Optional(&api->get_device_health, "dcmi_get_device_health");
  bind.Optional(&api->get_driver_version, "dcmi_get_driver_version");
  bind.Optional(&api->get_device_resource_info, "dcmi_get_device_resource_info");
  if (!bind.Finish(missing)) return false;
  if (api->get_device_pcie_info_v2 == nullptr && api->get_device_pcie_info == nullptr) {
    *missing = "dcmi_get_device_pcie_info_v2";
    return false;
  }
  return true;
}

}  // namespace gpustack::ascend::dcmi

#endif  // GPUSTACK_PLUGINS_ASCEND_DCMI_API_H_
