#include "host/api/helper_kinds.h"

#include <sstream>

#include "host/api/selectors.h"
#include "host/common/base64.h"
#include "host/common/json_path.h"
#include "host/kube/quantity.h"

namespace gpustack::api {
namespace {

Json Str(const std::string& description = {}) {
  Json s = {{"type", "string"}};
  if (!description.empty()) s["description"] = description;
  return s;
}

Json ObjectSchema(const std::string& description, Json spec_properties, Json required,
                  Json status_properties = Json()) {
  Json spec = {{"type", "object"}, {"properties", std::move(spec_properties)}};
  if (!required.empty()) spec["required"] = std::move(required);
  Json properties = {{"apiVersion", Str()},
                     {"kind", Str()},
                     {"metadata", {{"type", "object"}}},
                     {"spec", spec}};
  if (!status_properties.is_null())
    properties["status"] = {{"type", "object"}, {"properties", std::move(status_properties)}};
  return {{"type", "object"}, {"description", description}, {"properties", properties}};
}

Kind HelperKind(const std::string& kind, bool namespaced, Json schema, Json columns) {
  Kind k;
  k.kind = kind;
  k.list_kind = kind + "List";
  std::string lower;
  for (char c : kind) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  k.singular = lower;
  k.resource = lower + "s";
  k.namespaced = namespaced;
  k.verbs = {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};
  k.schema = std::move(schema);
  k.columns = std::move(columns);
  k.columns.push_back(
      {{"name", "Age"}, {"type", "date"}, {"jsonPath", ".metadata.creationTimestamp"}});
  return k;
}

// The served object's metadata from the backing object's (the helper label is ours, not the
// user's).
Json ServedMetadata(const Json& backing) {
  Json out = Json::object();
  const Json& m = backing["metadata"];
  for (const char* key : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp",
                          "deletionTimestamp", "annotations", "finalizers", "generation"}) {
    if (m.contains(key)) out[key] = m[key];
  }
  Json labels = m.value("labels", Json::object());
  labels.erase(kHelperLabel);
  if (!labels.empty()) out["labels"] = labels;
  return out;
}

// kubectl apply keeps the whole applied object in an annotation: a write-only field must not
// survive there.
void ScrubLastApplied(Json& metadata, const char* spec_field) {
  static const char* kLastApplied = "kubectl.kubernetes.io/last-applied-configuration";
  Json* annotations = metadata.is_object() && metadata.contains("annotations")
                          ? &metadata["annotations"]
                          : nullptr;
  if (!annotations || !annotations->is_object() || !annotations->contains(kLastApplied)) return;
  Json& text = (*annotations)[kLastApplied];
  Json applied = text.is_string() ? Json::parse(text.get<std::string>(), nullptr, false) : Json();
  if (!applied.is_object() || !applied.contains("spec") || !applied["spec"].is_object()) return;
  applied["spec"].erase(spec_field);
  text = applied.dump() + "\n";
}

// The backing object's metadata for a served object: its name, namespace, labels (with ours),
// annotations and, on update, the resourceVersion precondition.
Json BackingMetadata(const Json& served, const std::string& label_value) {
  const Json& m = served.value("metadata", Json::object());
  Json out = {{"name", m.value("name", "")}};
  if (m.contains("namespace")) out["namespace"] = m["namespace"];
  Json labels = m.value("labels", Json::object());
  labels[kHelperLabel] = label_value;
  out["labels"] = labels;
  if (m.contains("annotations")) out["annotations"] = m["annotations"];
  if (m.contains("resourceVersion")) out["resourceVersion"] = m["resourceVersion"];
  if (m.contains("finalizers")) out["finalizers"] = m["finalizers"];
  return out;
}

Error Refused(const std::string& field, const std::string& why) {
  Error e{field + ": " + why, Code::kInvalidArgument};
  e.http_status = 422;
  e.reason = "Invalid";
  return e;
}

std::string SpecString(const Json& served, const char* key) {
  return StringAt(served, {"spec", key});
}

// authorized_keys lines: a key type OpenSSH knows, then the key.
Status CheckAuthorizedKeys(const std::string& text) {
  static const char* kTypes[] = {"ssh-ed25519", "ssh-rsa", "ssh-dss", "ecdsa-sha2-nistp256",
                                 "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                                 "sk-ssh-ed25519@openssh.com",
                                 "sk-ecdsa-sha2-nistp256@openssh.com"};
  std::istringstream in(text);
  int number = 0, keys = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    std::istringstream words(line.substr(start));
    std::string first, second;
    words >> first >> second;
    bool known = false;
    for (const char* t : kTypes) known = known || first == t;
    // Options may come first ("no-pty ssh-ed25519 AAAA..."): then the type is the second word.
    for (const char* t : kTypes) known = known || second == t;
    if (!known || second.empty())
      return Refused("spec.publicKey", "line " + std::to_string(number) +
                                           " is not an OpenSSH public key (\"" +
                                           line.substr(start, 24) + "...\")");
    ++keys;
  }
  if (keys == 0) return Refused("spec.publicKey", "holds no public key");
  return Ok{};
}

