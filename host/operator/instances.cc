#include "host/operator/instances.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include "host/kube/quantity.h"
#include "host/operator/admission.h"
#include "host/ledger/allocated.h"

namespace gpustack::op {
namespace {

constexpr int kSecretFileMode = 0600;  // sshd refuses keys others can read
constexpr int64_t kMebibyte = 1024 * 1024;

// An owner reference making `owner` (apiVersion, kind, name, uid) the controller of an object.
Json OwnerReference(const std::string& api_version, const std::string& kind, const Json& owner) {
  return {{"apiVersion", api_version},
          {"kind", kind},
          {"name", StringAt(owner, {"metadata", "name"})},
          {"uid", StringAt(owner, {"metadata", "uid"})},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

std::string EntranceOf(const Json& type) {
  std::string entrance = StringAt(type, {"status", "entrance"});
  return entrance.empty() ? EntranceName(StringAt(type, {"metadata", "name"})) : entrance;
}

// The labels the Pod and its Service carry (the Service selects the Pod by them).
Json InstanceLabels(const Json& instance, const Json& type) {
  return {{kQueueNameLabel, EntranceOf(type)},
          {kPartOfLabel, StringAt(instance, {"metadata", "uid"})},
          {kInstanceLabel, StringAt(instance, {"metadata", "name"})}};
}

// A container port's name when Kubernetes takes it (IANA service name: at most 15 lower-case
// letters, digits and inner dashes, with a letter); the CRD allows 16, the Pod would be refused.
bool IsPortName(const std::string& name) {
  if (name.empty() || name.size() > 15 || name.front() == '-' || name.back() == '-') return false;
  bool letter = false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (std::islower(static_cast<unsigned char>(c))) letter = true;
    else if (c == '-' && i > 0 && name[i - 1] == '-') return false;
    else if (!std::isdigit(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  return letter;
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The accelerator keys `main` carries (docs/behaviour.md §4.4) and the cards it holds (for the
// sidecar's visibility); the Pod webhook derives the .units keys from them, as for any Pod.
struct AcceleratorAsk {
  Json keys = Json::object();
  int64_t cards = 0;
};
Result<AcceleratorAsk> AcceleratorKeys(const Json& resources, const Manufacturer& vendor) {
  AcceleratorAsk ask;
  int64_t count = 1;
  if (resources.contains("accelerator")) {
    auto whole = kube::WholeOf(resources["accelerator"]);
    if (!whole || *whole < 1)
      return Error{"spec.resources.accelerator: not a whole number of cards: " +
                       resources["accelerator"].dump(),
                   Code::kInvalidArgument};
    count = *whole;
  }
  const std::string& base = vendor.base;
  const int64_t memory = resources.value("acceleratorSlicedMemoryPercentage", int64_t{0});
  const std::string profile = resources.value("acceleratorPartitionedProfile", "");
  if (!profile.empty()) {
    ask.keys[base + ".partitioned"] = "1";
    ask.keys[base + ".partitioned." + vendor.partition_kind + "-" + profile] = "1";
    ask.cards = 1;
  } else if (memory > 0) {
    const int64_t cores = resources.value("acceleratorSlicedCoresPercentage", int64_t{0});
    ask.keys[base + ".sliced"] = "1";
    ask.keys[base + ".sliced.memory-percentage"] = std::to_string(memory);
    ask.keys[base + ".sliced.cores-percentage"] = std::to_string(cores > 0 ? cores : 100);
    ask.cards = 1;
  } else {
    ask.keys[base] = std::to_string(count);
    ask.cards = count;
  }
  return ask;
}

// limits.{cpu,memory,ephemeral-storage} from the spec's cpu, ram and localStorage.
Result<Json> GeneralLimits(const Json& resources) {
  Json limits = Json::object();
  constexpr std::pair<const char*, const char*> kFields[] = {
      {"cpu", "cpu"}, {"ram", "memory"}, {"localStorage", "ephemeral-storage"}};
  for (const auto& [field, key] : kFields) {
    if (!resources.contains(field)) continue;
    if (!kube::MilliOf(resources[field]))
      return Error{std::string("spec.resources.") + field + ": not a quantity: " +
                       resources[field].dump(),
                   Code::kInvalidArgument};
    limits[key] = resources[field].is_string() ? resources[field]
                                               : Json(resources[field].dump());
  }
  return limits;
}

Json Volume(const std::string& name, const Json& source) {
  Json volume = {{"name", name}};
  if (source.contains("persistent")) {
    volume["persistentVolumeClaim"] = {{"claimName", StringAt(source, {"persistent", "name"})}};
  } else if (source.contains("configMap")) {
    volume["configMap"] = {{"name", StringAt(source, {"configMap", "name"})}};
  } else if (source.contains("secret")) {
    volume["secret"] = {{"secretName", StringAt(source, {"secret", "name"})}};
  } else if (source.contains("hostPath")) {
    volume["hostPath"] = {{"path", StringAt(source, {"hostPath", "path"})}};
  }
  return volume;
}

std::string VolumeMountOf(const Json& spec) {
  std::string mount = spec.value("volumeMount", "");
  return mount.empty() ? kDefaultVolumeMount : mount;
}

// The image-pull secrets: the Instance's own, then the settings' (for the built-in sidecar).
Json PullSecrets(const Json& spec, const Settings& settings) {
  std::vector<std::string> names;
  if (std::string own = StringAt(spec, {"imagePullSecret", "name"}); !own.empty())
    names.push_back(own);
  std::string list = settings.image_pull_secrets;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string name = list.substr(start, end - start);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
    start = end + 1;
  }
  Json out = Json::array();
  for (const std::string& n : names) out.push_back({{"name", n}});
  return out;
}

}  // namespace

std::string RewrittenImage(const std::string& image, const Settings& settings) {
  if (settings.container_registry.empty() && settings.container_namespace.empty()) return image;
  // [registry/]namespace/name[:tag]: a first part with a dot, a colon or "localhost" is a registry.
  std::string registry, rest = image;
  if (size_t slash = image.find('/'); slash != std::string::npos) {
    const std::string first = image.substr(0, slash);
    if (first.find_first_of(".:") != std::string::npos || first == "localhost") {
      registry = first;
      rest = image.substr(slash + 1);
    }
  }
  std::string ns, name = rest;
  if (size_t slash = rest.rfind('/'); slash != std::string::npos) {
    ns = rest.substr(0, slash);
    name = rest.substr(slash + 1);
  }
  if (!settings.container_registry.empty()) registry = settings.container_registry;
  if (!settings.container_namespace.empty()) ns = settings.container_namespace;
  std::string out = registry.empty() ? "" : registry + "/";
  if (!ns.empty()) out += ns + "/";
  return out + name;
}

Json ScaledRequests(const Json& limits, bool accelerated, bool overcommit) {
  Json requests = limits;
  if (!overcommit) return requests;
  auto floor = [&](const char* key, int64_t milli, auto format) {
    if (!limits.contains(key)) return;
    const int64_t limit = kube::MilliOf(limits[key]).value_or(0);
    if (milli < limit) requests[key] = format(milli);
  };
  floor("cpu", accelerated ? 100 : 800, [](int64_t m) { return kube::FormatMilli(m); });
  floor("memory", 128 * kMebibyte * 1000, [](int64_t m) { return kube::FormatBytes(m / 1000); });
  if (limits.contains("ephemeral-storage")) {
    const int64_t bytes = kube::MilliOf(limits["ephemeral-storage"]).value_or(0) / 1000;
    if (bytes / 8 > 0) requests["ephemeral-storage"] = std::to_string(bytes / 8);
  }
  return requests;
}

Result<Json> InstancePod(const Json& instance, const InstanceContext& context) {
  const Json& spec = JsonAt(instance, {"spec"});
  if (!spec.is_object()) return Error{"spec: Required value", Code::kInvalidArgument};
  if (context.type == nullptr)
    return Error{"spec.type: Not found: " + spec.value("type", ""), Code::kNotFound};
  const Json& type = *context.type;
  const Json resources = spec.value("resources", Json::object());
  const std::string name = StringAt(instance, {"metadata", "name"});
  const std::string mount = VolumeMountOf(spec);

  auto limits = GeneralLimits(resources);
  if (!limits) return limits.failure();
  const bool accelerated = context.vendor != nullptr;
  AcceleratorAsk cards;
  if (accelerated) {
    auto asked = AcceleratorKeys(resources, *context.vendor);
    if (!asked) return asked.failure();
    cards = std::move(*asked);
  }
  Json requests =
      ScaledRequests(*limits, accelerated, context.settings.instance_resources_overcommit);
  for (const auto& [key, value] : cards.keys.items()) {
    (*limits)[key] = value;
    requests[key] = value;  // extended resources: requests equal limits
  }

  Json volumes = Json::array();
  const Json& volume = JsonAt(spec, {"volume"});
  Json workspace = {{"name", "workspace"}};
  if (volume.contains("persistent")) {
    workspace["persistentVolumeClaim"] = {{"claimName", StringAt(volume, {"persistent", "name"})}};
  } else {
    workspace["emptyDir"] = Json::object();
    if (const Json& capacity = JsonAt(volume, {"ephemeral", "capacity"}); !capacity.is_null())
      workspace["emptyDir"]["sizeLimit"] = capacity.is_string() ? capacity : Json(capacity.dump());
  }
  volumes.push_back(workspace);
  Json mounts = Json::array({{{"name", "workspace"}, {"mountPath", mount}}});
  const Json& additional = JsonAt(spec, {"additionalVolumes"});
  if (additional.is_array()) {
    for (size_t i = 0; i < additional.size(); ++i) {
      const std::string volume_name = "volume-" + std::to_string(i);
      volumes.push_back(Volume(volume_name, additional[i]));
      Json m = {{"name", volume_name}, {"mountPath", additional[i].value("mountPath", "")}};
      if (additional[i].value("readOnly", false)) m["readOnly"] = true;
      if (std::string sub = additional[i].value("subPath", ""); !sub.empty()) m["subPath"] = sub;
      mounts.push_back(m);
    }
  }

  Json main = {{"name", kMainContainer},
               {"image", spec.value("image", "")},
               {"imagePullPolicy", spec.value("imagePullPolicy", "IfNotPresent")},
               {"securityContext", {{"runAsUser", 0}}},
               {"resources", {{"limits", *limits}, {"requests", requests}}},
               {"volumeMounts", mounts}};
  if (spec.value("privileged", false)) main["securityContext"]["privileged"] = true;
  if (const Json& command = JsonAt(spec, {"command"}); command.is_array() && !command.empty())
    main["command"] = command;
  if (const Json& env = JsonAt(spec, {"env"}); env.is_array() && !env.empty()) {
    main["env"] = Json::array();
    for (const Json& e : env)
      main["env"].push_back({{"name", e.value("name", "")}, {"value", e.value("value", "")}});
  }
  if (const Json& ports = JsonAt(spec, {"ports"}); ports.is_array() && !ports.empty()) {
    main["ports"] = Json::array();
    for (const Json& p : ports) {
      Json port = {{"containerPort", p.value("port", 0)},
                   {"protocol", p.value("protocol", "TCP")}};
      if (std::string port_name = p.value("name", ""); IsPortName(port_name))
        port["name"] = port_name;
      main["ports"].push_back(port);
    }
  }
  Json containers = Json::array({main});

  const std::string ssh_key = StringAt(spec, {"sshPublicKey", "name"});
  if (!ssh_key.empty()) {
    Json sidecar_resources = Json::object();
    if (accelerated) {
      const std::string visibility =
          "device.gpustack.ai/" + context.vendor->key + ".visibility";
      sidecar_resources = {{"limits", {{visibility, std::to_string(cards.cards)}}},
                           {"requests", {{visibility, std::to_string(cards.cards)}}}};
    }
    containers.push_back(
        {{"name", kSshContainer},
         {"image", RewrittenImage(context.settings.instance_ssh_server_image, context.settings)},
         {"imagePullPolicy", context.settings.image_pull_policy},
         {"stdin", true},
         {"tty", true},
         {"env", Json::array({{{"name", "VOLUME_MOUNT_PATH"}, {"value", mount}}})},
         {"ports", Json::array({{{"name", "ssh"}, {"containerPort", 22}, {"protocol", "TCP"}}})},
         {"securityContext",
          {{"runAsUser", 0}, {"capabilities", {{"add", Json::array({"SYS_ADMIN", "SYS_PTRACE"})}}}}},
         {"resources", sidecar_resources},
         {"volumeMounts",
          Json::array({{{"name", "ssh-authorized-keys"},
                        {"mountPath", kAuthorizedKeysDir},
                        {"readOnly", true}},
                       {{"name", "ssh-host-key"}, {"mountPath", kHostKeyDir}, {"readOnly", true}}})}});
    volumes.push_back({{"name", "ssh-authorized-keys"},
                       {"secret",
                        {{"secretName", ssh_key},
                         {"defaultMode", kSecretFileMode},
                         {"items", Json::array({{{"key", "authorized_keys"},
                                                 {"path", "authorized_keys"}}})}}}});
    volumes.push_back({{"name", "ssh-host-key"},
                       {"secret",
                        {{"secretName", HostKeySecretName(name)},
                         {"defaultMode", kSecretFileMode}}}});
  }

  Json pod_spec = {{"hostIPC", true},
                   {"shareProcessNamespace", true},
                   {"automountServiceAccountToken", false},
                   {"enableServiceLinks", false},
                   {"restartPolicy", "Always"},
                   {"containers", containers},
                   {"volumes", volumes}};
  if (!context.runtime_class.empty()) pod_spec["runtimeClassName"] = context.runtime_class;
  if (!spec.value("nodeName", "").empty())
    pod_spec["nodeSelector"] = {{"kubernetes.io/hostname", context.pinned_hostname}};
  if (Json secrets = PullSecrets(spec, context.settings); !secrets.empty())
    pod_spec["imagePullSecrets"] = secrets;
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", StringAt(instance, {"metadata", "namespace"})},
                {"labels", InstanceLabels(instance, type)},
                {"ownerReferences",
                 Json::array({OwnerReference("worker.gpustack.ai/v1alpha1", "Instance",
                                             instance)})}}},
              {"spec", pod_spec}};
}

Json InstanceService(const Json& instance, const Json& pod) {
  Json ports = Json::array();
  std::set<std::pair<int64_t, std::string>> seen;
  for (const Json& c : JsonAt(pod, {"spec", "containers"})) {
    const Json& container_ports = JsonAt(c, {"ports"});
    if (!container_ports.is_array()) continue;
    for (const Json& p : container_ports) {
      const int64_t port = p.value("containerPort", int64_t{0});
      const std::string protocol = p.value("protocol", "TCP");
      if (!seen.insert({port, protocol}).second) continue;
      ports.push_back({{"name", Lower(protocol) + "-" + std::to_string(port)},
                       {"port", port},
                       {"targetPort", port},
                       {"protocol", protocol}});
    }
  }
  if (ports.empty()) return nullptr;
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", StringAt(instance, {"metadata", "name"})},
            {"namespace", StringAt(instance, {"metadata", "namespace"})},
            {"labels", JsonAt(pod, {"metadata", "labels"})},
            {"ownerReferences", Json::array({OwnerReference("v1", "Pod", pod)})}}},
          {"spec",
           {{"type", "NodePort"},
            {"selector", JsonAt(pod, {"metadata", "labels"})},
            {"ports", ports}}}};
}

