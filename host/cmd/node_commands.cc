// `device-manager detect | monitor | preflight | serve`: the flags every node command shares, and
// each command's own.
#include <malloc.h>

#include <cctype>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "host/cmd/command.h"
#include "host/common/json_path.h"
#include "host/common/process_stop.h"
#include "host/common/text.h"
#include "host/common/yaml.h"
#include "host/device_manager/detect.h"
#include "host/device_manager/detect_report.h"
#include "host/device_manager/monitor.h"
#include "host/device_manager/preflight.h"
#include "host/node/daemon.h"
#include "host/runtime/node_config.h"

namespace gpustack::cmd {
namespace {

namespace dm = device_manager;

// Vendor libraries name devices; a name that is not valid UTF-8 must not abort the output.
constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

// The flags every device-manager command shares: where plugins are, which run, which node (real
// or fixture) they look at, and how the runtime guards them.
struct NodeFlags {
  dm::NodeOptions options;
  std::string class_prefixes = "02,03,0b,12";
  double hook_timeout_seconds = 30;
  std::string state_dir = "/var/lib/gpustack/device-manager";

  void AddTo(CLI::App* command) {
    dm::NodeOptions& o = options;
    command->add_option("--plugin-dir", o.plugin_dirs,
                        "Extra plugin directory, searched before GPUSTACK_PLUGIN_PATH and the "
                        "default (repeatable)");
    command->add_option("--enable", o.enable_flag,
                        "Force plugins on or off: nvidia=on,amd=off (* for every plugin)");
    command->add_option("--node-config", o.node_config_path, "Node config file (JSON)")
        ->envname("GPUSTACK_NODE_CONFIG");
    command->add_option("--sysfs-root", o.pci.sysfs_root, "Root of the sysfs tree to scan")
        ->envname("GPUSTACK_SYSFS_ROOT")
        ->capture_default_str();
    command->add_option("--pci-classes", class_prefixes, "PCI base classes to scan")
        ->envname("GPUSTACK_RUNTIME_DETECT_PCI_CLASS_PREFIXES")
        ->capture_default_str();
    command->add_option("--node-name", o.node_name, "Node name (default: the host name)")
        ->envname("NODE_NAME");
    command
        ->add_option("--state-dir", state_dir,
                     "Where crashes are recorded and crashed plugins quarantined (empty: nowhere)")
        ->envname("GPUSTACK_STATE_DIR")
        ->capture_default_str();
    command
        ->add_option("--hook-timeout", hook_timeout_seconds,
                     "Seconds a plugin hook may run before the plugin is marked hung")
        ->envname("GPUSTACK_HOOK_TIMEOUT")
        ->check(CLI::Range(0.001, 86400.0))
        ->capture_default_str();
  }

  // Finishes the options after parsing; false (with the message printed) on bad input.
  bool Resolve() {
    options.plugin_path_env = Env("GPUSTACK_PLUGIN_PATH");
    options.enable_env = Env("GPUSTACK_PLUGIN_ENABLE");
    options.env = Env;
    options.state_dir = state_dir;
    options.hook_deadline = Milliseconds(hook_timeout_seconds);
    auto prefixes = pci::ParseClassPrefixes(class_prefixes);
    if (!prefixes) {
      std::cerr << "error: " << prefixes.error() << "\n";
      return false;
    }
    options.pci.class_prefixes = *prefixes;
    return true;
  }
};

// What went wrong, on stderr, whatever stdout's format: stdout stays machine-readable.
void ReportProblems(const runtime::NodeReport& report) {
  for (const runtime::SourceProblem& p : report.problems) {
    std::cerr << (p.fatal ? "error: " : "warning: ") << Printable(p.message) << "\n";
  }
  for (const runtime::PluginStatus& p : report.plugins) {
    const std::string name = p.name.empty() ? p.origin : p.name;
    if (p.error && (p.enabled || p.state == runtime::PluginState::kRefused)) {
      std::cerr << "error: plugin " << Printable(name) << " " << runtime::StateName(p.state) << ": "
                << Printable(p.error->message) << "\n";
    }
    if (p.discovery_error) {
      std::cerr << "error: " << Printable(p.discovery_error->message) << "\n";
    }
    for (const std::string& w : p.warnings) std::cerr << "warning: " << Printable(w) << "\n";
    for (const std::string& f : p.faults) std::cerr << "error: " << Printable(f) << "\n";
  }
  if (!report.spec) std::cerr << "error: " << Printable(report.spec.error()) << "\n";
}

// True when everything written to stdout reached it. A report that could not be written (a closed
// pipe, a full disk, or a plugin that closed the descriptor) must not end in status 0.
bool FlushedStdout() {
  std::cout.flush();
  if (std::cout.good() && std::fflush(stdout) == 0 && std::ferror(stdout) == 0) return true;
  std::cerr << "error: cannot write the output to stdout\n";
  return false;
}

// The node's runtime after one discovery pass; nullptr (the reason printed) on bad input.
std::unique_ptr<runtime::NodeRuntime> OpenAndDiscover(NodeFlags& flags) {
  if (!flags.Resolve()) return nullptr;
  auto node = dm::OpenNode(flags.options);
  if (!node) {
    std::cerr << "error: " << Printable(node.error()) << "\n";
    return nullptr;
  }
  (*node)->Discover();
  return std::move(*node);
}

// Env switches of docs/behaviour.md §10.2 that default to true: anything but false/0/no/off keeps
// them on.
bool EnvSwitch(const std::string& name, bool fallback) {
  std::string value = Env(name);
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value.empty()) return fallback;
  return !(value == "false" || value == "0" || value == "no" || value == "off");
}

struct DetectCommand {
  NodeFlags node;
  dm::DetectOptions options;
  std::string output = "yaml";

