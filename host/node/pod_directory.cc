#include "host/node/pod_directory.h"

#include "host/common/logging.h"
#include "host/kubelet_rpc/client.h"
#include "host/ledger/allocated.h"
#include "proto/podresources.pb.h"

namespace gpustack::node {

KubePodDirectory::KubePodDirectory(kube::Client& client, std::string node_name,
                                   std::filesystem::path pod_resources_socket)
    : client_(client),
      node_name_(std::move(node_name)),
      pod_resources_socket_(std::move(pod_resources_socket)) {}

Result<std::vector<Json>> KubePodDirectory::PodsOnNode() {
  kube::ListOptions options;
  options.field_selector = "spec.nodeName=" + node_name_;
  auto list = client_.List(kube::resources::Pods(), "", options);
  if (!list) return list.failure();
  return std::move(list->items);
}

std::optional<std::vector<Json>> KubePodDirectory::CachedPods() {
  kube::Informer* informer = informer_.load();
  if (informer == nullptr || !informer->HasSynced()) return std::nullopt;
  std::vector<Json> pods;
  for (const kube::ObjectPtr& pod : informer->List()) pods.push_back(*pod);
  return pods;
}

std::optional<std::set<std::string>> KubePodDirectory::KubeletWaiting(const std::string& resource) {
  if (pod_resources_socket_.empty() || !std::filesystem::exists(pod_resources_socket_))
    return std::nullopt;
  auto response = kubelet_rpc::Call<v1::ListPodResourcesResponse>(
      pod_resources_socket_, "/v1.PodResourcesLister/List", v1::ListPodResourcesRequest(),
      std::chrono::seconds(2));
  if (!response) {
    Logger("allocator")->debug("pod-resources List failed: {}", response.error());
    return std::nullopt;
  }
  std::set<std::string> waiting;
  for (const auto& pod : response->pod_resources()) {
    for (const auto& container : pod.containers()) {
      bool holds = false;
      for (const auto& devices : container.devices()) {
        holds = holds || (devices.resource_name() == resource && devices.device_ids_size() > 0);
      }
      if (!holds) waiting.insert(pod.namespace_() + "/" + pod.name() + "/" + container.name());
    }
  }
  return waiting;
}

Status KubePodDirectory::Record(const Json& pod, const std::string& value) {
  const Json& m = pod["metadata"];
  // The uid makes the patch a precondition: a Pod recreated under the same name is not written.
  Json patch = {
      {"metadata",
       {{"uid", m.value("uid", "")}, {"annotations", {{ledger::kAllocatedAnnotation, value}}}}}};
  auto patched = client_.Patch(kube::resources::Pods(), m.value("namespace", ""),
                               m.value("name", ""), kube::PatchType::kMerge, patch);
  if (!patched) return patched.failure();
  return Ok{};
}

}  // namespace gpustack::node
