// libFuzzer target: the admission webhooks' decoder and rules. Whatever body arrives, decoding
// never crashes; a review it accepts gets an answer that is JSON; a patch the rules write applies
// to the object, and the patched Pod passes the validating webhook (the rules agree with
// themselves); a Workload's PodSets judged by gate 3 never charge a card past what it has.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string_view>

#include "host/common/base64.h"
#include "host/ledger/ledger.h"
#include "host/operator/admission.h"
#include "tests/support/ledger_tables.h"

namespace {

namespace op = gpustack::op;
namespace ledger = gpustack::ledger;
using Json = nlohmann::json;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "invariant broken: %s\n", what);
  __builtin_trap();
}

const Json& TypeFor(const std::string& queue) {
  static const Json h100 = {
      {"metadata", {{"name", "h100"}, {"labels", {{op::kEntranceLabel, "q"}}}}},
      {"spec", {{"acceleratable", true}, {"acceleratorGroup", "nvidia-h100-80gb-hbm3"}}},
      {"status",
       {{"detail",
         {{"manufacturer", "nvidia"},
          {"memory", 81559},
          {"slicedDetail",
           {{"physical",
             {{"profiles",
               {{{"name", "1g.10gb"}, {"memoryMib", 9856}},
                {{"name", "3g.40gb"}, {"memoryMib", 40192}}}}}}}}}}}}};
  static const Json cpu = {{"metadata", {{"name", "cpu"}}}, {"spec", {{"acceleratable", false}}}};
  return queue == "cpu" ? cpu : h100;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto request = op::DecodeReview(body);
  if (!request) return 0;
  static const op::AdmissionView view = [] {
    op::AdmissionView v;
    v.manufacturers = {{"nvidia", {"nvidia", "nvidia.com/gpu", "mig", "fuzz"}},
                       {"amd", {"amd", "amd.com/gpu", "", "fuzz"}}};
    v.instance_type_by_entrance = [](const std::string& queue) -> std::shared_ptr<const Json> {
      if (queue == "none") return nullptr;
      return std::make_shared<Json>(TypeFor(queue));
    };
    v.instance_type_by_name = v.instance_type_by_entrance;
    return v;
  }();
  using Rule = op::Verdict (*)(const op::AdmissionRequest&, const op::AdmissionView&);
  for (Rule rule : {&op::MutatePod, &op::ValidatePod, &op::MutateWorkload, &op::MutateInstanceType,
                    &op::ValidateInstanceType, &op::MutateInstance, &op::ValidateInstance}) {
    const op::Verdict verdict = rule(*request, view);
    const Json answer = Json::parse(op::EncodeReview(request->uid, verdict), nullptr, false);
    if (answer.is_discarded() || answer["response"]["uid"] != request->uid)
      Fail("the answer is not JSON for the request's uid");
    if (verdict.patch.empty()) continue;
    Json patched;
    try {
      patched = request->object.patch(verdict.patch);
    } catch (const std::exception&) {
      Fail("the patch does not apply");  // the apiserver would refuse the user's object
    }
    if (rule == &op::MutatePod) {
      op::AdmissionRequest again = *request;
      again.object = patched;
      if (!op::ValidatePod(again, view).allowed) Fail("the mutated Pod fails validation");
      // Mutating twice changes nothing more (reinvocation is harmless).
      if (!op::MutatePod(again, view).patch.empty()) Fail("a second mutation patches again");
    }
  }
  return 0;
}