  int Run() {
    if (!node.Resolve()) return Finish(kBadInput);
    options.node = node.options;
    auto report = dm::Detect(options);
    if (!report) {
      std::cerr << "error: " << Printable(report.error()) << "\n";
      return Finish(kBadInput);
    }
    if (output == "json") {
      std::cout << dm::ToJson(*report).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
    } else if (output == "yaml") {
      std::cout << ToYaml(dm::ToJson(*report));
    } else {
      std::cout << dm::ToText(*report);
    }
    const bool written = FlushedStdout();
    ReportProblems(report->node);
    return Finish(report->ok() && written ? 0 : 1);
  }
};

struct MonitorCommand {
  static constexpr double kShortestInterval = 0.01;  // seconds: 100 rounds a second at most
  NodeFlags node;
  std::string output = "text";
  double interval = 0;
  int count = 0;
  bool processes = false;

  int Run() {
    // NaN passes range checks in some CLI11 versions: refuse it here too.
    if (!std::isfinite(interval)) {
      std::cerr << "error: --interval must be a finite number of seconds\n";
      return kBadInput;
    }
    // A floor: an interval near zero would only busy-loop the plugins and flood the output.
    if (interval != 0 && interval < kShortestInterval) {
      std::cerr << "error: --interval must be 0 (one round) or at least " << kShortestInterval
                << " s, not " << interval << "\n";
      return kBadInput;
    }
    if (interval == 0 && count == 0) count = 1;  // no interval: one round
    const int status = Sample();
    // Ctrl-C is how a continuous monitor ends: not a failure.
    return count == 0 && ReceivedSignal() == SIGINT ? status : Finish(status);
  }

  int Sample() {
    auto runtime = OpenAndDiscover(node);
    if (runtime == nullptr) return kBadInput;
    const runtime::NodeReport report = runtime->Report();
    bool failed = !report.ok();
    ReportProblems(report);
    for (int round = 0; !StopRequested() && (count == 0 || round < count); ++round) {
      if (round > 0 && !Wait()) break;
      const dm::MonitorRound sample = dm::SampleRound(*runtime, processes);
      // An implausible figure (left unmeasured) is a fault of the plugin or its library too.
      failed = failed || !sample.samples.errors.empty() || !sample.samples.warnings.empty();
      if (!Print(sample)) return 1;
    }
    return failed ? 1 : 0;
  }

  // Sleeps the interval, or less when Ctrl-C stops it; false when it did.
  bool Wait() const {
    return SleepUnlessStopped(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(interval)));
  }

  // False when stdout no longer takes the output.
  bool Print(const dm::MonitorRound& sample) const {
    if (output == "json") {
      std::cout << dm::ToJson(sample).dump(-1, ' ', false, kReplaceInvalidUtf8) << "\n";
    } else if (output == "yaml") {
      std::cout << "---\n" << ToYaml(dm::ToJson(sample));
    } else {
      std::cout << dm::ToText(sample) << "\n";
    }
    const bool written = FlushedStdout();
    if (output != "text") {  // text shows them in the table already
      for (const std::string& e : sample.samples.errors)
        std::cerr << "error: " << Printable(e) << "\n";
    }
    return written;
  }
};

