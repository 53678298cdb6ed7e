#include "host/common/json_path.h"

namespace gpustack {

const nlohmann::json& JsonAt(const nlohmann::json& object, JsonPath path) {
  static const nlohmann::json kAbsent;
  const nlohmann::json* at = &object;
  for (std::string_view step : path) {
    if (!at->is_object()) return kAbsent;
    auto it = at->find(step);
    if (it == at->end()) return kAbsent;
    at = &*it;
  }
  return *at;
}

const nlohmann::json* ObjectAt(const nlohmann::json& object, JsonPath path) {
  const nlohmann::json& at = JsonAt(object, path);
  return at.is_object() ? &at : nullptr;
}

std::string StringAt(const nlohmann::json& object, JsonPath path) {
  const nlohmann::json& at = JsonAt(object, path);
  return at.is_string() ? at.get<std::string>() : std::string();
}

bool BoolAt(const nlohmann::json& object, JsonPath path, bool fallback) {
  const nlohmann::json& at = JsonAt(object, path);
  return at.is_boolean() ? at.get<bool>() : fallback;
}

int64_t IntAt(const nlohmann::json& object, JsonPath path, int64_t fallback) {
  const nlohmann::json& at = JsonAt(object, path);
  return at.is_number_integer() ? at.get<int64_t>() : fallback;
}

}  // namespace gpustack
