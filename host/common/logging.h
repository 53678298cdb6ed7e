#ifndef GPUSTACK_HOST_COMMON_LOGGING_H_
#define GPUSTACK_HOST_COMMON_LOGGING_H_

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

namespace gpustack {

// Sends every log line to stderr (stdout is for command output). `level` is one of
// trace, debug, info, warn, error, off; an unknown name keeps "info" and says so.
void InitLogging(std::string_view level);

// A named logger ("loader", "plugin.nvidia") sharing the default sink and level.
std::shared_ptr<spdlog::logger> Logger(const std::string& name);

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_LOGGING_H_