struct PreflightCommand {
  NodeFlags node;
  dm::PreflightOptions options;
  std::string output = "text";

  int Run() {
    auto runtime = OpenAndDiscover(node);
    if (runtime == nullptr) return Finish(kBadInput);
    const auto checks = dm::RunPreflight(*runtime, options);
    if (output == "json") {
      std::cout << dm::ToJson(checks).dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
    } else {
      std::cout << dm::ToText(checks);
    }
    const bool written = FlushedStdout();
    if (!dm::AllPassed(checks))
      std::cerr << "error: preflight failed: see the checks marked FAIL\n";
    return Finish(dm::AllPassed(checks) && written ? 0 : 1);
  }
};

struct ServeCommand {
  NodeFlags node;
  node::DaemonOptions options;
  bool no_shared = false, no_sliced = false, no_partitioned = false;
  double discover_period = 60, reconcile_period = 300, monitor_period = 15;
  std::string plugin_dir = options.kubelet.device_plugin_dir.string();
  std::string pod_resources = options.pod_resources_socket.string();
  std::string proc_root = options.proc_root.string();
  std::string data_dir = options.enforcement.data_dir.string();
  std::string host_data_dir;  // empty: the same as data_dir
  bool dra = false;
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string cdi_dir = "/var/run/cdi";
  int secure_port = 32443;
  std::string cert_dir;

  int Run() { return FinishDaemon(Serve()); }

  int Serve() {
    // One malloc arena: the daemon allocates little, and rarely from two threads at once; each
    // further arena keeps its own resident pages (0.3 MB less at rest, docs/footprint.md).
    mallopt(M_ARENA_MAX, 1);
    if (Status resolved = Resolve(); !resolved) {
      std::cerr << "error: " << resolved.error() << "\n";
      return kBadInput;
    }
    if (!node.Resolve()) return kBadInput;
    if (int locked = LockThisNode(); locked != 0) return locked;
    auto client = ConnectToKubernetes();
    if (!client) return kBadInput;
    // The Node's plugins.gpustack.ai/<name> labels turn plugins on or off here; a change to them
    // later restarts the daemon (RunDaemon), which then reads them again.
    auto node_object = client->Get(kube::resources::Nodes(), "", options.node_name);
    if (!node_object) {
      std::cerr << "error: cannot read node " << options.node_name << ": "
                << Printable(node_object.error()) << "\n";
      return 1;
    }
    const auto labels = node::PluginLabelsOf(*node_object);
    options.plugin_labels = labels;
    // The engine that CDI injection depends on (docs/behaviour.md §6.3).
    options.engine.runtime_version =
        StringAt(*node_object, {"status", "nodeInfo", "containerRuntimeVersion"});
    const std::string containerd_dir = Env("GPUSTACK_CONTAINERD_CONFIG_DIR");
    cdi::ReadContainerdConfigDir(containerd_dir.empty() ? "/etc/containerd" : containerd_dir,
                                 options.engine);
    const auto from_labels = runtime::EnableOverridesFromLabels(labels);
    for (const std::string& problem : from_labels.problems)
      std::cerr << "warning: " << problem << "\n";
    node.options.label_overrides = from_labels.overrides;
    auto runtime = dm::OpenNode(node.options);
    if (!runtime) {
      std::cerr << "error: " << Printable(runtime.error()) << "\n";
      return kBadInput;
    }
    ReportProblems((*runtime)->Report());
    std::vector<std::string> manufacturers;
    for (const runtime::PluginIdentity& id : (*runtime)->RunningIdentities())
      manufacturers.push_back(id.manufacturer);
    auto strategies = cdi::Injector::StrategiesFromEnv(manufacturers, Env);
    if (!strategies) {
      std::cerr << "error: " << Printable(strategies.error()) << "\n";
      return kBadInput;
    }
    options.injection = *strategies;
    return node::RunDaemon(**runtime, *client, options, ProcessStopToken());
  }