std::string HostKeySecretName(const std::string& instance) { return instance + "-ssh-host-key"; }

Json HostKeySecret(const Json& instance, const std::string& private_key_pem) {
  const std::string name = StringAt(instance, {"metadata", "name"});
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata",
           {{"name", HostKeySecretName(name)},
            {"namespace", StringAt(instance, {"metadata", "namespace"})},
            {"labels", {{kInstanceLabel, name}}},
            {"ownerReferences",
             Json::array({OwnerReference("worker.gpustack.ai/v1alpha1", "Instance", instance)})}}},
          {"type", "Opaque"},
          {"stringData", {{kHostKeyFile, private_key_pem}}}};
}

namespace {

const Json* ConditionOf(const Json& pod, const std::string& type) {
  const Json& conditions = JsonAt(pod, {"status", "conditions"});
  if (!conditions.is_array()) return nullptr;
  for (const Json& c : conditions)
    if (c.value("type", "") == type) return &c;
  return nullptr;
}

bool ConditionTrue(const Json& pod, const std::string& type) {
  const Json* c = ConditionOf(pod, type);
  return c != nullptr && c->value("status", "") == "True";
}

// "<container>: <reason>: <message>" of the first container waiting for one of `reasons` (all
// reasons when empty), or empty.
std::string Waiting(const Json& statuses, const std::set<std::string>& reasons,
                    const std::set<std::string>& except = {}) {
  if (!statuses.is_array()) return {};
  for (const Json& s : statuses) {
    const Json& waiting = JsonAt(s, {"state", "waiting"});
    if (!waiting.is_object()) continue;
    const std::string reason = waiting.value("reason", "");
    if ((!reasons.empty() && !reasons.count(reason)) || except.count(reason)) continue;
    std::string text = s.value("name", "") + ": " + reason;
    if (std::string message = waiting.value("message", ""); !message.empty())
      text += ": " + message;
    return text;
  }
  return {};
}

}  // namespace

