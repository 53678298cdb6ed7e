// Kubernetes resource quantities ("2", "500m", "1.5Gi", "1e3", "64Gi"), as apimachinery's
// resource.Quantity reads and writes them: the one parser for every quantity the host reads (Pod
// requests, InstanceType units, node capacity) and the formats it writes back. Pure.
#ifndef GPUSTACK_HOST_KUBE_QUANTITY_H_
#define GPUSTACK_HOST_KUBE_QUANTITY_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "host/common/result.h"

namespace gpustack::kube {

class Quantity {
 public:
  // <sign><digits>[.<digits>]<suffix>, the suffix binary (Ki Mi Gi Ti Pi Ei), decimal (n u m "" k
  // M G T P E) or an exponent (e3, E-2). The error says what is wrong.
  static Result<Quantity> Parse(std::string_view text);
  // A JSON integer, number or string, as a Kubernetes object carries it.
  static Result<Quantity> FromJson(const nlohmann::json& value);

  // The value in thousandths, rounded up as apimachinery's MilliValue does; saturates at the
  // int64 limits.
  int64_t Milli() const;
  // The value in whole units when it is a whole number; a value beyond every int64 is whole and
  // saturates as Milli does.
  std::optional<int64_t> Whole() const;
  bool negative() const { return negative_; }
  // The suffix as written ("", "m", "Gi", "e3"): some keys take plain numbers only.
  const std::string& suffix() const { return suffix_; }

 private:
  bool negative_ = false;
  // |value| x 10^9 (nano-units), saturated: every decimal suffix and milli rounding is exact in
  // it, binary suffixes are whole numbers of units.
  unsigned __int128 nano_ = 0;
  bool finer_than_nano_ = false;  // "1e-12": not exactly representable
  bool saturated_ = false;        // beyond 2^120 nano-units
  std::string suffix_;
};

// The non-negative value of a quantity in thousandths (CPU in millicores, memory in milli-bytes);
// nothing when `value` is not a quantity, is negative, or exceeds int64.
std::optional<int64_t> MilliOf(const nlohmann::json& value);
// The same in whole units, when the quantity is a whole number ("2", 2, "2000m").
std::optional<int64_t> WholeOf(const nlohmann::json& value);

// Canonical decimal form of a whole number: 320000 -> "320k", 7 -> "7".
std::string FormatDecimal(int64_t units);
// A value in thousandths: 2000 -> "2", 1500 -> "1500m".
std::string FormatMilli(int64_t milli);
// A byte count as Gi when whole, else Mi rounded up: 2^31 -> "2Gi", 1.5 Mi -> "2Mi".
std::string FormatBytes(int64_t bytes);

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_QUANTITY_H_
