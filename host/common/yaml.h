// JSON values written as YAML (what kubectl users read), through yaml-cpp's emitter. Strings that
// a YAML reader would take for a number, a boolean or null are quoted, so the YAML reads back as
// the same JSON.
#ifndef GPUSTACK_HOST_COMMON_YAML_H_
#define GPUSTACK_HOST_COMMON_YAML_H_

#include <nlohmann/json.hpp>

#include <string>

namespace gpustack {

std::string ToYaml(const nlohmann::json& value);

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_YAML_H_
