#include "gpustack_support/nvml_api.h"

#include <vector>

namespace gpustack::support::nvml {
namespace {

// Looks up <prefix><name> for each name, first match wins.
class Resolver {
 public:
  Resolver(const sdk::VendorLibrary& library, std::string_view prefix)
      : library_(library), prefix_(prefix) {}

  template <class Fn>
  void Get(Fn* slot, std::initializer_list<std::string_view> names) {
    std::vector<std::string> full;
    for (std::string_view name : names) full.push_back(std::string(prefix_) + std::string(name));
    for (const std::string& name : full) {
      if (Fn fn = library_.Find<Fn>({name}); fn != nullptr) {
        *slot = fn;
        return;
      }
    }
    *slot = nullptr;
    last_missing_ = full.front();
  }
  template <class Fn>
  bool Require(Fn* slot, std::initializer_list<std::string_view> names, std::string* missing) {
    Get(slot, names);
    if (*slot == nullptr && missing != nullptr && missing->empty()) *missing = last_missing_;
    return *slot != nullptr;
  }

 private:
  const sdk::VendorLibrary& library_;
  std::string_view prefix_;
  std::string last_missing_;
};

}  // namespace

bool Api::has_mig() const {
  return device_get_mig_mode != nullptr && device_get_gpu_instance_profile_info != nullptr &&
         device_get_gpu_instance_possible_placements != nullptr &&
         device_create_gpu_instance_with_placement != nullptr &&
         device_get_gpu_instances != nullptr && gpu_instance_get_info != nullptr &&
         gpu_instance_destroy != nullptr &&
         gpu_instance_get_compute_instance_profile_info != nullptr &&
         gpu_instance_create_compute_instance != nullptr &&
         gpu_instance_get_compute_instances != nullptr && compute_instance_destroy != nullptr &&
         device_get_max_mig_device_count != nullptr &&
         device_get_mig_device_handle_by_index != nullptr && device_get_gpu_instance_id != nullptr;
}

bool Api::has_events() const {
  return event_set_create != nullptr && device_register_events != nullptr &&
         event_set_wait != nullptr && event_set_free != nullptr;
}

bool Resolve(const sdk::VendorLibrary& library, std::string_view prefix, Api* api,
             std::string* missing) {
  Resolver r(library, prefix);
  bool ok = true;
  ok &= r.Require(&api->init, {"Init_v2", "Init"}, missing);
  ok &= r.Require(&api->shutdown, {"Shutdown"}, missing);
  ok &= r.Require(&api->error_string, {"ErrorString"}, missing);
  ok &= r.Require(&api->device_get_count, {"DeviceGetCount_v2", "DeviceGetCount"}, missing);
  ok &= r.Require(&api->device_get_handle_by_index,
                  {"DeviceGetHandleByIndex_v2", "DeviceGetHandleByIndex"}, missing);
  ok &= r.Require(&api->device_get_name, {"DeviceGetName"}, missing);
  ok &= r.Require(&api->device_get_uuid, {"DeviceGetUUID"}, missing);
  ok &= r.Require(&api->device_get_pci_info,
                  {"DeviceGetPciInfo_v3", "DeviceGetPciInfo_v2", "DeviceGetPciInfo"}, missing);
  ok &= r.Require(&api->device_get_minor_number, {"DeviceGetMinorNumber"}, missing);
  ok &= r.Require(&api->device_get_memory_info, {"DeviceGetMemoryInfo"}, missing);
  r.Get(&api->device_get_memory_info_v2, {"DeviceGetMemoryInfo_v2"});
  r.Get(&api->system_get_driver_version, {"SystemGetDriverVersion"});
  r.Get(&api->system_get_cuda_driver_version,
        {"SystemGetCudaDriverVersion_v2", "SystemGetCudaDriverVersion"});
  r.Get(&api->device_get_cuda_compute_capability, {"DeviceGetCudaComputeCapability"});
  r.Get(&api->device_get_num_gpu_cores, {"DeviceGetNumGpuCores"});
  r.Get(&api->device_get_architecture, {"DeviceGetArchitecture"});
  r.Get(&api->device_get_utilization_rates, {"DeviceGetUtilizationRates"});
  r.Get(&api->device_get_temperature, {"DeviceGetTemperature"});
  r.Get(&api->device_get_power_usage, {"DeviceGetPowerUsage"});
  r.Get(&api->device_get_compute_running_processes, {"DeviceGetComputeRunningProcesses_v3"});
  r.Get(&api->device_get_process_utilization, {"DeviceGetProcessUtilization"});
  r.Get(&api->device_get_mig_mode, {"DeviceGetMigMode"});
  r.Get(&api->event_set_create, {"EventSetCreate"});
  r.Get(&api->device_register_events, {"DeviceRegisterEvents"});
  r.Get(&api->event_set_wait, {"EventSetWait_v2"});
  r.Get(&api->event_set_free, {"EventSetFree"});
  r.Get(&api->device_get_gpu_instance_profile_info, {"DeviceGetGpuInstanceProfileInfo"});
  r.Get(&api->device_get_gpu_instance_profile_info_v, {"DeviceGetGpuInstanceProfileInfoV"});
  r.Get(&api->device_get_gpu_instance_possible_placements,
        {"DeviceGetGpuInstancePossiblePlacements_v2", "DeviceGetGpuInstancePossiblePlacements"});
  r.Get(&api->device_create_gpu_instance_with_placement, {"DeviceCreateGpuInstanceWithPlacement"});
  r.Get(&api->device_get_gpu_instances, {"DeviceGetGpuInstances"});
  r.Get(&api->gpu_instance_get_info, {"GpuInstanceGetInfo"});
  r.Get(&api->gpu_instance_destroy, {"GpuInstanceDestroy"});
  r.Get(&api->gpu_instance_get_compute_instance_profile_info,
        {"GpuInstanceGetComputeInstanceProfileInfo"});
  r.Get(&api->gpu_instance_create_compute_instance, {"GpuInstanceCreateComputeInstance"});
  r.Get(&api->gpu_instance_get_compute_instances, {"GpuInstanceGetComputeInstances"});
  r.Get(&api->compute_instance_destroy, {"ComputeInstanceDestroy"});
  r.Get(&api->device_get_max_mig_device_count, {"DeviceGetMaxMigDeviceCount"});
  r.Get(&api->device_get_mig_device_handle_by_index, {"DeviceGetMigDeviceHandleByIndex"});
  r.Get(&api->device_get_gpu_instance_id, {"DeviceGetGpuInstanceId"});
  return ok;
}

}  // namespace gpustack::support::nvml
