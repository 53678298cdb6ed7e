#include "host/operator/bound_pod.h"

#include <cstring>
#include <stdexcept>

#include "host/common/json_path.h"
#include "host/kube/resource.h"
#include "host/ledger/allocated.h"
#include "host/ledger/chosen.h"
#include "host/operator/fleet.h"

namespace gpustack::op {

// A pointer, seven offsets, the flags, the CPU and the Failed Pod's pointer: kept small on purpose.
static_assert(sizeof(BoundPod) <= 64);

BoundPod::BoundPod(const Fields& fields)
    : cpu_millicores_(fields.cpu_millicores), failed_(fields.failed) {
  const std::array<std::string_view, kCount> texts{fields.key,
                                                   fields.uid,
                                                   fields.resource_version,
                                                   fields.node,
                                                   fields.phase,
                                                   fields.chosen.value_or(""),
                                                   fields.allocated.value_or("")};
  size_t size = 0;
  for (std::string_view text : texts) size += text.size();
  // The API server limits a Pod's annotations to 256 KB in all: far inside 32-bit offsets.
  if (size > UINT32_MAX) throw std::length_error("a bound Pod's record is over 4 GiB");
  text_ = std::make_unique_for_overwrite<char[]>(size);
  uint32_t end = 0;
  for (size_t i = 0; i < kCount; ++i) {
    if (!texts[i].empty()) std::memcpy(text_.get() + end, texts[i].data(), texts[i].size());
    end += static_cast<uint32_t>(texts[i].size());
    ends_[i] = end;
  }
  if (fields.chosen) present_ |= 1u << kChosen;
  if (fields.allocated) present_ |= 1u << kAllocated;
}

BoundPod BoundPodOf(Json pod) {
  // Copies: the record is made of views, and a Failed Pod's JSON moves into it.
  const std::string key = kube::ObjectKey(pod);
  const std::string uid = StringAt(pod, {"metadata", "uid"});
  const std::string resource_version = StringAt(pod, {"metadata", "resourceVersion"});
  const std::string node = StringAt(pod, {"spec", "nodeName"});
  const std::string phase = StringAt(pod, {"status", "phase"});
  auto annotation = [&](const char* name) -> std::optional<std::string> {
    // Annotations are strings; anything else is no record.
    const Json& value = JsonAt(pod, {"metadata", "annotations", name});
    return value.is_string() ? std::optional(value.get<std::string>()) : std::nullopt;
  };
  const std::optional<std::string> chosen = annotation(ledger::kChosenAnnotation);
  const std::optional<std::string> allocated = annotation(ledger::kAllocatedAnnotation);
  const int64_t cpu_millicores = PodCpuMillicores(pod);
  return BoundPod(
      {.key = key,
       .uid = uid,
       .resource_version = resource_version,
       .node = node,
       .phase = phase,
       .chosen = chosen,
       .allocated = allocated,
       .cpu_millicores = cpu_millicores,
       .failed = phase == "Failed" ? std::make_shared<const Json>(std::move(pod)) : nullptr});
}

}  // namespace gpustack::op
