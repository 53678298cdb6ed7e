// A node runtime over one fake plugin ("acme", two 16 GiB cards, shared and sliced), and an
// in-memory Pod directory: the allocator's world without a kubelet or an apiserver.
#ifndef GPUSTACK_HOST_NODE_TESTS_NODE_FIXTURE_H_
#define GPUSTACK_HOST_NODE_TESTS_NODE_FIXTURE_H_

#include <memory>
#include <string>

#include "host/node/allocator.h"
#include "host/runtime/testing/fake_backend.h"
#include "host/runtime/testing/fake_node.h"

namespace gpustack::node::testing {

inline std::unique_ptr<runtime::NodeRuntime> AcmeRuntime(
    runtime::testing::Node& node, int cards = 2,
    std::optional<client::EnforcerDeclaration> enforcer = std::nullopt) {
  auto script = runtime::testing::MakeScript("acme", 0x1234, cards);
  script->identity.enforcer = std::move(enforcer);
  script->identity.capabilities |= GPUSTACK_CAP_SHARED;
  script->identity.capabilities |= GPUSTACK_CAP_LOGICAL_SLICING;
  for (sdk::Accelerator& c : script->groups[0].accelerators) c.logical_slice_count = 8;
  node.AddPci(0x1234, cards);
  auto runtime = runtime::NodeRuntime::Open(
      node.Options(), std::make_unique<runtime::testing::FakeSource>(
                          std::vector<runtime::testing::FakeSource::Entry>{
                              {runtime::testing::CandidateOf(*script), script}}));
  if (!runtime) return nullptr;
  (*runtime)->Discover();
  return std::move(runtime).value();
}

class MemoryPods final : public PodDirectory {
 public:
  Result<std::vector<Json>> PodsOnNode() override {
    ++lists;
    return pods;
  }
  std::optional<std::vector<Json>> CachedPods() override { return cache; }
  std::optional<std::set<std::string>> KubeletWaiting(const std::string&) override {
    ++kubelet_asks;
    return waiting;
  }
  Status Record(const Json& pod, const std::string& value) override {
    if (fail_records) return Error{"apiserver unavailable", Code::kUnavailable};
    records[pod["metadata"]["uid"].get<std::string>()] = value;
    return Ok{};
  }

  // A pending Pod with one container asking for `limits`.
  Json& Add(const std::string& name, const Json& limits, const std::string& created) {
    pods.push_back(
        {{"metadata",
          {{"name", name},
           {"namespace", "ns"},
           {"uid", "uid-" + name},
           {"creationTimestamp", created}}},
         {"spec",
          {{"containers", Json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}}},
         {"status", {{"phase", "Pending"}}}});
    return pods.back();
  }

  std::vector<Json> pods;
  std::optional<std::vector<Json>> cache;  // a watch cache, when set; may lag `pods`
  int lists = 0;
  int kubelet_asks = 0;
  std::optional<std::set<std::string>> waiting;
  std::map<std::string, std::string> records;  // by Pod uid
  bool fail_records = false;
};

}  // namespace gpustack::node::testing

#endif  // GPUSTACK_HOST_NODE_TESTS_NODE_FIXTURE_H_
