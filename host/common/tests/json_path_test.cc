#include "host/common/json_path.h"

#include <gtest/gtest.h>

namespace gpustack {
namespace {

using Json = nlohmann::json;

TEST(JsonPath, ReadsWhatIsThereAndNothingElse) {
  const Json pod = Json::parse(R"({"metadata": {"name": "p", "labels": {"a": "b"}, "uid": 7},
                                   "spec": [1, 2], "status": null})");
  EXPECT_EQ(JsonAt(pod, {"metadata", "labels", "a"}), "b");
  EXPECT_EQ(StringAt(pod, {"metadata", "name"}), "p");
  EXPECT_EQ(StringAt(pod, {"metadata", "uid"}), "");           // not a string
  EXPECT_EQ(StringAt(pod, {"metadata", "missing", "x"}), "");  // a missing step
  EXPECT_TRUE(JsonAt(pod, {"spec", "containers"}).is_null());  // through an array
  EXPECT_TRUE(JsonAt(pod, {"status", "phase"}).is_null());     // through null
  EXPECT_EQ(ObjectAt(pod, {"metadata", "labels"}), &pod["metadata"]["labels"]);
  EXPECT_EQ(ObjectAt(pod, {"spec"}), nullptr);
  EXPECT_EQ(&JsonAt(pod, {}), &pod);
  EXPECT_EQ(pod.size(), 3u);  // nothing was inserted
  EXPECT_EQ(StringAt(Json("text"), {"a"}), "");
}

}  // namespace
}  // namespace gpustack
