#include "host/ledger/allocated.h"

namespace gpustack::ledger {

using json = nlohmann::json;

Result<std::vector<RecordedAllocation>> ReadAllocatedRecord(std::string_view text,
                                                            std::string_view pod_uid) {
  const json record = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object())
    return Error{std::string("its ") + kAllocatedAnnotation + " annotation is not a JSON object",
                 Code::kInvalidArgument};
  std::vector<RecordedAllocation> out;
  for (const auto& [container, entry] : record.items()) {
    Result<Allocation> allocation = AllocationFromJson(entry);
    if (allocation &&
        (allocation->owner.pod_uid != pod_uid || allocation->owner.container != container)) {
      allocation = Error{"it names another pod or container", Code::kInvalidArgument};
    }
    out.push_back({container, std::move(allocation)});
  }
  return out;
}

Result<std::vector<RecordedAllocation>> AllocatedRecordOf(const json& pod) {
  const json* metadata = pod.is_object() && pod.contains("metadata") ? &pod["metadata"] : nullptr;
  if (metadata == nullptr || !metadata->is_object()) return std::vector<RecordedAllocation>{};
  auto annotations = metadata->find("annotations");
  if (annotations == metadata->end() || !annotations->is_object())
    return std::vector<RecordedAllocation>{};
  auto text = annotations->find(kAllocatedAnnotation);
  if (text == annotations->end() || !text->is_string()) return std::vector<RecordedAllocation>{};
  return ReadAllocatedRecord(text->get<std::string>(), metadata->value("uid", ""));
}

std::string AllocatedAnnotation(const std::vector<Allocation>& allocations) {
  json record = json::object();
  for (const Allocation& a : allocations) record[a.owner.container] = ToJson(a);
  return record.dump();
}

std::string ClaimsAnnotation(const std::vector<Allocation>& allocations) {
  json record = json::array();
  for (const Allocation& a : allocations) record.push_back(ToJson(a));
  return record.dump();
}

Result<std::vector<Allocation>> ClaimsAllocatedOf(const json& devices) {
  const json* annotations = nullptr;
  if (devices.is_object() && devices.contains("metadata") && devices["metadata"].is_object()) {
    auto a = devices["metadata"].find("annotations");
    if (a != devices["metadata"].end() && a->is_object()) annotations = &*a;
  }
  if (annotations == nullptr || !annotations->contains(kClaimsAnnotation))
    return std::vector<Allocation>{};
  const json& text = (*annotations)[kClaimsAnnotation];
  const json record =
      text.is_string() ? json::parse(text.get<std::string>(), nullptr, false) : json();
  if (!record.is_array()) {
    return Error{std::string("its ") + kClaimsAnnotation + " annotation is not a JSON array",
                 Code::kInvalidArgument};
  }
  std::vector<Allocation> out;
  for (const json& entry : record) {
    auto allocation = AllocationFromJson(entry);
    if (!allocation) {
      return Error{std::string("its ") + kClaimsAnnotation + " annotation: " + allocation.error(),
                   Code::kInvalidArgument};
    }
    out.push_back(std::move(*allocation));
  }
  return out;
}

}  // namespace gpustack::ledger
