#include "host/device_manager/preflight.h"

#include <toml++/toml.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "host/common/files.h"
#include "host/common/text.h"
#include "host/runtime/node_config.h"

namespace gpustack::device_manager {
namespace {

using runtime::PluginState;
using runtime::PluginStatus;

constexpr size_t kMaxContainerdConfig = 1 << 20;

const char* ResultName(CheckResult r) {
  switch (r) {
    case CheckResult::kPass:
      return "PASS";
    case CheckResult::kWarn:
      return "WARN";
    default:
      return "FAIL";
  }
}

PreflightCheck LibraryCheck(const PluginStatus& p) {
  PreflightCheck check{p.name, "management library", CheckResult::kPass, "", ""};
  const std::string hint = p.identity && !p.identity->install_hint.empty()
                               ? p.identity->install_hint
                               : "see the message";
  const size_t cards = runtime::CardCount(p.groups);
  size_t unhealthy = 0;
  std::string reasons;
  for (const auto& g : p.groups) {
    for (const auto& c : g.accelerators) {
      if (c.health != GPUSTACK_HEALTH_UNHEALTHY) continue;
      ++unhealthy;
      reasons += (reasons.empty() ? "" : "; ") + c.id + ": " + c.health_reason;
    }
  }
  if (p.state != PluginState::kRunning) {
    check.result = CheckResult::kFail;
    check.detail = std::string(StateName(p.state)) + (p.error ? ": " + p.error->message : "");
    if (p.state == PluginState::kQuarantined) {
      check.fix = "install a fixed plugin (or remove its quarantine entry to try it again)";
    } else if (p.error && p.error->reason == runtime::kLibraryPathSetting) {
      check.fix =
          "point library_path at the vendor's management library, or unset it to use "
          "the plugin's default search";
    } else if (p.identity && p.state == PluginState::kFailed) {
      check.fix = hint;  // it loaded and identified itself, then its vendor library failed it
    } else {
      check.fix = "reinstall the plugin or fix the file named";
    }
  } else if (p.discovery_error) {
    check.result = CheckResult::kFail;
    check.detail =
        std::string(CodeName(p.discovery_error->code)) + ": " + p.discovery_error->message;
    check.fix = hint;
  } else if (cards == 0) {
    check.result = CheckResult::kFail;
    check.detail = "loaded, but it reports no device although " + p.decision;
    check.fix = "check that the driver is bound to the devices (dmesg)";
  } else if (unhealthy > 0) {
    check.result = CheckResult::kWarn;
    check.detail = "loaded; " + std::to_string(cards - unhealthy) + " healthy and " +
                   std::to_string(unhealthy) + " unhealthy accelerator(s): " + reasons;
    check.fix = "check the unhealthy cards (dmesg, the vendor's tools); they are not allocated";
  } else if (!p.warnings.empty()) {
    check.result = CheckResult::kWarn;
    check.detail = "loaded; " + std::to_string(cards) + " accelerator(s); " + p.warnings.front();
    check.fix = "check the cards named (lspci -k, dmesg, the vendor's tools)";
  } else {
    check.detail = "loaded; " + std::to_string(cards) + " accelerator(s)";
  }
  return check;
}

std::optional<PreflightCheck> DeviceNodeCheck(runtime::NodeRuntime& node, const PluginStatus& p,
                                              const PreflightOptions& options) {
  if (runtime::CardCount(p.groups) == 0) return std::nullopt;
  auto nodes = node.DeviceNodes(p.name);
  if (!nodes && nodes.code() == Code::kUnimplemented) return std::nullopt;  // nothing declared
  PreflightCheck check{p.name, "device nodes", CheckResult::kPass, "", ""};
  if (!nodes) {
    check.result = CheckResult::kWarn;
    check.detail = "cannot tell: " + nodes.error();
    return check;
  }
  std::vector<std::string> missing;
  std::error_code ec;
  for (const sdk::DeviceNode& n : *nodes) {
    const std::filesystem::path path = std::filesystem::path(options.dev_root) / n.path;
    if (!std::filesystem::exists(path, ec)) missing.push_back(path.string());
  }
  if (missing.empty()) {
    check.detail = std::to_string(nodes->size()) + " present under " + options.dev_root;
    return check;
  }
  check.result = CheckResult::kFail;
  check.detail = "missing: ";
  for (size_t i = 0; i < missing.size(); ++i) check.detail += (i ? ", " : "") + missing[i];
  const std::string hint = p.identity && !p.identity->install_hint.empty()
                               ? p.identity->install_hint
                               : "install the driver";
  check.fix = hint + "; the kernel module creates these nodes";
  return check;
}

std::optional<PreflightCheck> RuntimeCheck(const PluginStatus& p, const PreflightOptions& options) {
  if (!p.identity || p.identity->runtime_class.empty()) return std::nullopt;
  const runtime::PluginIdentity& id = *p.identity;
  const std::string& handler = id.runtime_class;
  const std::string why = id.runtime_injects_driver()
                              ? "the vendor runtime injects the driver into the device manager"
                              : "the vendor runtime injects the devices into workloads";
  PreflightCheck check{p.name, "container runtime", CheckResult::kPass, "", ""};
  auto config = ReadSmallFile(options.containerd_config, kMaxContainerdConfig, "containerd config");
  if (!config) {
    check.result = CheckResult::kWarn;
    check.detail = config.error() + "; cannot tell whether the \"" + handler +
                   "\" handler exists (" + why + ")";
    check.fix = "make sure containerd has a \"" + handler +
                "\" runtime handler, for RuntimeClass " + handler;
  } else if (auto has = HasRuntimeHandler(*config, handler); !has) {
    check.result = CheckResult::kWarn;
    check.detail = options.containerd_config + " is " + has.error() +
                   "; cannot tell whether the \"" + handler + "\" handler exists (" + why + ")";
    check.fix =
        "fix the containerd config (containerd itself would refuse it), then restart "
        "containerd";
  } else if (!*has) {
    check.result = CheckResult::kFail;
    check.detail =
        "no \"" + handler + "\" runtime in " + options.containerd_config + " (" + why + ")";
    check.fix =
        "install the vendor's container toolkit and register its runtime with containerd "
        "as \"" +
        handler + "\", then restart containerd";
  } else {
    check.detail = "containerd has the \"" + handler + "\" runtime";
  }
  return check;
}

std::optional<PreflightCheck> PartitionCheck(const PluginStatus& p) {
  const size_t cards = runtime::CardCount(p.groups);
  if (!p.identity || !p.identity->Has(GPUSTACK_CAP_PARTITIONING) || cards == 0) return std::nullopt;
  size_t enabled = 0, pending = 0, unsupported = 0;
  for (const auto& g : p.groups) {
    for (const auto& c : g.accelerators) {
      enabled += c.partition_mode == GPUSTACK_PARTITION_MODE_ENABLED;
      pending += c.partition_mode == GPUSTACK_PARTITION_MODE_PENDING;
      unsupported += c.partition_mode == GPUSTACK_PARTITION_MODE_UNSUPPORTED;
    }
  }
  PreflightCheck mode{p.name, "partition mode", CheckResult::kPass, "", ""};
  mode.detail = std::to_string(enabled) + " of " + std::to_string(cards) + " card(s) in " +
                p.identity->partition_kind + " mode";
  if (unsupported > 0) mode.detail += ", " + std::to_string(unsupported) + " cannot partition";
  if (pending > 0) {
    mode.result = CheckResult::kWarn;
    mode.detail += ", " + std::to_string(pending) + " with a mode change pending";
    mode.fix =
        "reset those cards (or reboot) to apply the pending mode, then restart the device manager";
  }
  return mode;
}

}  // namespace

namespace {

// A table `runtimes` holding a table `name`, at any depth below `table`.
bool HoldsRuntime(const toml::table& table, std::string_view name, int depth) {
  if (depth > 16) return false;  // containerd nests four or five deep; a hostile file more
  if (const toml::table* runtimes = table["runtimes"].as_table()) {
    if ((*runtimes)[name].is_table()) return true;
  }
  for (const auto& [key, value] : table) {
    if (const toml::table* child = value.as_table(); child && HoldsRuntime(*child, name, depth + 1))
      return true;
  }
  return false;
}

}  // namespace

Result<bool> HasRuntimeHandler(std::string_view config, std::string_view name) {
  toml::table root;
  try {
    root = toml::parse(config);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return Error{"not valid TOML at line " + std::to_string(at.line) + ", column " +
                     std::to_string(at.column) + ": " + std::string(e.description()),
                 Code::kInvalidArgument};
  }
  const toml::table* plugins = root["plugins"].as_table();
  return plugins != nullptr && HoldsRuntime(*plugins, name, 0);
}

std::vector<PreflightCheck> RunPreflight(runtime::NodeRuntime& node,
                                         const PreflightOptions& options) {
  std::vector<PreflightCheck> checks;
  for (const PluginStatus& p : node.Report().plugins) {
    if (!p.enabled && p.state != PluginState::kRefused) continue;
    checks.push_back(LibraryCheck(p));
    if (p.state != PluginState::kRunning) continue;
    for (auto check :
         {DeviceNodeCheck(node, p, options), RuntimeCheck(p, options), PartitionCheck(p)}) {
      if (check) checks.push_back(std::move(*check));
    }
  }
  return checks;
}

bool AllPassed(const std::vector<PreflightCheck>& checks) {
  return std::none_of(checks.begin(), checks.end(),
                      [](const PreflightCheck& c) { return c.result == CheckResult::kFail; });
}

nlohmann::json ToJson(const std::vector<PreflightCheck>& checks) {
  nlohmann::json out = nlohmann::json::array();
  for (const PreflightCheck& c : checks) {
    nlohmann::json entry = {{"manufacturer", c.manufacturer},
                            {"check", c.check},
                            {"result", ResultName(c.result)},
                            {"detail", c.detail}};
    if (!c.fix.empty()) entry["fix"] = c.fix;
    out.push_back(std::move(entry));
  }
  return {{"checks", out}, {"passed", AllPassed(checks)}};
}

std::string ToText(const std::vector<PreflightCheck>& checks) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-10s %-19s %-6s %s\n", "VENDOR", "CHECK", "RESULT", "DETAIL");
  out << line;
  for (const PreflightCheck& c : checks) {
    // Fixed columns first; the detail, of any length, after them.
    std::snprintf(line, sizeof line, "%-10s %-19s %-6s ", Printable(c.manufacturer).c_str(),
                  c.check.c_str(), ResultName(c.result));
    out << line << Printable(c.detail) << "\n";
    if (!c.fix.empty()) out << std::string(38, ' ') << "fix: " << Printable(c.fix) << "\n";
  }
  if (checks.empty()) out << "no plugin is enabled on this node: nothing to check\n";
  out << (AllPassed(checks) ? "\nPreflight passed.\n"
                            : "\nPreflight FAILED: fix the items above.\n");
  return out.str();
}

}  // namespace gpustack::device_manager