HelperMapping SshPublicKey() {
  HelperMapping h;
  h.kind = HelperKind(
      "InstanceSSHPublicKey", true,
      ObjectSchema("OpenSSH public keys an Instance's SSH sidecar accepts (a Secret with key "
                   "authorized_keys).",
                   {{"publicKey", Str("authorized_keys lines.")}}, {"publicKey"}),
      Json::array());
  h.backing = kube::resources::Secrets();
  h.label_value = "instance-ssh-public-key";
  h.to_served = [](const Json& secret) {
    std::string keys;
    const Json& data = JsonAt(secret, {"data", "authorized_keys"});
    if (data.is_string()) {
      if (auto decoded = DecodeBase64(data.get<std::string>(), "authorized_keys")) keys = *decoded;
    }
    return Json{{"apiVersion", std::string(kGroup) + "/v1"},
                {"kind", "InstanceSSHPublicKey"},
                {"metadata", ServedMetadata(secret)},
                {"spec", {{"publicKey", keys}}}};
  };
  h.to_backing = [label = h.label_value](const Json& served,
                                         const Json*) -> Result<Json> {
    const std::string keys = SpecString(served, "publicKey");
    if (Status ok = CheckAuthorizedKeys(keys); !ok) return ok.failure();
    return Json{{"apiVersion", "v1"},
                {"kind", "Secret"},
                {"metadata", BackingMetadata(served, label)},
                {"type", "Opaque"},
                {"data", {{"authorized_keys", EncodeBase64(keys)}}}};
  };
  return h;
}

HelperMapping ImagePullSecret() {
  HelperMapping h;
  h.kind = HelperKind(
      "InstanceImagePullSecret", true,
      ObjectSchema("Registry credentials an Instance's image is pulled with (a "
                   "kubernetes.io/dockerconfigjson Secret).",
                   {{"registry", Str("The registry host, e.g. registry.example.com.")},
                    {"username", Str()},
                    {"password", Str("Write-only: never read back.")},
                    {"email", Str()}},
                   {"registry", "username"}),
      Json::array({{{"name", "Registry"}, {"type", "string"}, {"jsonPath", ".spec.registry"}},
                   {{"name", "Username"}, {"type", "string"}, {"jsonPath", ".spec.username"}}}));
  h.backing = kube::resources::Secrets();
  h.label_value = "instance-image-pull-secret";
  h.to_served = [](const Json& secret) {
    Json spec = Json::object();
    const Json& data = JsonAt(secret, {"data", ".dockerconfigjson"});
    if (data.is_string()) {
      auto text = DecodeBase64(data.get<std::string>(), ".dockerconfigjson");
      Json config = text ? Json::parse(*text, nullptr, false) : Json();
      if (config.is_object() && config.contains("auths") && config["auths"].is_object()) {
        for (const auto& [registry, auth] : config["auths"].items()) {
          spec["registry"] = registry;
          if (auth.is_object()) {
            if (auth.contains("username")) spec["username"] = auth["username"];
            if (auth.contains("email")) spec["email"] = auth["email"];
          }
          break;
        }
      }
    }
    Json metadata = ServedMetadata(secret);
    ScrubLastApplied(metadata, "password");
    return Json{{"apiVersion", std::string(kGroup) + "/v1"},
                {"kind", "InstanceImagePullSecret"},
                {"metadata", metadata},
                {"spec", spec}};
  };
  h.to_backing = [label = h.label_value](const Json& served,
                                         const Json* existing) -> Result<Json> {
    const std::string registry = SpecString(served, "registry");
    const std::string username = SpecString(served, "username");
    std::string password = SpecString(served, "password");
    if (registry.empty()) return Refused("spec.registry", "Required value");
    if (username.empty()) return Refused("spec.username", "Required value");
    if (password.empty() && existing) {  // write-only: an update without it keeps the old one
      const Json& data = JsonAt(*existing, {"data", ".dockerconfigjson"});
      auto text = data.is_string() ? DecodeBase64(data.get<std::string>(), "config")
                                   : Result<std::string>(Error{""});
      Json config = text ? Json::parse(*text, nullptr, false) : Json();
      const Json auths = config.is_object() ? config.value("auths", Json::object()) : Json();
      if (auths.is_object())
        for (const auto& [r, auth] : auths.items())
          if (auth.is_object()) password = auth.value("password", "");
    }
    if (password.empty()) return Refused("spec.password", "Required value");
    Json auth = {{"username", username},
                 {"password", password},
                 {"auth", EncodeBase64(username + ":" + password)}};
    if (!SpecString(served, "email").empty()) auth["email"] = SpecString(served, "email");
    Json metadata = BackingMetadata(served, label);
    ScrubLastApplied(metadata, "password");
    return Json{{"apiVersion", "v1"},
                {"kind", "Secret"},
                {"metadata", metadata},
                {"type", "kubernetes.io/dockerconfigjson"},
                {"data",
                 {{".dockerconfigjson", EncodeBase64(Json{{"auths", {{registry, auth}}}}.dump())}}}};
  };
  return h;
}

