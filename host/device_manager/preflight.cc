#include "host/device_manager/preflight.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace gpustack::device_manager {
namespace {

// What a manufacturer's containers are given and need (vendors.md; reference §3.1).
struct VendorFacts {
  std::string manufacturer;
  std::vector<std::string> shared_nodes;  // under the dev root
  // Per card, formatted with its physical indexes: {0} = the first, {1} = the second.
  std::vector<std::string> card_nodes;
  std::string runtime;  // RuntimeClass handler the workloads (or the device manager) need
  std::string runtime_reason;
  std::string driver_hint;
};

const std::vector<VendorFacts>& Facts() {
  static const std::vector<VendorFacts> facts = {
      {"nvidia",
       {"nvidiactl", "nvidia-uvm"},
       {"nvidia{0}"},
       "nvidia",
       "the toolkit injects the driver",
       "install the NVIDIA driver (nvidia-smi must work)"},
      {"amd", {"kfd"}, {"dri/card{0}", "dri/renderD{1}"}, "", "", "load the amdgpu driver"},
      {"ascend",
       {"davinci_manager", "devmm_svm", "hisi_hdc"},
       {"davinci{0}"},
       "ascend",
       "the Ascend Docker Runtime injects the devices",
       "install the Ascend NPU driver"},
      {"cambricon",
       {"cambricon_ctl"},
       {"cambricon_dev{0}"},
       "",
       "",
       "install the Cambricon driver"},
      {"hygon", {"kfd"}, {"dri/card{0}", "dri/renderD{1}"}, "", "", "install the Hygon DCU driver"},
      {"iluvatar",
       {"itrctl"},
       {"iluvatar{0}"},
       "iluvatar",
       "the ix-container-toolkit injects the devices",
       "install the Iluvatar CoreX driver"},
      {"metax", {"mxcd"}, {"dri/card{0}", "dri/renderD{1}"}, "", "", "install the MetaX driver"},
      {"mthreads",
       {},
       {"mtgpu.{0}"},
       "mthreads",
       "the MT container toolkit injects the driver",
       "install the Moore Threads driver"},
      {"thead", {"alixpu", "alixpu_ctl"}, {"alixpu_ppu{0}"}, "", "", "install the PPU driver"},
  };
  return facts;
}

std::optional<std::string> Format(const std::string& pattern, const std::vector<uint32_t>& ids) {
  std::string out = pattern;
  for (size_t i = 0; i < 2; ++i) {
    const std::string token = "{" + std::to_string(i) + "}";
    const size_t at = out.find(token);
    if (at == std::string::npos) continue;
    if (i >= ids.size()) return std::nullopt;  // the plugin did not report that number
    out.replace(at, token.size(), std::to_string(ids[i]));
  }
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

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

}  // namespace

std::vector<PreflightCheck> RunPreflight(const NodeSession& session,
                                         const PreflightOptions& options) {
  std::vector<PreflightCheck> checks;
  for (const PluginReport& p : session.report.plugins) {
    if (!p.enabled) continue;
    const auto facts = std::find_if(Facts().begin(), Facts().end(),
                                    [&](const VendorFacts& f) { return f.manufacturer == p.name; });

    // 1. The plugin loads and its management library answers.
    PreflightCheck library{p.name, "management library", CheckResult::kPass, "", ""};
    size_t cards = 0;
    for (const auto& g : p.groups) cards += g.accelerators.size();
    if (!p.load_error.empty()) {
      library.result = CheckResult::kFail;
      library.detail = p.load_error;
      library.fix = "reinstall the plugin or fix the file named";
    } else if (p.discovery_status != "OK") {
      library.result = CheckResult::kFail;
      library.detail = p.discovery_status + ": " + p.discovery_message;
      library.fix = facts != Facts().end() ? facts->driver_hint : "see the message";
    } else if (cards == 0) {
      library.result = CheckResult::kFail;
      library.detail = "loaded, but it reports no device although " + p.decision;
      library.fix = "check that the driver is bound to the devices (dmesg)";
    } else {
      library.detail = "loaded; " + std::to_string(cards) + " accelerator(s)";
    }
    checks.push_back(library);
    if (facts == Facts().end()) continue;  // a third-party plugin: nothing more is known

    // 2. The device nodes containers will be given.
    if (cards > 0) {
      std::vector<std::string> missing;
      std::vector<std::string> wanted = facts->shared_nodes;
      for (const auto& g : p.groups) {
        for (const auto& a : g.accelerators) {
          for (const std::string& pattern : facts->card_nodes) {
            if (auto node = Format(pattern, a.physical_indexes)) wanted.push_back(*node);
          }
        }
      }
      std::error_code ec;
      for (const std::string& node : wanted) {
        if (!std::filesystem::exists(std::filesystem::path(options.dev_root) / node, ec)) {
          missing.push_back(options.dev_root + "/" + node);
        }
      }
      PreflightCheck nodes{p.name, "device nodes", CheckResult::kPass, "", ""};
      if (missing.empty()) {
        nodes.detail = std::to_string(wanted.size()) + " present under " + options.dev_root;
      } else {
        nodes.result = CheckResult::kFail;
        nodes.detail = "missing: ";
        for (size_t i = 0; i < missing.size(); ++i) nodes.detail += (i ? ", " : "") + missing[i];
        nodes.fix = facts->driver_hint + "; the kernel module creates these nodes";
      }
      checks.push_back(nodes);
    }

    // 3. The container runtime the manufacturer needs (reference §3.1).
    if (!facts->runtime.empty()) {
      PreflightCheck runtime{p.name, "container runtime", CheckResult::kPass, "", ""};
      const std::string config = ReadAll(options.containerd_config);
      const std::string section = "runtimes." + facts->runtime + "]";
      const std::string quoted = "runtimes.\"" + facts->runtime + "\"]";
      if (config.empty()) {
        runtime.result = CheckResult::kWarn;
        runtime.detail = options.containerd_config + " not readable; cannot tell whether the \"" +
                         facts->runtime + "\" handler exists (" + facts->runtime_reason + ")";
        runtime.fix = "make sure containerd has a \"" + facts->runtime +
                      "\" runtime handler, for RuntimeClass " + facts->runtime;
      } else if (config.find(section) == std::string::npos &&
                 config.find(quoted) == std::string::npos) {
        runtime.result = CheckResult::kFail;
        runtime.detail = "no \"" + facts->runtime + "\" runtime in " + options.containerd_config +
                         " (" + facts->runtime_reason + ")";
        runtime.fix =
            "install the vendor's container toolkit and register its runtime with "
            "containerd as \"" +
            facts->runtime + "\", then restart containerd";
      } else {
        runtime.detail = "containerd has the \"" + facts->runtime + "\" runtime";
      }
      checks.push_back(runtime);
    }

    // 4. Partition mode, where the manufacturer partitions.
    if (p.identity && (p.identity->capabilities & GPUSTACK_CAP_PARTITIONING) != 0 && cards > 0) {
      size_t enabled = 0, pending = 0, unsupported = 0;
      for (const auto& g : p.groups) {
        for (const auto& a : g.accelerators) {
          enabled += a.partition_mode == GPUSTACK_PARTITION_MODE_ENABLED;
          pending += a.partition_mode == GPUSTACK_PARTITION_MODE_PENDING;
          unsupported += a.partition_mode == GPUSTACK_PARTITION_MODE_UNSUPPORTED;
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
            "reset those cards (or reboot) to apply the pending mode, then restart the "
            "device manager";
      }
      checks.push_back(mode);
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
    std::snprintf(line, sizeof line, "%-10s %-19s %-6s ", c.manufacturer.c_str(), c.check.c_str(),
                  ResultName(c.result));
    out << line << c.detail << "\n";
    if (!c.fix.empty()) out << std::string(38, ' ') << "fix: " << c.fix << "\n";
  }
  if (checks.empty()) out << "no plugin is enabled on this node: nothing to check\n";
  out << (AllPassed(checks) ? "\nPreflight passed.\n"
                            : "\nPreflight FAILED: fix the items above.\n");
  return out.str();
}

}  // namespace gpustack::device_manager
