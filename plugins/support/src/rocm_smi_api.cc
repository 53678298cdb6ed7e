#include "gpustack_support/rocm_smi_api.h"

namespace gpustack::support::rsmi {

bool Resolve(const VendorLibrary& library, Api* api, std::string* missing) {
  bool ok = true;
  auto require = [&](auto* slot, const char* name) {
    *slot = library.Find<std::remove_reference_t<decltype(*slot)>>({name});
    if (*slot == nullptr) {
      if (missing != nullptr && missing->empty()) *missing = name;
      ok = false;
    }
  };
  auto optional = [&](auto* slot, const char* name) {
    *slot = library.Find<std::remove_reference_t<decltype(*slot)>>({name});
  };
  require(&api->init, "rsmi_init");
  require(&api->shut_down, "rsmi_shut_down");
  require(&api->status_string, "rsmi_status_string");
  require(&api->num_monitor_devices, "rsmi_num_monitor_devices");
  require(&api->dev_name_get, "rsmi_dev_name_get");
  require(&api->dev_pci_id_get, "rsmi_dev_pci_id_get");
  require(&api->dev_memory_total_get, "rsmi_dev_memory_total_get");
  optional(&api->dev_unique_id_get, "rsmi_dev_unique_id_get");
  optional(&api->dev_memory_usage_get, "rsmi_dev_memory_usage_get");
  optional(&api->dev_busy_percent_get, "rsmi_dev_busy_percent_get");
  optional(&api->dev_temp_metric_get, "rsmi_dev_temp_metric_get");
  optional(&api->dev_power_ave_get, "rsmi_dev_power_ave_get");
  optional(&api->version_str_get, "rsmi_version_str_get");
  optional(&api->compute_process_info_get, "rsmi_compute_process_info_get");
  optional(&api->compute_process_gpus_get, "rsmi_compute_process_gpus_get");
  return ok;
}

}  // namespace gpustack::support::rsmi
