// The order a pass's writes run in: phase by phase, whatever order the reconcilers returned them
// in, and a phase with a failure stops the phases after it.
#include "host/operator/reconciler.h"

#include <gtest/gtest.h>

#include <mutex>

namespace gpustack::op {
namespace {

struct Recorder {
  std::mutex mutex;
  std::vector<std::string> ran;
  Write Make(const std::string& name, Phase phase, bool ok = true) {
    return {name, "write " + name, phase, [this, name, ok]() -> Status {
              std::lock_guard lock(mutex);
              ran.push_back(name);
              if (!ok) return Error{"refused"};
              return Ok{};
            }};
  }
};

TEST(RunWrites, PhasesRunInOrderWhateverOrderTheWritesCameIn) {
  Recorder r;
  std::vector<Write> writes = {r.Make("node", Phase::kNodes), r.Make("delete", Phase::kDeletions),
                               r.Make("queue", Phase::kReferring),
                               r.Make("flavor", Phase::kReferenced)};
  std::map<std::string, bool> counted;
  auto errors = RunWrites(writes, 4, [&](const Write& w, bool ok) { counted[w.kind] = ok; });
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(r.ran, (std::vector<std::string>{"flavor", "queue", "delete", "node"}));
  EXPECT_EQ(counted.size(), 4u);
}

TEST(RunWrites, AFailedPhaseStopsTheRestAndNamesTheWrite) {
  Recorder r;
  std::vector<Write> writes = {
      r.Make("flavor", Phase::kReferenced), r.Make("queue", Phase::kReferring, /*ok=*/false),
      r.Make("entrance", Phase::kReferring), r.Make("node", Phase::kNodes)};
  int failures = 0;
  auto errors = RunWrites(writes, 1, [&](const Write&, bool ok) { failures += ok ? 0 : 1; });
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "write queue: refused");
  EXPECT_EQ(failures, 1);
  // The whole failed phase ran; the node phase did not.
  EXPECT_EQ(std::count(r.ran.begin(), r.ran.end(), "node"), 0);
  EXPECT_EQ(std::count(r.ran.begin(), r.ran.end(), "entrance"), 1);
}

TEST(OwnedKeys, ReadsTheKeysAManagerOwns) {
  const Json node = Json::parse(R"({"metadata": {"managedFields": [
      {"manager": "gpustack-worker-nodes", "operation": "Apply",
       "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}, ".": {}}}}},
      {"manager": "gpustack-worker-nodes", "operation": "Apply", "subresource": "status",
       "fieldsV1": {"f:status": {"f:capacity": {"f:x": {}}}}},
      {"manager": "kubectl", "operation": "Update",
       "fieldsV1": {"f:metadata": {"f:labels": {"f:c": {}}}}}]}})");
  EXPECT_EQ(OwnedKeys(OwnedFields(node, kNodesManager, ""), {"f:metadata", "f:labels"}),
            (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(OwnedKeys(OwnedFields(node, kNodesManager, "status"), {"f:status", "f:capacity"}),
            std::set<std::string>{"x"});
  EXPECT_TRUE(OwnedKeys(OwnedFields(node, "nobody", ""), {"f:metadata"}).empty());
  EXPECT_TRUE(OwnedKeys(OwnedFields(Json::object(), kNodesManager, ""), {"f:spec"}).empty());
}

}  // namespace
}  // namespace gpustack::op
