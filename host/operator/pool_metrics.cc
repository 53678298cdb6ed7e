#include "host/operator/pool_metrics.h"

#include "host/common/json_path.h"
#include "host/common/text.h"

namespace gpustack::op {
namespace {

struct View {
  const char* status_key;
  const char* name;
};
constexpr View kViews[] = {{"accelerator", "exclusive"},
                           {"acceleratorShared", "shared"},
                           {"acceleratorSliced", "sliced"},
                           {"acceleratorPartitioned", "partitioned"},
                           {"cpu", "cpu"}};

struct Measure {
  const char* family;
  const char* field;
  const char* help;
};
constexpr Measure kMeasures[] = {
    {"gpustack_pool_capacity", "capacity", "What the pool holds in this view."},
    {"gpustack_pool_remaining", "remaining", "What the pool has left in this view."},
    {"gpustack_pool_once_max_request", "onceMaxRequest",
     "The largest single request the pool can still take in this view."}};

}  // namespace

std::string RenderPoolMetrics(const std::vector<nlohmann::json>& instance_types) {
  std::string out;
  for (const Measure& m : kMeasures) {
    bool header = false;
    for (const nlohmann::json& t : instance_types) {
      const std::string pool = StringAt(t, {"metadata", "name"});
      const std::string group = StringAt(t, {"spec", "acceleratorGroup"});
      const bool acceleratable = !group.empty();
      for (const View& v : kViews) {
        // An accelerated pool's CPU view and a CPU pool's card views say nothing.
        if (acceleratable == (std::string(v.name) == "cpu")) continue;
        const nlohmann::json& value = JsonAt(t, {"status", v.status_key, m.field});
        if (!value.is_number()) continue;
        if (!header) {
          out += std::string("# HELP ") + m.family + " " + m.help + "\n# TYPE " + m.family +
                 " gauge\n";
          header = true;
        }
        out += std::string(m.family) + "{pool=\"" + PrometheusLabelValue(pool) +
               "\",accelerator_group=\"" + PrometheusLabelValue(group) + "\",view=\"" + v.name +
               "\"} " + value.dump() + "\n";
      }
    }
  }
  return out;
}

}  // namespace gpustack::op
