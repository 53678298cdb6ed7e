// libFuzzer target: Pod request parsing and ledger JSON never crash, never accept what they cannot
// represent, and whatever they accept round-trips.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "host/ledger/ledger.h"
#include "host/ledger/request.h"
#include "tests/support/ledger_tables.h"

namespace {

using gpustack::ledger::FoldContext;
using gpustack::ledger::ResourceKind;

[[noreturn]] void Fail() { __builtin_trap(); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace d = gpustack::ledger;
  const auto json =
      nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(data), size), nullptr,
                            /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;

  static const std::vector<ResourceKind> kinds{{"nvidia", "nvidia.com/gpu", "mig"},
                                               {"amd", "amd.com/gpu", ""}};
  static const FoldContext fold{81920,
                                d::testing::FindPartitionTable("nvidia", "H100 80GB")->profiles};
  if (auto requests = d::ParsePodRequests(json, kinds, fold)) {
    for (const auto& r : *requests) {
      const auto& q = r.request;
      if (q.units < 0 || q.units > d::kCardCredits) Fail();
      if (q.mode == d::Mode::kShared && (q.count < 1 || q.count > 10)) Fail();
      if ((q.mode == d::Mode::kSliced || q.mode == d::Mode::kPartitioned) && q.count != 1) {
        Fail();
      }
    }
  }

  if (auto spec = d::SpecFromJson(json)) {
    auto again = d::SpecFromJson(d::ToJson(*spec));
    if (!again || !(*again == *spec)) Fail();
    d::NodeLedger ledger("fuzz", *spec);
    (void)ledger.ToStatus();
  }
  if (auto status = d::StatusFromJson(json)) {
    auto again = d::StatusFromJson(d::ToJson(*status));
    if (!again || !(*again == *status)) Fail();
  }
  if (auto allocation = d::AllocationFromJson(json)) {
    auto again = d::AllocationFromJson(d::ToJson(*allocation));
    if (!again || !(*again == *allocation)) Fail();
    // Restoring an arbitrary allocation onto a real node must refuse or fit, never over-charge.
    d::NodeLedger ledger("fuzz", {{{"g",
                                    "nvidia",
                                    "G",
                                    81920,
                                    0,
                                    "",
                                    "",
                                    "",
                                    "",
                                    {{"GPU-0", 0, {0}, {}, false, 4, false, {}}}}}});
    if (ledger.Restore(*allocation) && ledger.cards()[0].allocated > d::kCardCredits) Fail();
  }
  return 0;
}