std::pair<std::string, std::string> PodSummary(const Json& pod) {
  const std::string phase = StringAt(pod, {"status", "phase"});
  if (phase == "Succeeded" || phase == "Failed") {
    std::string why = StringAt(pod, {"status", "reason"});
    const std::string message = StringAt(pod, {"status", "message"});
    if (!message.empty()) why += (why.empty() ? "" : ": ") + message;
    return {"NotReady", "the Pod ended (" + phase + ")" + (why.empty() ? "" : ": " + why)};
  }
  if (StringAt(pod, {"spec", "nodeName"}).empty()) {
    const Json& gates = JsonAt(pod, {"spec", "schedulingGates"});
    if (gates.is_array() && !gates.empty())
      return {"Pending", "waiting in queue " +
                             StringAt(pod, {"metadata", "labels", kQueueNameLabel}) +
                             " to be admitted"};
    const Json* scheduled = ConditionOf(pod, "PodScheduled");
    return {"Scheduling", scheduled != nullptr ? scheduled->value("message", "") : ""};
  }
  const Json& init = JsonAt(pod, {"status", "initContainerStatuses"});
  if (ConditionOf(pod, "Initialized") == nullptr) return {"Scheduled", ""};
  if (!ConditionTrue(pod, "Initialized")) {
    if (std::string failed = Waiting(init, {}, {"PodInitializing"}); !failed.empty())
      return {"InitializeFailed", failed};
    if (init.is_array()) {
      for (const Json& s : init) {
        const Json& done = JsonAt(s, {"state", "terminated"});
        if (done.is_object() && done.value("exitCode", 0) != 0)
          return {"InitializeFailed", s.value("name", "") + ": exited " +
                                          std::to_string(done.value("exitCode", 0))};
      }
    }
    return {"Initializing", ""};
  }
  const Json& statuses = JsonAt(pod, {"status", "containerStatuses"});
  if (std::string pull = Waiting(statuses, {"ErrImagePull", "ImagePullBackOff", "InvalidImageName"});
      !pull.empty())
    return {"NotReady", pull};
  if (ConditionTrue(pod, "Ready")) return {"Ready", ""};
  if (!statuses.is_array() || statuses.empty()) return {"Initialized", ""};
  if (std::string other = Waiting(statuses, {}, {"ContainerCreating", "PodInitializing"});
      !other.empty())
    return {"NotReady", other};
  if (!Waiting(statuses, {"ContainerCreating", "PodInitializing"}).empty())
    return {"Starting", ""};
  const Json* ready = ConditionOf(pod, "ContainersReady");
  return {"NotReady", ready != nullptr ? ready->value("message", "") : ""};
}