  // The daemon's options from the flags and the environment.
  Status Resolve() {
    options.modes = {!no_shared, !no_sliced, !no_partitioned};
    options.kubelet.device_plugin_dir = plugin_dir;
    options.pod_resources_socket = pod_resources;
    options.discover_period = Milliseconds(discover_period);
    options.reconcile_period = Milliseconds(reconcile_period);
    options.monitor_period = Milliseconds(monitor_period);
    options.proc_root = proc_root;
    options.enforcement.proc_root = proc_root;
    options.enforcement.data_dir = data_dir;
    options.enforcement.host_data_dir = host_data_dir.empty() ? data_dir : host_data_dir;
    if (!options.enforcement.data_dir.is_absolute() ||
        !options.enforcement.host_data_dir.is_absolute()) {
      return Error{"--data-dir and --host-data-dir must be absolute paths"};
    }
    options.dra = dra;
    if (dra) {
      if (node.state_dir.empty()) {
        return Error{"--dra keeps its record of prepared claims in --state-dir, which is empty"};
      }
      options.dra_options.plugins_dir = std::filesystem::path(kubelet_dir) / "plugins";
      options.dra_options.registry_dir = std::filesystem::path(kubelet_dir) / "plugins_registry";
      options.dra_options.cdi_dir = cdi_dir;
      options.dra_options.record = std::filesystem::path(node.state_dir) / "dra-claims.json";
    }
    options.serve_https = secure_port != 0;
    options.exporter.server.port = static_cast<uint16_t>(secure_port);
    options.exporter.cert_dir = cert_dir;
    options.node_name = node.options.node_name;
    if (options.node_name.empty()) options.node_name = Env("KUBERNETES_NODE_NAME");
    if (options.node_name.empty()) options.node_name = Env("NODE_NAME");
    if (options.node_name.empty())
      return Error{"serve needs the node's name: --node-name or KUBERNETES_NODE_NAME"};
    node.options.node_name = options.node_name;
    // The upstream operator's "gate off" clamps a card's remaining credits at 0, which over-admits
    // it.
    if (!EnvSwitch("GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE", true)) {
      std::cerr << "warning: GPUSTACK_DEVICE_PLUGIN_SLICED_ALLOCATE_GATE=false is not supported: "
                   "a slice that does not fit its card is always refused\n";
    }
    options.allocator.identify_by_kubelet =
        EnvSwitch("GPUSTACK_DEVICE_PLUGIN_IDENTIFY_BY_KUBELET", true);
    options.allocator.release_terminated =
        EnvSwitch("GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS", true);
    return Ok{};
  }

  // One daemon per node: the state directory's lock and the kubelet directory's. 0 when held.
  int LockThisNode() {
    if (!node.state_dir.empty()) {
      auto lock = node::LockNode(std::filesystem::path(node.state_dir) / "serve.lock");
      if (!lock) {
        std::cerr << "error: " << Printable(lock.error()) << "\n";
        return 1;
      }
    }
    if (auto lock = node::LockDirectory(options.kubelet.device_plugin_dir); !lock) {
      std::cerr << "error: " << Printable(lock.error()) << "\n";
      return lock.code() == Code::kAlreadyExists ? 1 : kBadInput;
    }
    return 0;
  }
};

}  // namespace

Command AddDetect(CLI::App& device_manager) {
  auto c = std::make_shared<DetectCommand>();
  CLI::App* detect = device_manager.add_subcommand(
      "detect", "Print this node's Devices spec, node profile and which plugins run and why");
  c->node.AddTo(detect);
  detect->add_option("--proc-root", c->options.proc_root, "Root of the /proc tree (node profile)")
      ->envname("GPUSTACK_PROC_ROOT")
      ->capture_default_str();
  detect->add_option("--data-dir", c->options.data_dir, "Data directory whose disk is profiled")
      ->envname("GPUSTACK_DATA_DIR")
      ->capture_default_str();
  detect
      ->add_flag("--group-id-with-memory", c->node.options.spec.group_id_with_memory,
                 "Append the card's memory to group ids (tesla-t4-16g)")
      ->envname("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY");
  detect
      ->add_option("-o,--output", c->output,
                   "yaml or json (the Devices object, node profile and plugin decisions), or "
                   "text (a summary)")
      ->check(CLI::IsMember({"yaml", "json", "text"}))
      ->capture_default_str();
  return {detect, [c] { return c->Run(); }};
}

