#include "host/common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

namespace gpustack {

void InitLogging(std::string_view level) {
  // Idempotent: a second call only changes the level.
  auto logger = spdlog::get("gpustack");
  if (!logger) logger = spdlog::stderr_color_mt("gpustack");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ [%n] %v");
  const auto parsed = spdlog::level::from_str(std::string(level));
  // from_str answers "off" for names it does not know; only believe it when asked for "off".
  if (parsed == spdlog::level::off && level != "off") {
    spdlog::set_level(spdlog::level::info);
    spdlog::warn("unknown log level '{}', using info", level);
  } else {
    spdlog::set_level(parsed);
  }
}

std::shared_ptr<spdlog::logger> Logger(const std::string& name) {
  static std::mutex mutex;  // get-or-create must be atomic: register_logger throws on a duplicate
  std::lock_guard lock(mutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto base = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(name, base->sinks().begin(), base->sinks().end());
  logger->set_level(base->level());
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace gpustack

#if defined(GPUSTACK_SANITIZE_BUILD)
// LeakSanitizer in gcc 12's runtime (on glibc 2.36) can crash at exit while it walks the dynamic
// TLS of dlopen'ed libraries ("Tracer caught signal 11"); every plugin and vendor library has
// some. Not scanning TLS keeps the leak check for everything else. Every binary that runs a
// plugin links this file.
extern "C" const char* __lsan_default_options() { return "use_tls=0"; }
#endif
