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

}  // namespace gpustack::ledger