Command AddMonitor(CLI::App& device_manager) {
  auto c = std::make_shared<MonitorCommand>();
  CLI::App* monitor = device_manager.add_subcommand(
      "monitor", "Sample every accelerator: memory, utilization, temperature, power, health");
  c->node.AddTo(monitor);
  monitor
      ->add_option("-i,--interval", c->interval,
                   "Seconds between rounds (at least 0.01); 0 samples once")
      ->check(CLI::Range(0.0, 86400.0))  // also refuses nan and inf
      ->capture_default_str();
  monitor->add_option("-c,--count", c->count, "Rounds to take (0: until interrupted)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  monitor->add_flag("--processes", c->processes, "Also sample per-process usage");
  monitor->add_option("-o,--output", c->output, "text, json (a line per round) or yaml")
      ->check(CLI::IsMember({"yaml", "json", "text"}))
      ->capture_default_str();
  return {monitor, [c] { return c->Run(); }};
}

Command AddPreflight(CLI::App& device_manager) {
  auto c = std::make_shared<PreflightCommand>();
  CLI::App* preflight = device_manager.add_subcommand(
      "preflight", "Check what each enabled manufacturer needs on this node, and say what to fix");
  c->node.AddTo(preflight);
  preflight->add_option("--dev-root", c->options.dev_root, "Where device nodes live")
      ->envname("GPUSTACK_DEV_ROOT")
      ->capture_default_str();
  preflight
      ->add_option("--containerd-config", c->options.containerd_config,
                   "containerd's configuration, for runtime handlers")
      ->capture_default_str();
  preflight->add_option("-o,--output", c->output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return {preflight, [c] { return c->Run(); }};
}

Command AddServe(CLI::App& device_manager) {
  auto c = std::make_shared<ServeCommand>();
  CLI::App* serve = device_manager.add_subcommand(
      "serve", "Run the node daemon: serve the kubelet, allocate, publish the node's Devices");
  c->node.AddTo(serve);
  serve->add_flag("--no-shared", c->no_shared, "Do not serve <base>.shared");
  serve->add_flag("--no-sliced", c->no_sliced, "Do not serve <base>.sliced");
  serve->add_flag("--no-partitioned", c->no_partitioned, "Do not serve <base>.partitioned");
  serve
      ->add_option("--device-plugin-dir", c->plugin_dir,
                   "The kubelet's device-plugin directory (its kubelet.sock and our sockets)")
      ->envname("GPUSTACK_DEVICE_PLUGIN_DIR")
      ->capture_default_str();
  serve
      ->add_option("--pod-resources-socket", c->pod_resources,
                   "The kubelet's pod-resources socket (empty: identify Pods from the apiserver "
                   "only)")
      ->envname("GPUSTACK_POD_RESOURCES_SOCKET")
      ->capture_default_str();
  serve
      ->add_flag("--dra", c->dra,
                 "Also serve the kubelet as DRA driver gpustack.ai: ResourceSlices of the whole "
                 "cards, ResourceClaims prepared on the same ledger (docs/dra.md)")
      ->envname("GPUSTACK_DRA_DRIVER");
  serve
      ->add_option("--kubelet-dir", c->kubelet_dir,
                   "The kubelet's root directory: --dra's sockets go in its plugins/ and "
                   "plugins_registry/")
      ->envname("GPUSTACK_KUBELET_DIR")
      ->capture_default_str();
  serve
      ->add_option("--cdi-dir", c->cdi_dir,
                   "Where --dra writes the CDI specs of prepared claims (the container engine's "
                   "transient spec directory)")
      ->envname("GPUSTACK_CDI_DIR")
      ->capture_default_str();
  serve
      ->add_option("--secure-port", c->secure_port,
                   "HTTPS port of /metrics, /monitor/snapshot, /livez and /readyz (0: none)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve
      ->add_option("--cert-dir", c->cert_dir,
                   "Directory with tls.crt and tls.key for that port (empty: self-signed)")
      ->envname("GPUSTACK_CERT_DIR");
  serve->add_option("--monitor-period", c->monitor_period, "Seconds between utilisation samples")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  serve
      ->add_option("--proc-root", c->proc_root,
                   "The host's /proc, where the plugins' process ids are placed in their Pods "
                   "(the chart mounts it read-only at /host/proc)")
      ->envname("GPUSTACK_PROC_ROOT")
      ->capture_default_str();
  serve
      ->add_option("--data-dir", c->data_dir,
                   "Where slice enforcers are staged (operator/lib) and Pods' working directories "
                   "made (operator/pods)")
      ->envname("GPUSTACK_DATA_DIR")
      ->capture_default_str();
  serve->add_option("--host-data-dir", c->host_data_dir,
                    "The data directory's path on the host, where the kubelet mounts from "
                    "(default: --data-dir; differs when this runs in a container)");
  serve->add_option("--discover-period", c->discover_period, "Seconds between discovery passes")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  serve
      ->add_option("--reconcile-period", c->reconcile_period,
                   "Seconds between fresh lists of the node's Pods, behind the watch that releases "
                   "at once (30 s while a partition's destroy waits to be retried)")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  return {serve, [c] { return c->Run(); }};
}

}  // namespace gpustack::cmd
