// The pools' capacity on the worker's /metrics (docs/behaviour.md §8): per InstanceType and view,
// what its status says, so a dashboard can chart the four views (and CPU) over time. Pure: the
// InstanceTypes as the worker last wrote them.
#ifndef GPUSTACK_HOST_OPERATOR_POOL_METRICS_H_
#define GPUSTACK_HOST_OPERATOR_POOL_METRICS_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace gpustack::op {

// gpustack_pool_capacity, gpustack_pool_remaining and gpustack_pool_once_max_request, labelled
// {pool, accelerator_group, view}: view "exclusive" (cards), "shared" (ownership slots), "sliced"
// (percent of a card's memory), "partitioned" (instances), "cpu" (cores). Views a pool does not
// report are left out.
std::string RenderPoolMetrics(const std::vector<nlohmann::json>& instance_types);

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_POOL_METRICS_H_
