#include "host/kube/quantity.h"

#include <cctype>
#include <limits>

namespace gpustack::kube {
namespace {

using u128 = unsigned __int128;

// Past this the value is saturated: far beyond int64 in any unit the host reads.
constexpr u128 kSaturated = u128{1} << 120;
constexpr int64_t kNanoPerUnit = 1'000'000'000;
constexpr int64_t kNanoPerMilli = 1'000'000;

u128 MultiplySaturating(u128 a, u128 b) {
  if (a == 0 || b == 0) return 0;
  if (a > kSaturated / b) return kSaturated;
  return a * b;
}

struct Suffix {
  int power_of_ten = 0;
  int power_of_two = 0;
};

// The suffix's scale; false when `text` is no suffix apimachinery knows.
bool ReadSuffix(std::string_view text, Suffix* out) {
  static constexpr std::pair<std::string_view, Suffix> kKnown[] = {
      {"", {0, 0}},    {"n", {-9, 0}},  {"u", {-6, 0}},  {"m", {-3, 0}},
      {"k", {3, 0}},   {"M", {6, 0}},   {"G", {9, 0}},   {"T", {12, 0}},
      {"P", {15, 0}},  {"E", {18, 0}},  {"Ki", {0, 10}}, {"Mi", {0, 20}},
      {"Gi", {0, 30}}, {"Ti", {0, 40}}, {"Pi", {0, 50}}, {"Ei", {0, 60}}};
  for (const auto& [name, scale] : kKnown) {
    if (text == name) {
      *out = scale;
      return true;
    }
  }
  // A decimal exponent: e3, E-2, e+6.
  if (text.size() < 2 || (text[0] != 'e' && text[0] != 'E')) return false;
  size_t i = 1;
  const bool minus = text[i] == '-';
  if (text[i] == '-' || text[i] == '+') ++i;
  if (i == text.size() || text.size() - i > 3) return false;
  int exponent = 0;
  for (; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    exponent = exponent * 10 + (text[i] - '0');
  }
  *out = {minus ? -exponent : exponent, 0};
  return true;
}

int64_t Saturate(u128 magnitude, bool negative) {
  constexpr auto kMax = static_cast<u128>(std::numeric_limits<int64_t>::max());
  if (magnitude > kMax)
    return negative ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  const auto value = static_cast<int64_t>(magnitude);
  return negative ? -value : value;
}

}  // namespace

Result<Quantity> Quantity::Parse(std::string_view text) {
  const std::string quoted = "\"" + std::string(text.substr(0, 64)) + "\"";
  if (text.empty()) return Error{"an empty string is not a quantity", Code::kInvalidArgument};
  Quantity q;
  size_t i = 0;
  if (text[i] == '+' || text[i] == '-') q.negative_ = text[i++] == '-';
  // Up to 36 significant digits are kept exactly; an integer digit past them still counts, as a
  // power of ten, and a fraction digit past them only makes the value inexact.
  constexpr int kKeptDigits = 36;
  u128 mantissa = 0;
  int digits = 0, kept = 0, fraction_digits = 0, dropped_integer_digits = 0;
  bool point = false, dropped_nonzero = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    ++digits;
    if (mantissa == 0 && c == '0' && !point) continue;  // a leading zero is no significant digit
    if (kept < kKeptDigits) {
      mantissa = mantissa * 10 + static_cast<u128>(c - '0');
      if (mantissa != 0) ++kept;
      if (point) ++fraction_digits;
    } else if (!point) {
      ++dropped_integer_digits;
    } else {
      dropped_nonzero = dropped_nonzero || c != '0';
    }
  }
  if (digits == 0)
    return Error{quoted + " is not a quantity: it has no digits", Code::kInvalidArgument};
  Suffix scale;
  if (!ReadSuffix(text.substr(i), &scale)) {
    return Error{quoted + " is not a quantity: unknown suffix \"" + std::string(text.substr(i)) +
                     "\" (use m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent)",
                 Code::kInvalidArgument};
  }
  q.suffix_ = std::string(text.substr(i));
  // mantissa x 10^(9 - fraction + scale) x 2^scale2 nano-units.
  u128 nano = mantissa;
  int tens = 9 - fraction_digits + dropped_integer_digits + scale.power_of_ten;
  const auto divide_by_ten = [&] {
    if (nano % 10 != 0) q.finer_than_nano_ = true;
    nano /= 10;
    ++tens;
  };
  // Exact divisions first, so that a long fraction times a binary suffix ("4096.000...0Gi") does
  // not saturate on the way to a value that fits; an inexact one only where room runs out.
  while (tens < 0 && nano != 0 && nano % 10 == 0) divide_by_ten();
  for (int p = 0; p < scale.power_of_two; ++p) {
    if (tens < 0 && nano > kSaturated / 2) divide_by_ten();
    nano = MultiplySaturating(nano, 2);
  }
  for (; tens > 0; --tens) nano = MultiplySaturating(nano, 10);
  while (tens < 0 && nano != 0) divide_by_ten();
  if ((nano == 0 && mantissa != 0) || dropped_nonzero) q.finer_than_nano_ = true;
  q.saturated_ = nano >= kSaturated;
  q.nano_ = nano;
  if (q.nano_ == 0 && !q.finer_than_nano_) q.negative_ = false;  // -0 is 0
  return q;
}

Result<Quantity> Quantity::FromJson(const nlohmann::json& value) {
  if (value.is_string()) return Parse(value.get_ref<const std::string&>());
  if (value.is_number()) return Parse(value.dump());
  return Error{"a quantity is a number or a string, not " + std::string(value.type_name()),
               Code::kInvalidArgument};
}

int64_t Quantity::Milli() const {
  u128 milli = nano_ / kNanoPerMilli;
  if (nano_ % kNanoPerMilli != 0 || finer_than_nano_) ++milli;  // up, away from zero
  return Saturate(milli, negative_);
}

std::optional<int64_t> Quantity::Whole() const {
  if (saturated_) return Saturate(nano_, negative_);
  if (finer_than_nano_ || nano_ % kNanoPerUnit != 0) return std::nullopt;
  return Saturate(nano_ / kNanoPerUnit, negative_);
}

std::optional<int64_t> MilliOf(const nlohmann::json& value) {
  auto q = Quantity::FromJson(value);
  if (!q || q->negative()) return std::nullopt;
  const int64_t milli = q->Milli();
  if (milli == std::numeric_limits<int64_t>::max()) return std::nullopt;
  return milli;
}

std::optional<int64_t> WholeOf(const nlohmann::json& value) {
  auto q = Quantity::FromJson(value);
  if (!q) return std::nullopt;
  return q->Whole();
}

std::string FormatDecimal(int64_t units) {
  static constexpr const char* kSuffixes[] = {"", "k", "M", "G", "T", "P", "E"};
  size_t suffix = 0;
  while (units != 0 && units % 1000 == 0 && suffix + 1 < std::size(kSuffixes)) {
    units /= 1000;
    ++suffix;
  }
  return std::to_string(units) + kSuffixes[suffix];
}

std::string FormatMilli(int64_t milli) {
  return milli % 1000 == 0 ? std::to_string(milli / 1000) : std::to_string(milli) + "m";
}

std::string FormatBytes(int64_t bytes) {
  constexpr int64_t kMi = int64_t{1} << 20, kGi = int64_t{1} << 30;
  if (bytes % kGi == 0) return std::to_string(bytes / kGi) + "Gi";
  return std::to_string((bytes + kMi - 1) / kMi) + "Mi";
}

}  // namespace gpustack::kube
