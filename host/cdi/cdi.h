// How a card reaches a container (docs/behaviour.md §6.3, §10.2): through the plugin's
// visible-devices variable for the vendor runtime (`envvar`), or as CDI devices named in the
// annotation cdi.k8s.io/gpustack-<manufacturer> (`cdi-annotations`), which a CDI-capable
// container engine resolves against the specs in /etc/cdi and /var/run/cdi.
// GPUSTACK_<MFR>_DEVICE_INJECTION_STRATEGY chooses; `auto` takes CDI only where every rule
// below says it works, and says which rule kept the variable otherwise. The rules and the
// annotation are pure; reading containerd's config and the specs is the only I/O.
#ifndef GPUSTACK_HOST_CDI_CDI_H_
#define GPUSTACK_HOST_CDI_CDI_H_

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"

namespace gpustack::cdi {

enum class Strategy { kEnvvar, kCdiAnnotations, kAuto };
Result<Strategy> ParseStrategy(std::string_view text);  // "" is envvar, the default
std::string_view StrategyName(Strategy strategy);
// GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY for "nvidia".
std::string StrategyVariable(const std::string& manufacturer);

// What the node's container engine is and how it is set up.
struct Engine {
  std::string runtime_version{};  // the Node's status.nodeInfo.containerRuntimeVersion
  // containerd's config: read, or why not.
  bool config_read = false;
  std::string config_problem{};
  std::optional<bool> enable_cdi{};  // the CRI plugin's enable_cdi, when the config sets it
  std::string default_runtime{};     // the CRI plugin's default_runtime_name ("runc" when unset)
};

// Parses containerd's config.toml text into `engine` (enable_cdi, default_runtime_name under
// the CRI plugin of containerd 1.x, "io.containerd.grpc.v1.cri", or 2.x,
// "io.containerd.cri.v1.runtime").
void ReadContainerdConfig(std::string_view toml_text, Engine& engine);
// The same from <dir>/config.toml (GPUSTACK_CONTAINERD_CONFIG_DIR, default /etc/containerd).
void ReadContainerdConfigDir(const std::filesystem::path& dir, Engine& engine);

// The CDI devices the node's specs declare: "nvidia.com/gpu=GPU-...", by fully qualified name.
struct Specs {
  std::set<std::string> devices;
  std::vector<std::string> problems;  // files that could not be read: skipped
};
// Parses one spec (JSON or YAML) into `specs`.
void ReadSpec(std::string_view text, const std::string& source, Specs& specs);
// Every *.json, *.yaml and *.yml in `dirs` (missing directories are no problem).
Specs ReadSpecs(const std::vector<std::filesystem::path>& dirs);
inline const std::vector<std::filesystem::path>& DefaultSpecDirs() {
  static const std::vector<std::filesystem::path> dirs = {"/etc/cdi", "/var/run/cdi"};
  return dirs;
}

// One container's grant, as the rules need it.
struct Grant {
  std::string kind{};                // the CDI kind: the plugin's base resource ("nvidia.com/gpu")
  std::vector<std::string> cards{};  // the CDI device names: the cards' ids
  bool partition = false;
  bool pod_names_runtime_class = false;
  std::string vendor_runtime{};  // the plugin's runtime handler ("nvidia"); empty: none
};

struct Decision {
  Strategy strategy = Strategy::kEnvvar;  // kEnvvar or kCdiAnnotations
  std::string reason{};                   // why, in a sentence
};

// The channel for `grant`: `wanted` itself when it is envvar or cdi-annotations; under auto, CDI
// only when the Pod names no RuntimeClass, it is not a partition, containerd's config could be
// read, its default runtime is not the vendor's, the engine has CDI (containerd 1.6: never;
// 1.7: enable_cdi = true; 2.x: unless enable_cdi = false; CRI-O: yes) and the specs name every
// granted card. Pure.
Decision Decide(Strategy wanted, const Grant& grant, const Engine& engine, const Specs& specs);

// "cdi.k8s.io/gpustack-nvidia" and "nvidia.com/gpu=GPU-a,nvidia.com/gpu=GPU-b".
std::string AnnotationKey(const std::string& manufacturer);
std::string AnnotationValue(const Grant& grant);

// The node daemon's injection choices: each manufacturer's strategy (from its variable), the
// engine as read at start, the specs read again for each decision that needs them (they change
// when a driver is installed). Says each new reason once in the log.
class Injector {
 public:
  Injector(std::map<std::string, Strategy> strategies, Engine engine,
           std::vector<std::filesystem::path> spec_dirs = DefaultSpecDirs());

  // The strategies from GPUSTACK_<MFR>_DEVICE_INJECTION_STRATEGY for `manufacturers`, read
  // through `env`; an error naming the variable when one is malformed.
  static Result<std::map<std::string, Strategy>> StrategiesFromEnv(
      const std::vector<std::string>& manufacturers,
      const std::function<std::string(const std::string&)>& env);

  // The decision for `manufacturer`'s `grant`, and the annotation to add when it is CDI.
  struct Outcome {
    Decision decision;
    std::optional<std::pair<std::string, std::string>> annotation;  // key, value
  };
  Outcome ForGrant(const std::string& manufacturer, const Grant& grant);

 private:
  const std::map<std::string, Strategy> strategies_;
  const Engine engine_;
  const std::vector<std::filesystem::path> spec_dirs_;
  std::mutex mutex_;
  std::map<std::string, std::string> said_;  // manufacturer -> the last reason logged
};

}  // namespace gpustack::cdi

#endif  // GPUSTACK_HOST_CDI_CDI_H_
