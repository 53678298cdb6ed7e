// `device-manager preflight`: what each enabled manufacturer needs on this node, checked, with
// what to fix, as a view over the node runtime. Checks: the plugin runs and its management
// library answers, the device nodes its containers use exist, the container runtime it needs is
// registered with containerd (docs/behaviour.md §3.1), and the partition mode of partition-capable
// cards. Everything vendor-specific comes from the plugin itself (its identity and its device
// nodes), so a third-party plugin gets the same checks as an in-tree one.
#ifndef GPUSTACK_HOST_DEVICE_MANAGER_PREFLIGHT_H_
#define GPUSTACK_HOST_DEVICE_MANAGER_PREFLIGHT_H_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "host/runtime/node_runtime.h"

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

// After a discovery pass.
std::vector<PreflightCheck> RunPreflight(runtime::NodeRuntime& node,
                                         const PreflightOptions& options);

// Whether a containerd config (TOML, any config version) registers a runtime handler `name`: a
// table `runtimes.<name>` anywhere under `plugins`, as containerd reads it (parsed, so a header
// inside a comment or a multi-line string does not count). An error names where the TOML is
// malformed. Pure.
Result<bool> HasRuntimeHandler(std::string_view containerd_config, std::string_view name);

bool AllPassed(const std::vector<PreflightCheck>& checks);  // no failure (warnings allowed)
nlohmann::json ToJson(const std::vector<PreflightCheck>& checks);
std::string ToText(const std::vector<PreflightCheck>& checks);

}  // namespace gpustack::device_manager

#endif  // GPUSTACK_HOST_DEVICE_MANAGER_PREFLIGHT_H_