HelperMapping PersistentVolume() {
  HelperMapping h;
  h.kind = HelperKind(
      "InstancePersistentVolume", true,
      ObjectSchema("A volume that outlives Instances (a PersistentVolumeClaim).",
                   {{"type", Str("An InstancePersistentVolumeType (StorageClass) name.")},
                    {"capacity", Str("A quantity, e.g. 10Gi.")},
                    {"accessMode",
                     {{"type", "string"},
                      {"enum", {"ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany",
                                "ReadWriteOncePod"}}}}},
                   {"type", "capacity"}, {{"phase", Str()}, {"capacity", Str()}}),
      Json::array({{{"name", "Type"}, {"type", "string"}, {"jsonPath", ".spec.type"}},
                   {{"name", "Capacity"}, {"type", "string"}, {"jsonPath", ".spec.capacity"}},
                   {{"name", "Phase"}, {"type", "string"}, {"jsonPath", ".status.phase"}}}));
  h.backing = {"", "v1", "persistentvolumeclaims", true};
  h.label_value = "instance-persistent-volume";
  h.to_served = [](const Json& pvc) {
    Json spec = {{"type", StringAt(pvc, {"spec", "storageClassName"})},
                 {"capacity", StringAt(pvc, {"spec", "resources", "requests", "storage"})}};
    const Json& modes = JsonAt(pvc, {"spec", "accessModes"});
    if (modes.is_array() && !modes.empty()) spec["accessMode"] = modes[0];
    Json status = Json::object();
    if (!StringAt(pvc, {"status", "phase"}).empty())
      status["phase"] = StringAt(pvc, {"status", "phase"});
    if (!StringAt(pvc, {"status", "capacity", "storage"}).empty())
      status["capacity"] = StringAt(pvc, {"status", "capacity", "storage"});
    return Json{{"apiVersion", std::string(kGroup) + "/v1"},
                {"kind", "InstancePersistentVolume"},
                {"metadata", ServedMetadata(pvc)},
                {"spec", spec},
                {"status", status}};
  };
  h.to_backing = [label = h.label_value](const Json& served,
                                         const Json* existing) -> Result<Json> {
    const std::string type = SpecString(served, "type");
    const std::string capacity = SpecString(served, "capacity");
    std::string mode = SpecString(served, "accessMode");
    if (type.empty()) return Refused("spec.type", "Required value");
    auto quantity = kube::Quantity::Parse(capacity);
    if (!quantity || quantity->negative())
      return Refused("spec.capacity", "\"" + capacity + "\" is not a quantity (e.g. 10Gi)");
    if (mode.empty()) mode = "ReadWriteOnce";
    Json pvc = existing ? *existing : Json::object();
    pvc["apiVersion"] = "v1";
    pvc["kind"] = "PersistentVolumeClaim";
    pvc["metadata"] = BackingMetadata(served, label);
    pvc["spec"]["storageClassName"] = type;
    pvc["spec"]["accessModes"] = Json::array({mode});
    pvc["spec"]["resources"]["requests"]["storage"] = capacity;
    pvc.erase("status");
    return pvc;
  };
  return h;
}

