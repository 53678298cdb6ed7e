// What the worker keeps of a bound Pod: the CPU view's and gate 3's inputs, as a record of about
// 160 bytes. A fleet binds tens of thousands of Pods: the same Pod as a JSON object of map nodes
// costs twenty times more, and as a struct of std::string members twice (docs/footprint.md).
#ifndef GPUSTACK_HOST_OPERATOR_BOUND_POD_H_
#define GPUSTACK_HOST_OPERATOR_BOUND_POD_H_

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace gpustack::op {

class BoundPod {
 public:
  struct Fields {
    std::string_view key;  // namespace/name
    std::string_view uid;
    std::string_view resource_version;
    std::string_view node;                      // spec.nodeName
    std::string_view phase;                     // status.phase
    std::optional<std::string_view> chosen;     // gate 3's chosen cards (ledger/chosen.h)
    std::optional<std::string_view> allocated;  // the node's allocation record (ledger/allocated.h)
    int64_t cpu_millicores = 0;                 // PodCpuMillicores (fleet.h)
    // A Failed Pod's projection (TrimPodForWorkerCache) as it is: the requeue judges it whole.
    std::shared_ptr<const nlohmann::json> failed;
  };
  explicit BoundPod(const Fields& fields);

  std::string_view key() const { return Text(kKey); }
  std::string_view uid() const { return Text(kUid); }
  std::string_view resource_version() const { return Text(kResourceVersion); }
  std::string_view node() const { return Text(kNode); }
  std::string_view phase() const { return Text(kPhase); }
  std::optional<std::string_view> chosen() const { return Optional(kChosen); }
  std::optional<std::string_view> allocated() const { return Optional(kAllocated); }
  int64_t cpu_millicores() const { return cpu_millicores_; }
  const std::shared_ptr<const nlohmann::json>& failed() const { return failed_; }

  bool Finished() const { return phase() == "Succeeded" || phase() == "Failed"; }

 private:
  enum Field : uint8_t { kKey, kUid, kResourceVersion, kNode, kPhase, kChosen, kAllocated, kCount };
  std::string_view Text(Field field) const {
    const uint32_t begin = field == 0 ? 0 : ends_[field - 1];
    return {text_.get() + begin, ends_[field] - begin};
  }
  std::optional<std::string_view> Optional(Field field) const {
    if ((present_ & (1u << field)) == 0) return std::nullopt;
    return Text(field);
  }

  // Every field's text back to back in one allocation, each ending where ends_ says.
  std::unique_ptr<char[]> text_;
  std::array<uint32_t, kCount> ends_{};
  uint8_t present_ = 0;  // a bit per optional field that the Pod has
  int64_t cpu_millicores_ = 0;
  std::shared_ptr<const nlohmann::json> failed_;
};

// Pure: the record of `pod`, a Pod object or its projection.
BoundPod BoundPodOf(nlohmann::json pod);

// The informer's key and version of a record (host/kube/informer.h).
inline std::string CacheKey(const BoundPod& pod) { return std::string(pod.key()); }
inline std::string CacheVersion(const BoundPod& pod) { return std::string(pod.resource_version()); }

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_BOUND_POD_H_
