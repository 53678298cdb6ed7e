#include "host/cdi/cdi.h"

#include <yaml-cpp/yaml.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cctype>
#include <charconv>

#include "host/common/files.h"
#include "host/common/logging.h"

namespace gpustack::cdi {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxSpecBytes = 1 << 20;
constexpr size_t kMaxSpecFiles = 256;

// "containerd://1.7.24" -> (1, 7); "containerd://v2.1.0" -> (2, 1); nullopt when unreadable.
std::optional<std::pair<int, int>> VersionAfter(std::string_view text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return std::nullopt;
  text.remove_prefix(prefix.size());
  if (!text.empty() && text.front() == 'v') text.remove_prefix(1);
  int major = 0, minor = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), major);
  if (ec != std::errc{} || end == text.data() || end == text.data() + text.size() || *end != '.')
    return std::nullopt;
  const char* minor_begin = end + 1;
  auto [minor_end, minor_ec] = std::from_chars(minor_begin, text.data() + text.size(), minor);
  if (minor_ec != std::errc{} || minor_end == minor_begin) return std::nullopt;
  return std::make_pair(major, minor);
}

// Why the engine's version alone rules CDI out; nullopt when it does not (containerd 1.7 and
// later then depend on their config).
std::optional<std::string> VersionRulesOut(const Engine& engine) {
  const std::string& v = engine.runtime_version;
  if (v.starts_with("cri-o://")) return std::nullopt;  // CDI since CRI-O 1.23, always on
  auto containerd = VersionAfter(v, "containerd://");
  if (!containerd) {
    return "the container engine \"" + v + "\" is not one whose CDI support is known";
  }
  const auto [major, minor] = *containerd;
  if (major < 1 || (major == 1 && minor < 7)) {
    return "containerd " + std::to_string(major) + "." + std::to_string(minor) + " has no CDI";
  }
  return std::nullopt;
}

}  // namespace

Result<Strategy> ParseStrategy(std::string_view text) {
  if (text.empty() || text == "envvar") return Strategy::kEnvvar;
  if (text == "cdi-annotations") return Strategy::kCdiAnnotations;
  if (text == "auto") return Strategy::kAuto;
  return Error{"device injection strategy \"" + std::string(text) +
                   "\" is none of envvar, cdi-annotations, auto",
               Code::kInvalidArgument};
}

std::string_view StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kEnvvar:
      return "envvar";
    case Strategy::kCdiAnnotations:
      return "cdi-annotations";
    case Strategy::kAuto:
      return "auto";
  }
  return "envvar";
}

std::string StrategyVariable(const std::string& manufacturer) {
  std::string name = "GPUSTACK_";
  for (char c : manufacturer)
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name + "_DEVICE_INJECTION_STRATEGY";
}

void ReadContainerdConfig(std::string_view toml_text, Engine& engine) {
  toml::table root;
  try {
    root = toml::parse(toml_text);
  } catch (const toml::parse_error& e) {
    engine.config_read = false;
    engine.config_problem = "containerd's config is not valid TOML at line " +
                            std::to_string(e.source().begin.line) + ": " +
                            std::string(e.description());
    return;
  }
  engine.config_read = true;
  engine.default_runtime = "runc";
  // containerd 2.x keeps the runtime part of CRI in its own plugin; 1.x in the one CRI plugin.
  for (const char* plugin : {"io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime"}) {
    const toml::node_view cri = root["plugins"][plugin];
    if (auto enable = cri["enable_cdi"].value<bool>()) engine.enable_cdi = *enable;
    if (auto name = cri["containerd"]["default_runtime_name"].value<std::string>())
      engine.default_runtime = *name;
  }
}

void ReadContainerdConfigDir(const fs::path& dir, Engine& engine) {
  const fs::path path = dir / "config.toml";
  auto text = ReadSmallFile(path, kMaxSpecBytes, "containerd config");
  if (!text) {
    engine.config_read = false;
    engine.config_problem = "containerd's config " + path.string() +
                            " cannot be read: " + text.error() +
                            " (GPUSTACK_CONTAINERD_CONFIG_DIR names its directory)";
    return;
  }
  ReadContainerdConfig(*text, engine);
}

void ReadSpec(std::string_view text, const std::string& source, Specs& specs) {
  try {
    // JSON is YAML: one parser serves both spec formats.
    const YAML::Node spec = YAML::Load(std::string(text));
    const std::string kind = spec["kind"] ? spec["kind"].as<std::string>() : "";
    if (kind.find('/') == std::string::npos) {
      specs.problems.push_back(source + ": no kind of the form vendor/class");
      return;
    }
    if (!spec["devices"] || !spec["devices"].IsSequence()) {
      specs.problems.push_back(source + ": no devices");
      return;
    }
    for (const YAML::Node& device : spec["devices"]) {
      if (device["name"]) specs.devices.insert(kind + "=" + device["name"].as<std::string>());
    }
  } catch (const YAML::Exception& e) {
    specs.problems.push_back(source + ": " + e.what());
  }
}