Json InstanceStatus(const InstanceObserved& observed, const Settings& settings) {
  Json status = Json::object();
  std::string phase = observed.phase, message = observed.message;
  if (phase.empty() && observed.pod != nullptr) std::tie(phase, message) = PodSummary(*observed.pod);
  status["phase"] = phase;
  if (!message.empty()) status["phaseMessage"] = message;
  if (observed.pod == nullptr) return status;
  const Json& pod = *observed.pod;
  if (std::string node = StringAt(pod, {"spec", "nodeName"}); !node.empty())
    status["nodeName"] = node;
  Json host_ips = Json::array();
  if (observed.node != nullptr) {
    for (const char* kind : {"ExternalIP", "InternalIP"}) {
      const Json& addresses = JsonAt(*observed.node, {"status", "addresses"});
      if (!addresses.is_array()) break;
      for (const Json& a : addresses)
        if (a.value("type", "") == kind) host_ips.push_back({{"ip", a.value("address", "")}});
    }
  }
  if (!host_ips.empty()) status["hostIPs"] = host_ips;
  if (const Json& pod_ips = JsonAt(pod, {"status", "podIPs"}); pod_ips.is_array() &&
                                                               !pod_ips.empty()) {
    status["podIPs"] = Json::array();
    for (const Json& ip : pod_ips) status["podIPs"].push_back({{"ip", ip.value("ip", "")}});
  }
  // The node ports, once every one is assigned.
  if (observed.service != nullptr) {
    Json ports = Json::array();
    bool assigned = true;
    for (const Json& p : JsonAt(*observed.service, {"spec", "ports"})) {
      if (!p.contains("nodePort")) assigned = false;
      ports.push_back({{"port", p.value("port", 0)},
                       {"protocol", p.value("protocol", "TCP")},
                       {"name", p.value("name", "")},
                       {"nodePort", p.value("nodePort", 0)}});
    }
    if (assigned && !ports.empty()) status["ports"] = ports;
  }
  // The cards, as the node recorded them on the Pod, main's first.
  const std::string recorded =
      StringAt(pod, {"metadata", "annotations", ledger::kAllocatedAnnotation});
  if (!recorded.empty()) {
    const Json parsed = Json::parse(recorded, nullptr, false);
    if (parsed.is_object()) {
      Json allocations = Json::array();
      if (parsed.contains(kMainContainer)) allocations.push_back(parsed[kMainContainer]);
      for (const auto& [container, allocation] : parsed.items())
        if (container != kMainContainer) allocations.push_back(allocation);
      if (!allocations.empty()) status["allocations"] = allocations;
    }
  }
  Json access = Json::array();
  if (!settings.instance_access_static_address.empty()) {
    access.push_back(settings.instance_access_static_address);
  } else if (!settings.instance_access_wildcard_dns.empty()) {
    for (const Json& ip : host_ips)
      access.push_back(ip.value("ip", "") + "." + settings.instance_access_wildcard_dns);
  }
  if (!access.empty()) status["accessAddresses"] = access;
  return status;
}

}  // namespace gpustack::op
