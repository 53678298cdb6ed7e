// The gpustack_host_services table one plugin instance receives at init, and everything it points
// to: the plugin's logger ("plugin.<name>") and its settings from the node config.
#ifndef GPUSTACK_HOST_LOADER_HOST_SERVICES_H_
#define GPUSTACK_HOST_LOADER_HOST_SERVICES_H_

#include <gpustack/plugin.h>
#include <spdlog/logger.h>

#include <map>
#include <memory>
#include <string>

namespace gpustack::loader {

class HostServices {
 public:
  HostServices(const std::string& plugin_name, std::map<std::string, std::string> settings);
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  // Valid while this object lives; the plugin may call it from any thread.
  const gpustack_host_services* table() const { return &table_; }

 private:
  static void Log(void* host_data, gpustack_log_level level, gpustack_str message,
                  gpustack_str file, uint32_t line);
  static int32_t LogEnabled(void* host_data, gpustack_log_level level);
  static uint64_t MonotonicTimeNs(void* host_data);
  static gpustack_status ConfigGet(void* host_data, gpustack_str key, gpustack_str* value);

  std::shared_ptr<spdlog::logger> logger_;
  const std::map<std::string, std::string> settings_;  // never modified: config_get hands out views
  gpustack_host_services table_{};
};

}  // namespace gpustack::loader

#endif  // GPUSTACK_HOST_LOADER_HOST_SERVICES_H_
