#include "host/operator/pool_metrics.h"

#include <gtest/gtest.h>

namespace gpustack::op {
namespace {

TEST(PoolMetrics, EachPoolsViewsFromItsStatus) {
  const auto t4 = nlohmann::json::parse(R"({"metadata": {"name": "nvidia-t4"},
    "spec": {"acceleratable": true, "acceleratorGroup": "t4"},
    "status": {"accelerator": {"onceMaxRequest": 3, "remaining": 3, "capacity": 4},
               "acceleratorShared": {"onceMaxRequest": 10, "remaining": 38, "capacity": 40},
               "acceleratorSliced": {"onceMaxRequest": 100, "remaining": 360, "capacity": 400},
               "acceleratorPartitioned": {"onceMaxRequest": 0, "remaining": 0, "capacity": 0},
               "cpu": {"onceMaxRequest": 0, "remaining": 0, "capacity": 0}}})");
  const auto cpu = nlohmann::json::parse(R"({"metadata": {"name": "cpu"},
    "spec": {"acceleratable": false},
    "status": {"cpu": {"onceMaxRequest": 40, "remaining": 90, "capacity": 96}}})");
  const auto fresh = nlohmann::json::parse(R"({"metadata": {"name": "new"}, "spec": {}})");
  const std::string text = RenderPoolMetrics({t4, cpu, fresh});
  EXPECT_NE(text.find("gpustack_pool_capacity{pool=\"nvidia-t4\",accelerator_group=\"t4\","
                      "view=\"sliced\"} 400\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpustack_pool_remaining{pool=\"nvidia-t4\",accelerator_group=\"t4\","
                      "view=\"shared\"} 38\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpustack_pool_once_max_request{pool=\"cpu\",accelerator_group=\"\","
                      "view=\"cpu\"} 40\n"),
            std::string::npos);
  EXPECT_EQ(text.find("pool=\"nvidia-t4\",accelerator_group=\"t4\",view=\"cpu\""),
            std::string::npos);
  EXPECT_EQ(text.find("pool=\"new\""), std::string::npos) << "no status yet: nothing";
  EXPECT_EQ(text.find("# TYPE gpustack_pool_capacity gauge"),
            text.rfind("# TYPE gpustack_pool_capacity gauge"));
}

}  // namespace
}  // namespace gpustack::op
