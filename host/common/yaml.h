// JSON values written as YAML (what kubectl users read), through yaml-cpp's emitter. Strings that
// a YAML reader would take for a number, a boolean or null are quoted, so the YAML reads back as
// the same JSON.
#ifndef GPUSTACK_HOST_COMMON_YAML_H_
#define GPUSTACK_HOST_COMMON_YAML_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "host/common/result.h"

namespace gpustack {

std::string ToYaml(const nlohmann::json& value);

// YAML documents read as JSON (manifests, CRDs): plain scalars resolve as YAML 1.2's core schema
// does (null, booleans, integers, floats), quoted ones stay strings; anchors are expanded.
// Empty documents are skipped. A parse error names the line.
Result<std::vector<nlohmann::json>> FromYaml(const std::string& text);

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_YAML_H_
