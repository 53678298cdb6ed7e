#include "host/loader/host_services.h"

#include <gpustack/plugin_types.hpp>

#include <chrono>

#include "host/common/logging.h"
#include "host/common/text.h"

namespace gpustack::loader {
namespace {

spdlog::level::level_enum ToSpdlog(gpustack_log_level level) {
  switch (level) {
    case GPUSTACK_LOG_TRACE:
      return spdlog::level::trace;
    case GPUSTACK_LOG_DEBUG:
      return spdlog::level::debug;
    case GPUSTACK_LOG_INFO:
      return spdlog::level::info;
    case GPUSTACK_LOG_WARN:
      return spdlog::level::warn;
    default:
      return spdlog::level::err;  // ERROR and anything unknown: never lose it
  }
}

}  // namespace

HostServices::HostServices(const std::string& plugin_name,
                           std::map<std::string, std::string> settings)
    : logger_(Logger("plugin." + plugin_name)), settings_(std::move(settings)) {
  table_.struct_size = sizeof(table_);
  table_.host_data = this;
  table_.log = &Log;
  table_.log_enabled = &LogEnabled;
  table_.monotonic_time_ns = &MonotonicTimeNs;
  table_.config_get = &ConfigGet;
}

void HostServices::Log(void* host_data, gpustack_log_level level, gpustack_str message,
                       gpustack_str file, uint32_t line) {
  auto* self = static_cast<HostServices*>(host_data);
  try {
    // A plugin's text may hold anything: escaped, so it cannot forge log lines or drive a
    // terminal. Its build path means nothing on a node; the file name and line are for its vendor.
    const std::string text = Printable(sdk::View(message));
    std::string_view source = sdk::View(file);
    source.remove_prefix(source.rfind('/') == std::string_view::npos ? 0 : source.rfind('/') + 1);
    if (!source.empty()) {
      self->logger_->log(ToSpdlog(level), "{} ({}:{})", text, Printable(source), line);
    } else {
      self->logger_->log(ToSpdlog(level), "{}", text);
    }
  } catch (...) {
    // Logging never fails from the plugin's point of view, and never unwinds into it.
  }
}

int32_t HostServices::LogEnabled(void* host_data, gpustack_log_level level) {
  return static_cast<HostServices*>(host_data)->logger_->should_log(ToSpdlog(level)) ? 1 : 0;
}

uint64_t HostServices::MonotonicTimeNs(void*) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

gpustack_status HostServices::ConfigGet(void* host_data, gpustack_str key, gpustack_str* value) {
  auto* self = static_cast<HostServices*>(host_data);
  if (value == nullptr) return GPUSTACK_STATUS_INVALID_ARGUMENT;
  try {
    auto it = self->settings_.find(std::string(sdk::View(key)));
    if (it == self->settings_.end()) return GPUSTACK_STATUS_NOT_FOUND;
    *value = sdk::Str(it->second);
    return GPUSTACK_STATUS_OK;
  } catch (...) {
    return GPUSTACK_STATUS_RESOURCE_EXHAUSTED;
  }
}

}  // namespace gpustack::loader
