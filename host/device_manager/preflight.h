// `device-manager preflight`: what each enabled manufacturer needs on this node, checked, with
// what to fix. Checks: the management library loads and answers (through the plugin), the device
// nodes its containers will be given exist, the container runtime the manufacturer needs is
// configured (reference §3.1), and the partition mode of partition-capable cards.
#ifndef GPUSTACK_HOST_DEVICE_MANAGER_PREFLIGHT_H_
#define GPUSTACK_HOST_DEVICE_MANAGER_PREFLIGHT_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "host/device_manager/detect.h"

namespace gpustack::device_manager {

enum class CheckResult { kPass, kWarn, kFail };

struct PreflightCheck {
  std::string manufacturer;
  std::string check;  // "management library", "device nodes", "container runtime", ...
  CheckResult result = CheckResult::kPass;
  std::string detail;  // what was found
  std::string fix;     // what to do; empty on pass
};

struct PreflightOptions {
  std::string dev_root = "/dev";
  std::string containerd_config = "/etc/containerd/config.toml";
};

// Pure given the session (DiscoverAll must have run) and the files it looks at.
std::vector<PreflightCheck> RunPreflight(const NodeSession& session,
                                         const PreflightOptions& options);

bool AllPassed(const std::vector<PreflightCheck>& checks);  // no failure (warnings allowed)
nlohmann::json ToJson(const std::vector<PreflightCheck>& checks);
std::string ToText(const std::vector<PreflightCheck>& checks);

}  // namespace gpustack::device_manager

#endif  // GPUSTACK_HOST_DEVICE_MANAGER_PREFLIGHT_H_
