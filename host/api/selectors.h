// Label and field selectors as the API's list and watch take them (apimachinery's grammar):
// `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, joined by commas. A field
// selector may name metadata.name and metadata.namespace only (what a CRD serves). Pure.
#ifndef GPUSTACK_HOST_API_SELECTORS_H_
#define GPUSTACK_HOST_API_SELECTORS_H_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/common/result.h"

namespace gpustack::api {

// What a selector reads of an object: its namespace, name and labels (string values, by key).
// Kept beside an object's text where the parsed object is not kept (cache.h).
struct Selectable {
  std::string ns;
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by key

  static Selectable Of(const nlohmann::json& object);
  const std::string* Label(std::string_view key) const;  // null when absent
};

class Selector {
 public:
  // An Error (kInvalidArgument) names what is malformed.
  static Result<Selector> ParseLabels(std::string_view text);
  static Result<Selector> ParseFields(std::string_view text);

  bool Matches(const Selectable& object) const;
  bool empty() const { return requirements_.empty(); }

 private:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kNotExists };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  bool fields_ = false;
  std::vector<Requirement> requirements_;
};

}  // namespace gpustack::api

#endif  // GPUSTACK_HOST_API_SELECTORS_H_
