#include "host/operator/instance_controller.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "host/common/json_path.h"
#include "host/common/logging.h"
#include "host/https/certs.h"
#include "host/kube/resource.h"
#include "host/operator/admission.h"
#include "host/operator/instances.h"

namespace gpustack::op {
namespace {

using kube::ObjectPtr;

const kube::ResourceType kServices{"", "v1", "services", true};
const kube::ResourceType kRuntimeClasses{"node.k8s.io", "v1", "runtimeclasses", false};
constexpr const char* kComponent = "gpustack-worker-instances";
constexpr size_t kDurationsKept = 4096;
// How soon an Instance waiting on something the controller does not watch (a Secret, a Node, a
// RuntimeClass) is looked at again.
constexpr auto kRecheck = std::chrono::seconds(10);

std::string KeyOf(const Json& object) {
  return StringAt(object, {"metadata", "namespace"}) + "/" + StringAt(object, {"metadata", "name"});
}

// The key of the Instance an object of ours belongs to (its kInstanceLabel).
std::string OwnerKeyOf(const Json& object) {
  const std::string name = StringAt(object, {"metadata", "labels", kInstanceLabel});
  return name.empty() ? std::string() : StringAt(object, {"metadata", "namespace"}) + "/" + name;
}

// The uid of the object's controlling owner.
std::string ControllerUid(const Json& object) {
  const Json& owners = JsonAt(object, {"metadata", "ownerReferences"});
  if (!owners.is_array()) return {};
  for (const Json& o : owners)
    if (o.value("controller", false)) return o.value("uid", "");
  return {};
}

bool Deleting(const Json& object) {
  return !StringAt(object, {"metadata", "deletionTimestamp"}).empty();
}

bool HasFinalizer(const Json& object) {
  const Json& finalizers = JsonAt(object, {"metadata", "finalizers"});
  return finalizers.is_array() &&
         std::find(finalizers.begin(), finalizers.end(), Json(kInstanceFinalizer)) !=
             finalizers.end();
}

}  // namespace

// What making a Pod found, for the status and for when to look again.
struct InstanceController::Step {
  std::string message;  // why no Pod was made, or that one was
  bool recheck = false;  // waiting on something not watched
};

InstanceController::InstanceController(kube::Client& client, InstanceControllerInputs inputs,
                                       int threads)
    : client_(client),
      inputs_(std::move(inputs)),
      threads_(std::max(1, threads)),
      queue_(kube::WorkQueueOptions{.base_delay = std::chrono::milliseconds(200),
                                    .max_delay = std::chrono::milliseconds(60'000),
                                    .qps = 50,
                                    .burst = 200}) {
  instances_ = std::make_unique<kube::Informer>(client_, kube::resources::Instances(), "");
  instances_->AddIndexer("type", [](const Json& i) {
    return std::vector<std::string>{StringAt(i, {"spec", "type"})};
  });
  auto enqueue = [this](const ObjectPtr& o) { queue_.Add(KeyOf(*o)); };
  instances_->AddEventHandler(
      {.on_add = enqueue,
       .on_update =
           [this](const ObjectPtr& before, const ObjectPtr& after) {
             // Its own status writes come back as updates: only a change it did not make counts.
             if (JsonAt(*before, {"spec"}) == JsonAt(*after, {"spec"}) &&
                 JsonAt(*before, {"metadata", "finalizers"}) ==
                     JsonAt(*after, {"metadata", "finalizers"}) &&
                 Deleting(*before) == Deleting(*after))
               return;
             queue_.Add(KeyOf(*after));
           },
       .on_delete = enqueue});
  kube::InformerOptions ours;
  ours.label_selector = kInstanceLabel;
  auto owner = [this](const ObjectPtr& o) {
    if (std::string key = OwnerKeyOf(*o); !key.empty()) queue_.Add(key);
  };
  for (auto* informer : {&pods_, &services_}) {
    *informer = std::make_unique<kube::Informer>(
        client_, informer == &pods_ ? kube::resources::Pods() : kServices, "", ours);
    (*informer)->AddEventHandler(
        {.on_add = owner,
         .on_update = [owner](const ObjectPtr&, const ObjectPtr& after) { owner(after); },
         .on_delete = owner});
  }
  // A type deleted or a queue drained stops its running Instances; anything else about them is
  // read when the Instance is. Both are named after the type.
  auto by_type_name = [this](kube::Informer* informer, auto changed) {
    if (informer == nullptr) return;
    auto all = [this](const ObjectPtr& o) { EnqueueOfType(StringAt(*o, {"metadata", "name"})); };
    informer->AddEventHandler(
        {.on_add = all,
         .on_update =
             [this, changed](const ObjectPtr& before, const ObjectPtr& after) {
               if (changed(*before, *after)) EnqueueOfType(StringAt(*after, {"metadata", "name"}));
             },
         .on_delete = all});
  };
  by_type_name(inputs_.instance_types, [](const Json& before, const Json& after) {
    return Deleting(before) != Deleting(after) ||
           StringAt(before, {"status", "entrance"}) != StringAt(after, {"status", "entrance"});
  });
  by_type_name(inputs_.queues, [](const Json& before, const Json& after) {
    return StringAt(before, {"spec", "stopPolicy"}) != StringAt(after, {"spec", "stopPolicy"});
  });
}

InstanceController::~InstanceController() { queue_.ShutDown(); }

std::vector<kube::Informer*> InstanceController::informers() const {
  return {instances_.get(), pods_.get(), services_.get()};
}

void InstanceController::EnqueueOfType(const std::string& type) {
  for (const ObjectPtr& i : instances_->ByIndex("type", type)) queue_.Add(KeyOf(*i));
}

void InstanceController::Run(std::stop_token stop) {
  std::stop_callback on_stop(stop, [this] { queue_.ShutDown(); });
  std::vector<std::jthread> workers;
  for (int i = 0; i < threads_; ++i) {
    workers.emplace_back([this] {
      while (auto key = queue_.Get()) {
        Handle(*key);
        queue_.Done(*key);
      }
    });
  }
}

InstanceCounters InstanceController::Counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void InstanceController::Handle(const std::string& key) {
  const auto started = std::chrono::steady_clock::now();
  Step step;
  Status done = Reconcile(key, step);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  {
    std::lock_guard lock(mutex_);
    ++counters_.reconciles;
    if (!done) ++counters_.failures;
    if (counters_.reconcile_seconds.size() >= kDurationsKept)
      counters_.reconcile_seconds.erase(counters_.reconcile_seconds.begin());
    counters_.reconcile_seconds.push_back(seconds);
  }
  if (!done) {
    Logger("instances")->warn("{}: {} (retrying)", key, done.error());
    queue_.AddRateLimited(key);
    return;
  }
  queue_.Forget(key);
  if (step.recheck) queue_.AddAfter(key, kRecheck);
}

Status InstanceController::Reconcile(const std::string& key, Step& step) {
  ObjectPtr found = instances_->Get(key);
  if (!found) return Ok{};  // gone: the garbage collector takes what it owned
  const Json& instance = *found;
  const std::string uid = StringAt(instance, {"metadata", "uid"});
  const std::string ns = StringAt(instance, {"metadata", "namespace"});
  const std::string name = StringAt(instance, {"metadata", "name"});
  ObjectPtr pod = pods_->Get(key);
  const bool own_pod = pod && ControllerUid(*pod) == uid;
  auto delete_pod = [&]() -> Status {
    if (Deleting(*pod)) return Ok{};
    Status deleted = client_.Delete(kube::resources::Pods(), ns, name,
                                    {.uid = StringAt(*pod, {"metadata", "uid"})});
    if (!deleted && !kube::IsNotFound(deleted.failure()) && !kube::IsConflict(deleted.failure()))
      return deleted;
    std::lock_guard lock(mutex_);
    ++counters_.pods_deleted;
    return Ok{};
  };

  const Settings settings = inputs_.settings();
  if (Deleting(instance)) {
    if (pod) {
      if (Status deleted = delete_pod(); !deleted) return deleted;
      return WriteStatus(instance, InstanceStatus({.phase = "Deleting",
                                                   .message = "waiting for the Pod to go"},
                                                  settings));
    }
    if (!HasFinalizer(instance)) return Ok{};
    Json finalizers = Json::array();
    for (const Json& f : JsonAt(instance, {"metadata", "finalizers"}))
      if (f != kInstanceFinalizer) finalizers.push_back(f);
    return PatchInstance(instance, {{{"op", "replace"}, {"path", "/metadata/finalizers"},
                                     {"value", finalizers}}});
  }
  if (!HasFinalizer(instance)) {
    const Json& finalizers = JsonAt(instance, {"metadata", "finalizers"});
    if (finalizers.is_array())
      return PatchInstance(instance, {{{"op", "add"}, {"path", "/metadata/finalizers/-"},
                                       {"value", kInstanceFinalizer}}});
    return PatchInstance(instance, {{{"op", "add"}, {"path", "/metadata/finalizers"},
                                     {"value", Json::array({kInstanceFinalizer})}}});
  }
  // A Pod of an earlier Instance of this name goes first.
  if (pod && !own_pod) {
    if (Status deleted = delete_pod(); !deleted) return deleted;
    return WriteStatus(instance, InstanceStatus({.phase = "Starting",
                                                 .message = "waiting for the Pod of an earlier "
                                                            "Instance of this name to go"},
                                                settings));
  }

  const Json& spec = JsonAt(instance, {"spec"});
  const std::string type_name = spec.value("type", "");
  ObjectPtr type = inputs_.instance_types ? inputs_.instance_types->Get(type_name) : nullptr;
  if (!spec.value("stop", false)) {
    if (!type || Deleting(*type))
      return StopInstance(instance, "InstanceType " + type_name +
                                        (type ? " is being deleted" : " does not exist"));
    ObjectPtr queue = inputs_.queues ? inputs_.queues->Get(type_name) : nullptr;
    if (queue && StringAt(*queue, {"spec", "stopPolicy"}) == "HoldAndDrain")
      return StopInstance(instance, "the queue of InstanceType " + type_name + " is drained");
  }
  if (spec.value("stop", false)) {
    if (pod) {
      if (Status deleted = delete_pod(); !deleted) return deleted;
      return WriteStatus(instance, InstanceStatus({.phase = "Stopping",
                                                   .message = "waiting for the Pod to go"},
                                                  settings));
    }
    return WriteStatus(instance, InstanceStatus({.phase = "Stopped"}, settings));
  }
  if (!pod) {
    if (Status made = CreatePod(instance, *type, settings, step); !made) return made;
    return WriteStatus(instance,
                       InstanceStatus({.phase = "Starting", .message = step.message}, settings));
  }
  if (Deleting(*pod))
    return WriteStatus(instance, InstanceStatus({.phase = "Starting",
                                                 .message = "waiting for the previous Pod to go"},
                                                settings));

  // The Service: made for this Pod, or made again when it belongs to an earlier one.
  ObjectPtr service = services_->Get(key);
  const Json wanted = InstanceService(instance, *pod);
  if (service && (wanted.is_null() || ControllerUid(*service) != StringAt(*pod, {"metadata", "uid"}))) {
    if (!Deleting(*service)) {
      Status deleted = client_.Delete(kServices, ns, name,
                                      {.uid = StringAt(*service, {"metadata", "uid"})});
      if (!deleted && !kube::IsNotFound(deleted.failure()) && !kube::IsConflict(deleted.failure()))
        return deleted;
    }
    service = nullptr;
  } else if (!service && !wanted.is_null()) {
    auto made = client_.Create(kServices, wanted);
    if (made) service = std::make_shared<const Json>(std::move(*made));
    else if (!kube::IsAlreadyExists(made.failure())) return made.failure();
  }
  ObjectPtr node;
  if (std::string bound = StringAt(*pod, {"spec", "nodeName"}); !bound.empty() && inputs_.nodes) {
    if (NodeRecordPtr record = inputs_.nodes->Get(bound))
      node = std::make_shared<const Json>(record->Parse());
  }
  return WriteStatus(instance, InstanceStatus({.pod = pod.get(),
                                               .service = service.get(),
                                               .node = node.get()},
                                              settings));
}

Status InstanceController::CreatePod(const Json& instance, const Json& type,
                                     const Settings& settings, Step& step) {
  const Json& spec = JsonAt(instance, {"spec"});
  const std::string ns = StringAt(instance, {"metadata", "namespace"});
  InstanceContext context;
  context.type = &type;
  context.settings = settings;
  const std::string manufacturer = JsonAt(type, {"spec", "acceleratable"}) == true
                                       ? ManufacturerOf(type, *inputs_.manufacturers)
                                       : std::string();
  if (!manufacturer.empty()) {
    auto m = inputs_.manufacturers->find(manufacturer);
    if (m == inputs_.manufacturers->end()) {
      step.recheck = true;
      step.message = "no plugin of this worker knows manufacturer " + manufacturer;
      return Ok{};
    }
    context.vendor = &m->second;
    context.runtime_class = RuntimeClassOf(m->second);
  }
  if (std::string node_name = spec.value("nodeName", ""); !node_name.empty()) {
    NodeRecordPtr node = inputs_.nodes ? inputs_.nodes->Get(node_name) : nullptr;
    if (!node) {
      step.recheck = true;
      step.message = "spec.nodeName: node " + node_name + " does not exist";
      return Ok{};
    }
    context.pinned_hostname = node->hostname;
    if (context.pinned_hostname.empty()) context.pinned_hostname = node_name;
  }
  // Defaults the webhook would have written, should it have been bypassed.
  Json defaulted = instance;
  defaulted["spec"]["resources"] =
      DefaultedInstanceResources(spec.value("resources", Json::object()), type);
  if (std::string key = StringAt(spec, {"sshPublicKey", "name"}); !key.empty()) {
    auto secret = client_.Get(kube::resources::Secrets(), ns, key);
    if (!secret) {
      if (!kube::IsNotFound(secret.failure())) return secret.failure();
      step.recheck = true;
      step.message = "spec.sshPublicKey: Secret " + key + " does not exist";
      return Ok{};
    }
    if (!JsonAt(*secret, {"data", "authorized_keys"}).is_string()) {
      step.recheck = true;
      step.message = "spec.sshPublicKey: Secret " + key + " has no key authorized_keys";
      return Ok{};
    }
    const std::string host_key = HostKeySecretName(StringAt(instance, {"metadata", "name"}));
    auto existing = client_.Get(kube::resources::Secrets(), ns, host_key);
    if (!existing && !kube::IsNotFound(existing.failure())) return existing.failure();
    if (!existing) {
      auto pem = https::MakePrivateKey();
      if (!pem) return pem.failure();
      auto made = client_.Create(kube::resources::Secrets(), HostKeySecret(instance, *pem));
      if (!made && !kube::IsAlreadyExists(made.failure())) return made.failure();
    }
  }
  auto pod = InstancePod(defaulted, context);
  if (!pod) {
    step.message = pod.error();  // the spec's own: only an update of it changes the answer
    return Ok{};
  }
  auto made = client_.Create(kube::resources::Pods(), *pod);
  if (!made) {
    if (kube::IsAlreadyExists(made.failure())) return Ok{};
    // A refusal of the Pod (gate 1, a quota) is the user's to read, on the Instance.
    if (made.failure().http_status >= 400 && made.failure().http_status < 500 &&
        made.failure().http_status != 409 && made.failure().http_status != 429) {
      step.message = "the Pod was refused: " + made.error();
      step.recheck = true;
      return Ok{};
    }
    return made.failure();
  }
  std::lock_guard lock(mutex_);
  ++counters_.pods_created;
  step.message = "the Pod is made";
  return Ok{};
}

std::string InstanceController::RuntimeClassOf(const Manufacturer& vendor) {
  if (vendor.runtime_class.empty()) return {};
  auto found = client_.Get(kRuntimeClasses, "", vendor.runtime_class);
  if (found) return vendor.runtime_class;
  if (!kube::IsNotFound(found.failure()))
    Logger("instances")->warn("cannot read RuntimeClass {}: {}", vendor.runtime_class,
                              found.error());
  return {};
}

Status InstanceController::WriteStatus(const Json& instance, const Json& status) {
  if (JsonAt(instance, {"status"}) == status) return Ok{};
  auto patched = client_.Patch(kube::resources::Instances(),
                               StringAt(instance, {"metadata", "namespace"}),
                               StringAt(instance, {"metadata", "name"}), kube::PatchType::kJson,
                               Json::array({{{"op", "add"}, {"path", "/status"}, {"value", status}}}),
                               "status");
  if (!patched && !kube::IsNotFound(patched.failure())) return patched.failure();
  return Ok{};
}

Status InstanceController::PatchInstance(const Json& instance, const Json& json_patch) {
  Json operations = Json::array({{{"op", "test"},
                                  {"path", "/metadata/resourceVersion"},
                                  {"value", StringAt(instance, {"metadata", "resourceVersion"})}}});
  for (const Json& op : json_patch) operations.push_back(op);
  auto patched = client_.Patch(kube::resources::Instances(),
                               StringAt(instance, {"metadata", "namespace"}),
                               StringAt(instance, {"metadata", "name"}), kube::PatchType::kJson,
                               operations);
  // A stale cache: the update event brings the Instance back.
  if (!patched && !kube::IsNotFound(patched.failure()) && patched.failure().http_status != 422 &&
      !kube::IsConflict(patched.failure()))
    return patched.failure();
  return Ok{};
}

Status InstanceController::StopInstance(const Json& instance, const std::string& why) {
  Logger("instances")->info("{}: stopping: {}", KeyOf(instance), why);
  Status stopped = PatchInstance(instance, {{{"op", "add"}, {"path", "/spec/stop"}, {"value", true}}});
  if (!stopped) return stopped;
  {
    std::lock_guard lock(mutex_);
    ++counters_.stops_forced;
  }
  const Json involved = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                         {"kind", "Instance"},
                         {"name", StringAt(instance, {"metadata", "name"})},
                         {"namespace", StringAt(instance, {"metadata", "namespace"})},
                         {"uid", StringAt(instance, {"metadata", "uid"})}};
  auto event = client_.Create(kube::resources::Events(),
                              kube::NewEvent(involved, "Normal", "Stopped",
                                             "stopped: " + why, kComponent, kComponent));
  if (!event) Logger("instances")->debug("cannot record an event: {}", event.error());
  return Ok{};
}

}  // namespace gpustack::op