Specs ReadSpecs(const std::vector<fs::path>& dirs) {
  Specs specs;
  size_t files = 0;
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string ext = it->path().extension().string();
      if (ext != ".json" && ext != ".yaml" && ext != ".yml") continue;
      if (++files > kMaxSpecFiles) {
        specs.problems.push_back("more than " + std::to_string(kMaxSpecFiles) +
                                 " CDI specs: the rest are not read");
        return specs;
      }
      auto text = ReadSmallFile(it->path(), kMaxSpecBytes, "CDI spec");
      if (!text) {
        specs.problems.push_back(text.error());
        continue;
      }
      ReadSpec(*text, it->path().string(), specs);
    }
  }
  return specs;
}

Decision Decide(Strategy wanted, const Grant& grant, const Engine& engine, const Specs& specs) {
  if (wanted == Strategy::kEnvvar) return {Strategy::kEnvvar, "the strategy is envvar"};
  if (grant.partition) {
    return {Strategy::kEnvvar, "a partition is always named in the visible-devices variable"};
  }
  if (wanted == Strategy::kCdiAnnotations)
    return {Strategy::kCdiAnnotations, "the strategy is cdi-annotations"};
  if (grant.pod_names_runtime_class) {
    return {Strategy::kEnvvar, "the Pod names a RuntimeClass, whose runtime reads the variable"};
  }
  if (auto ruled_out = VersionRulesOut(engine)) return {Strategy::kEnvvar, *ruled_out};
  if (engine.runtime_version.starts_with("containerd://")) {
    if (!engine.config_read) return {Strategy::kEnvvar, engine.config_problem};
    if (!grant.vendor_runtime.empty() && engine.default_runtime == grant.vendor_runtime) {
      return {Strategy::kEnvvar, "containerd's default runtime is " + grant.vendor_runtime +
                                     ", which reads the variable"};
    }
    const bool one_seven = engine.runtime_version.starts_with("containerd://1.") ||
                           engine.runtime_version.starts_with("containerd://v1.");
    if (one_seven && engine.enable_cdi != true) {
      return {Strategy::kEnvvar,
              "containerd 1.7 injects CDI devices only with enable_cdi = true in its CRI plugin"};
    }
    if (engine.enable_cdi == false)
      return {Strategy::kEnvvar, "containerd's config sets enable_cdi = false"};
  }
  for (const std::string& card : grant.cards) {
    if (specs.devices.count(grant.kind + "=" + card) == 0) {
      return {Strategy::kEnvvar,
              "no CDI spec in /etc/cdi or /var/run/cdi names " + grant.kind + "=" + card};
    }
  }
  return {Strategy::kCdiAnnotations,
          "the engine injects CDI devices and the specs name every granted card"};
}

std::string AnnotationKey(const std::string& manufacturer) {
  return "cdi.k8s.io/gpustack-" + manufacturer;
}

std::string AnnotationValue(const Grant& grant) {
  std::string value;
  for (const std::string& card : grant.cards)
    value += (value.empty() ? "" : ",") + grant.kind + "=" + card;
  return value;
}

Injector::Injector(std::map<std::string, Strategy> strategies, Engine engine,
                   std::vector<fs::path> spec_dirs)
    : strategies_(std::move(strategies)),
      engine_(std::move(engine)),
      spec_dirs_(std::move(spec_dirs)) {}

Result<std::map<std::string, Strategy>> Injector::StrategiesFromEnv(
    const std::vector<std::string>& manufacturers,
    const std::function<std::string(const std::string&)>& env) {
  std::map<std::string, Strategy> out;
  for (const std::string& m : manufacturers) {
    const std::string variable = StrategyVariable(m);
    auto strategy = ParseStrategy(env(variable));
    if (!strategy) return Error{variable + ": " + strategy.error(), Code::kInvalidArgument};
    out[m] = *strategy;
  }
  return out;
}

Injector::Outcome Injector::ForGrant(const std::string& manufacturer, const Grant& grant) {
  auto it = strategies_.find(manufacturer);
  const Strategy wanted = it == strategies_.end() ? Strategy::kEnvvar : it->second;
  Outcome out;
  if (wanted == Strategy::kEnvvar) {
    out.decision = {Strategy::kEnvvar, "the strategy is envvar"};
    return out;  // the default: nothing to read, nothing to say
  }
  Specs specs;
  if (wanted == Strategy::kAuto && !grant.partition) specs = ReadSpecs(spec_dirs_);
  out.decision = Decide(wanted, grant, engine_, specs);
  if (out.decision.strategy == Strategy::kCdiAnnotations)
    out.annotation = std::make_pair(AnnotationKey(manufacturer), AnnotationValue(grant));
  std::lock_guard lock(mutex_);
  if (said_[manufacturer] != out.decision.reason) {
    said_[manufacturer] = out.decision.reason;
    Logger("injection")
        ->info("{}: cards reach containers through {}: {} ({}={}){}", manufacturer,
               out.decision.strategy == Strategy::kCdiAnnotations ? "CDI annotations"
                                                                  : "the visible-devices variable",
               out.decision.reason, StrategyVariable(manufacturer), StrategyName(wanted),
               specs.problems.empty() ? "" : "; specs skipped: " + specs.problems.front());
  }
  return out;
}

}  // namespace gpustack::cdi