HelperMapping PersistentVolumeType() {
  HelperMapping h;
  h.kind = HelperKind(
      "InstancePersistentVolumeType", false,
      ObjectSchema("A kind of volume InstancePersistentVolumes are made of (a StorageClass).",
                   {{"provisioner", Str()},
                    {"parameters",
                     {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
                    {"reclaimPolicy", {{"type", "string"}, {"enum", {"Delete", "Retain"}}}},
                    {"volumeBindingMode",
                     {{"type", "string"}, {"enum", {"Immediate", "WaitForFirstConsumer"}}}},
                    {"allowVolumeExpansion", {{"type", "boolean"}}},
                    {"mountOptions", {{"type", "array"}, {"items", Str()}}}},
                   {"provisioner"}),
      Json::array({{{"name", "Provisioner"}, {"type", "string"}, {"jsonPath", ".spec.provisioner"}},
                   {{"name", "ReclaimPolicy"},
                    {"type", "string"},
                    {"jsonPath", ".spec.reclaimPolicy"}}}));
  h.backing = {"storage.k8s.io", "v1", "storageclasses", false};
  h.label_value = "instance-persistent-volume-type";
  static const char* kFields[] = {"provisioner", "parameters", "reclaimPolicy",
                                  "volumeBindingMode", "allowVolumeExpansion", "mountOptions"};
  h.to_served = [](const Json& sc) {
    Json spec = Json::object();
    for (const char* f : kFields)
      if (sc.contains(f)) spec[f] = sc[f];
    return Json{{"apiVersion", std::string(kGroup) + "/v1"},
                {"kind", "InstancePersistentVolumeType"},
                {"metadata", ServedMetadata(sc)},
                {"spec", spec}};
  };
  h.to_backing = [label = h.label_value](const Json& served, const Json*) -> Result<Json> {
    if (SpecString(served, "provisioner").empty())
      return Refused("spec.provisioner", "Required value");
    Json sc = {{"apiVersion", "storage.k8s.io/v1"},
               {"kind", "StorageClass"},
               {"metadata", BackingMetadata(served, label)}};
    const Json spec = served.value("spec", Json::object());
    for (const char* f : kFields)
      if (spec.contains(f)) sc[f] = spec[f];
    return sc;
  };
  return h;
}

// The writes of one helper kind, onto its backing objects.
https::Response WriteHelper(const HelperMapping& h, kube::Client& client, const Call& call,
                            const ObjectPtr& current, ServedCache& cache) {
  const RequestInfo& info = call.info;
  const std::string content_type = call.request.Header("content-type");
  const auto relay = [&](kube::HttpRequest out) {
    return Relay(client, std::move(out), [&](Json backing) {
      return backing.value("kind", "") == "Status" ? backing : h.to_served(backing);
    });
  };
  const auto with_query = [&](std::string target) {
    return call.request.query.empty() ? target : target + "?" + call.request.query;
  };
  const auto not_found = [&](const std::string& name) {
    return StatusResponse(404, "NotFound",
                          h.kind.resource + "." + h.kind.group + " \"" + name + "\" not found",
                          Json{{"name", name}, {"group", h.kind.group}, {"kind", h.kind.resource}});
  };
  if (info.verb == "delete") {
    if (!current) return not_found(info.name);
    return relay({"DELETE", with_query(kube::ObjectPath(h.backing, info.ns, info.name)),
                  call.request.body, call.request.body.empty() ? "" : "application/json"});
  }
  if (info.verb == "deletecollection") {
    auto labels = Selector::ParseLabels(call.query.Get("labelSelector"));
    auto fields = Selector::ParseFields(call.query.Get("fieldSelector"));
    if (!labels) return ErrorResponse(labels.failure());
    if (!fields) return ErrorResponse(fields.failure());
    Json deleted = Json::array();
    for (const ServedPtr& o : cache.List().objects) {
      const Selectable& s = o->selectable;
      if (!info.ns.empty() && s.ns != info.ns) continue;
      if (!labels->Matches(s) || !fields->Matches(s)) continue;
      auto answer =
          client.Send({"DELETE", with_query(kube::ObjectPath(h.backing, s.ns, s.name)), "", ""});
      if (answer && answer->status / 100 == 2) deleted.push_back(o->Parse());
    }
    return JsonResponse({{"apiVersion", h.kind.ApiVersion()},
                         {"kind", h.kind.list_kind},
                         {"metadata", Json::object()},
                         {"items", deleted}});
  }
  // create, update, patch: the served object wanted, then its backing object.
  Json desired;
  if (info.verb == "patch") {
    if (!current) return not_found(info.name);
    auto patched = Patched(*current, content_type, call.request.body);
    if (!patched) return ErrorResponse(patched.failure());
    desired = std::move(*patched);
    // A patch without a resourceVersion applies to whatever is there now.
    if (!JsonAt(*patched, {"metadata", "resourceVersion"}).is_string() ||
        JsonAt(*patched, {"metadata", "resourceVersion"}) == JsonAt(*current, {"metadata", "resourceVersion"}))
      desired["metadata"].erase("resourceVersion");
  } else {
    auto body = ParseBody(content_type, call.request.body);
    if (!body) return ErrorResponse(body.failure());
    desired = std::move(*body);
    if (!desired.is_object() || desired.value("kind", "") != h.kind.kind ||
        desired.value("apiVersion", "") != h.kind.ApiVersion())
      return StatusResponse(400, "BadRequest",
                            "the body must be a " + h.kind.kind + " of " + h.kind.ApiVersion());
  }
  if (!desired["metadata"].is_object()) desired["metadata"] = Json::object();
  if (info.verb == "create" && !info.name.empty())
    return StatusResponse(405, "MethodNotAllowed", "create goes to the collection");
  if (info.verb != "create") {
    if (StringAt(desired, {"metadata", "name"}) != info.name)
      return StatusResponse(400, "BadRequest", "the name in the body does not match the path");
    if (info.verb == "update" && !current) return not_found(info.name);
  }
  if (h.kind.namespaced) desired["metadata"]["namespace"] = info.ns;
  std::vector<std::string> warnings;
  if (Status fields = CheckFields(desired, h.kind, call.query, &warnings); !fields)
    return StatusResponse(400, "BadRequest", fields.error());
  if (info.verb == "create" && StringAt(desired, {"metadata", "name"}).empty())
    return InvalidResponse(h.kind, "", "metadata.name", "", "Required value");
  Json existing;
  if (current) {
    auto read = client.Get(h.backing, info.ns, info.name);
    if (!read) return ErrorResponse(read.failure());
    existing = std::move(*read);
  }
  auto backing = h.to_backing(desired, current ? &existing : nullptr);
  if (!backing) {
    const Error& e = backing.failure();
    const std::string field = e.message.substr(0, e.message.find(':'));
    return InvalidResponse(h.kind, StringAt(desired, {"metadata", "name"}), field, "",
                           e.message.substr(e.message.find(':') + 2));
  }
  kube::HttpRequest out;
  out.content_type = "application/json";
  out.body = backing->dump();
  if (info.verb == "create") {
    out.method = "POST";
    out.target = with_query(kube::CollectionPath(h.backing, info.ns));
  } else {
    out.method = "PUT";
    out.target = with_query(kube::ObjectPath(h.backing, info.ns, info.name));
  }
  https::Response answer = relay(std::move(out));
  for (const auto& w : warnings) answer.headers.emplace_back("Warning", "299 - \"" + w + "\"");
  return answer;
}

}  // namespace

const std::vector<HelperMapping>& HelperMappings() {
  static const std::vector<HelperMapping> mappings = {SshPublicKey(), ImagePullSecret(),
                                                      PersistentVolume(), PersistentVolumeType()};
  return mappings;
}

std::vector<std::unique_ptr<Backend>> HelperBackends(kube::Client& client, size_t events_kept) {
  std::vector<std::unique_ptr<Backend>> out;
  for (const HelperMapping& h : HelperMappings()) {
    DerivedKind derived;
    derived.sources = {{h.backing, "", std::string(kHelperLabel) + "=" + h.label_value, ""}};
    derived.derive = [&h](const std::vector<std::vector<ObjectPtr>>& sources) {
      std::vector<Json> served;
      for (const ObjectPtr& o : sources[0]) served.push_back(h.to_served(*o));
      return served;
    };
    auto backend_cache = std::make_shared<ServedCache*>(nullptr);
    derived.write = [&h, backend_cache](kube::Client& c, const Call& call,
                                        const ObjectPtr& current) {
      return WriteHelper(h, c, call, current, **backend_cache);
    };
    auto backend = MakeDerivedBackend(client, h.kind, std::move(derived), events_kept);
    *backend_cache = &backend->cache();
    out.push_back(std::move(backend));
  }
  return out;
}

}  // namespace gpustack::api
