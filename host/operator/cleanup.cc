#include "host/operator/cleanup.h"

#include "host/operator/fleet.h"
#include "host/operator/settings.h"
#include "host/operator/webhooks.h"

namespace gpustack::op {
namespace {

using kube::ResourceType;

// Written by one of the worker's field managers (gpustack-worker-*): ours to remove.
bool WrittenByTheWorker(const Json& object) {
  const Json& meta = object.value("metadata", Json::object());
  for (const Json& entry : meta.value("managedFields", Json::array())) {
    if (entry.value("manager", "").starts_with("gpustack-worker")) return true;
  }
  return false;
}

class Remover {
 public:
  Remover(kube::Client& client, const CleanupOptions& options, CleanupReport& report)
      : client_(client), options_(options), report_(report) {}

  void Say(const std::string& line) const {
    if (options_.progress) options_.progress(line);
  }

  void Delete(const ResourceType& type, const std::string& ns, const std::string& name) {
    Status done = client_.Delete(type, ns, name);
    const std::string what = type.plural + " " + (ns.empty() ? "" : ns + "/") + name;
    if (done) {
      ++report_.deleted;
      Say("deleted " + what);
    } else if (!kube::IsNotFound(done.failure())) {
      report_.problems.push_back("cannot delete " + what + ": " + done.error());
    }
  }

  // Every object of `type` the worker wrote (all namespaces), or none when the API is not served.
  std::vector<Json> Ours(const ResourceType& type) {
    auto listed = client_.List(type, "");
    if (!listed) {
      if (!kube::IsNotFound(listed.failure())) {
        report_.problems.push_back("cannot list " + type.plural + ": " + listed.error());
      }
      return {};
    }
    std::vector<Json> out;
    for (Json& item : listed->items)
      if (WrittenByTheWorker(item)) out.push_back(std::move(item));
    return out;
  }

  void DeleteOurs(const ResourceType& type) {
    for (const Json& object : Ours(type)) {
      const Json& meta = object["metadata"];
      Delete(type, meta.value("namespace", ""), meta.value("name", ""));
    }
  }

  void DropFinalizers(const ResourceType& type) {
    auto listed = client_.List(type, "");
    if (!listed) return;  // the CRD is gone already: nothing holds a finalizer
    for (const Json& object : listed->items) {
      const Json& meta = object["metadata"];
      if (meta.value("finalizers", Json::array()).empty()) continue;
      const std::string name = meta.value("name", "");
      auto patched = client_.Patch(type, "", name, kube::PatchType::kMerge,
                                   {{"metadata", {{"finalizers", nullptr}}}});
      if (patched) {
        Say("released " + type.plural + " " + name + " (finalizers removed)");
      } else if (!kube::IsNotFound(patched.failure())) {
        report_.problems.push_back("cannot remove the finalizers of " + type.plural + " " + name +
                                   ": " + patched.error());
      }
    }
  }

 private:
  kube::Client& client_;
  const CleanupOptions& options_;
  CleanupReport& report_;
};

}  // namespace

CleanupReport Cleanup(kube::Client& client, const CleanupOptions& options) {
  CleanupReport report;
  Remover remove(client, options, report);
  namespace r = kube::resources;
  remove.Say("removing the webhook configurations");
  remove.Delete(r::MutatingWebhookConfigurations(), "", kMutatingConfiguration);
  remove.Delete(r::ValidatingWebhookConfigurations(), "", kValidatingConfiguration);
  remove.Say("removing the Kueue objects the worker wrote");
  remove.Delete(r::AdmissionChecks(), "", kNodeDevicesCheck);
  // Entrances before their queues, queues before their flavors: Kueue's own finalizers wait
  // for what refers to them.
  for (const ResourceType& type : {r::LocalQueues(), r::ClusterQueues(), r::ResourceFlavors()}) {
    remove.DeleteOurs(type);
  }
  remove.Say("releasing the InstanceTypes");
  remove.DropFinalizers(r::InstanceTypes());
  if (options.crds) {
    remove.Say("removing the operator's CRDs");
    for (const char* crd : {"devices.worker.gpustack.ai", "instancetypes.worker.gpustack.ai",
                            "instances.worker.gpustack.ai"}) {
      remove.Delete(r::CustomResourceDefinitions(), "", crd);
    }
  }
  remove.Say("removing the settings and webhook Secrets and the Lease");
  remove.Delete(r::Secrets(), options.system_namespace, kSettingsSecret);
  remove.Delete(r::Secrets(), options.system_namespace, kWebhookTlsSecret);
  remove.Delete(r::Leases(), options.system_namespace, "worker.gpustack.ai");
  return report;
}

}  // namespace gpustack::op
