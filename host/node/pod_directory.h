// The allocator's Pod directory on a real node: the apiserver for Pods and their records, the
// kubelet's pod-resources API (v1, List) for which containers it is admitting right now.
#ifndef GPUSTACK_HOST_NODE_POD_DIRECTORY_H_
#define GPUSTACK_HOST_NODE_POD_DIRECTORY_H_

#include <atomic>
#include <filesystem>
#include <string>

#include "host/kube/client.h"
#include "host/kube/informer.h"
#include "host/node/allocator.h"

namespace gpustack::node {

class KubePodDirectory final : public PodDirectory {
 public:
  // `pod_resources_socket` empty: the kubelet is never asked.
  KubePodDirectory(kube::Client& client, std::string node_name,
                   std::filesystem::path pod_resources_socket);

  Result<std::vector<Json>> PodsOnNode() override;
  std::optional<std::vector<Json>> CachedPods() override;
  // The node's Pod informer, once it runs (its cache serves identification first).
  void set_informer(kube::Informer* informer) { informer_ = informer; }
  std::optional<std::set<std::string>> KubeletWaiting(const std::string& resource) override;
  Status Record(const Json& pod, const std::string& value) override;

 private:
  kube::Client& client_;
  const std::string node_name_;
  const std::filesystem::path pod_resources_socket_;
  std::atomic<kube::Informer*> informer_{nullptr};  // read by the kubelet front end's thread
};

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_POD_DIRECTORY_H_
