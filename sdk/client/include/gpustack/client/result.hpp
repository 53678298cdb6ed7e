// Result<T>: a value or an Error, for operations whose failure is expected (bad input, a missing
// file, a plugin that refuses, an API server that says no). Invariant violations are not Results.
// The SDK's client library returns it, and the host uses the same type everywhere
// (host/common/result.h), so a plugin's failure reaches the host's output unchanged.
//
// Every Error carries one canonical Code (the gRPC numbering, which the plugin ABI's
// gpustack_status shares), so the host's own checks, a plugin's status and a Kubernetes API
// failure are told apart by the same switch. What only an HTTP exchange has (its status and the
// Kubernetes Status reason) travels in fields of its own. A failure passes between Result types
// losslessly: `return other.failure();`, or `other.failure().WithContext("reading X: ")`.
#ifndef GPUSTACK_CLIENT_RESULT_HPP_
#define GPUSTACK_CLIENT_RESULT_HPP_

#include <gpustack/plugin_types.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gpustack {

enum class Code : int32_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "INVALID_ARGUMENT"; an out-of-range value reads "UNKNOWN".
std::string_view CodeName(Code code);

// The Code for a number in the gRPC/gpustack_status numbering; anything else is kUnknown.
Code CodeFromNumber(int64_t number);

struct Error {
  std::string message;
  Code code = Code::kUnknown;
  // Kubernetes API calls only: the HTTP status (0 when no answer came).
  int http_status = 0;
  // A machine-readable reason: the Kubernetes Status reason (NotFound, Conflict, Expired, ...),
  // or the setting a host-side refusal concerns ("library_path").
  std::string reason = {};

  // The same failure, its message prefixed with `context` (which ends in its own separator).
  Error WithContext(std::string_view context) const& {
    Error out = *this;
    out.message.insert(0, context);
    return out;
  }
  Error WithContext(std::string_view context) && {
    message.insert(0, context);
    return std::move(*this);
  }
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  const T& value() const& { return std::get<T>(state_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const std::string& error() const { return failure().message; }
  Code code() const { return ok() ? Code::kOk : failure().code; }
  const Error& failure() const& { return std::get<Error>(state_); }
  Error&& failure() && { return std::get<Error>(std::move(state_)); }

 private:
  std::variant<T, Error> state_;
};

// Result<void> spelled for operations that only succeed or fail.
struct Ok {};
using Status = Result<Ok>;

inline std::string_view CodeName(Code code) {
  // The plugin ABI's status numbering, without its INCOMPATIBLE_VERSION.
  const auto index = static_cast<int64_t>(code);
  return index >= 0 && index <= static_cast<int64_t>(Code::kUnauthenticated)
             ? sdk::kStatusNames[index]
             : "UNKNOWN";
}

inline Code CodeFromNumber(int64_t number) {
  return number >= 0 && number <= static_cast<int64_t>(Code::kUnauthenticated)
             ? static_cast<Code>(number)
             : Code::kUnknown;
}

}  // namespace gpustack

#endif  // GPUSTACK_CLIENT_RESULT_HPP_
