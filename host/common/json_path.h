// Reading a field of a Kubernetes object by its path ({"metadata", "annotations", key}) without
// a walker of one's own: a missing step, or a step through something that is not an object,
// reads as absent. Never throws and never inserts (nlohmann's operator[] on a const object does
// both). Pure.
#ifndef GPUSTACK_HOST_COMMON_JSON_PATH_H_
#define GPUSTACK_HOST_COMMON_JSON_PATH_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace gpustack {

using JsonPath = std::initializer_list<std::string_view>;

// The value at `path` in `object`; a null value when it is not there.
const nlohmann::json& JsonAt(const nlohmann::json& object, JsonPath path);
// The object at `path`, or nullptr when it is absent or not an object.
const nlohmann::json* ObjectAt(const nlohmann::json& object, JsonPath path);
// The string at `path`; empty when it is absent or not a string.
std::string StringAt(const nlohmann::json& object, JsonPath path);
// The boolean at `path`; `fallback` when it is absent or not a boolean. nlohmann's value() throws
// on a type mismatch instead, and a mutating webhook sees a user's object before the schema does.
bool BoolAt(const nlohmann::json& object, JsonPath path, bool fallback = false);
// The integer at `path`; `fallback` when it is absent or not an integer.
int64_t IntAt(const nlohmann::json& object, JsonPath path, int64_t fallback = 0);

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_JSON_PATH_H_
