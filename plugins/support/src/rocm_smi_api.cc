#include "gpustack_support/rocm_smi_api.h"

#include <cstdio>

namespace gpustack::support::rsmi {

bool Resolve(const sdk::VendorLibrary& library, Api* api, std::string* missing) {
  sdk::SymbolBinder bind(library);
  bind.Required(&api->init, "rsmi_init");
  bind.Required(&api->shut_down, "rsmi_shut_down");
  bind.Required(&api->status_string, "rsmi_status_string");
  bind.Required(&api->num_monitor_devices, "rsmi_num_monitor_devices");
  bind.Required(&api->dev_name_get, "rsmi_dev_name_get");
  bind.Required(&api->dev_pci_id_get, "rsmi_dev_pci_id_get");
  bind.Required(&api->dev_memory_total_get, "rsmi_dev_memory_total_get");
  bind.Optional(&api->dev_unique_id_get, "rsmi_dev_unique_id_get");
  bind.Optional(&api->dev_memory_usage_get, "rsmi_dev_memory_usage_get");
  bind.Optional(&api->dev_busy_percent_get, "rsmi_dev_busy_percent_get");
  bind.Optional(&api->dev_temp_metric_get, "rsmi_dev_temp_metric_get");
  bind.Optional(&api->dev_power_ave_get, "rsmi_dev_power_ave_get");
  bind.Optional(&api->version_str_get, "rsmi_version_str_get");
  bind.Optional(&api->compute_process_info_get, "rsmi_compute_process_info_get");
  bind.Optional(&api->compute_process_gpus_get, "rsmi_compute_process_gpus_get");
  return bind.Finish(missing);
}

std::string BusIdFromBdfId(uint64_t bdfid) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%04x:%02x:%02x.%x",
                static_cast<unsigned>((bdfid >> 32) & 0xffff),
                static_cast<unsigned>((bdfid >> 8) & 0xff),
                static_cast<unsigned>((bdfid >> 3) & 0x1f), static_cast<unsigned>(bdfid & 0x7));
  return buffer;
}

}  // namespace gpustack::support::rsmi
