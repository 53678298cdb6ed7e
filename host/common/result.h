// Result<T>: a value or an error message, for operations whose failure is expected (bad input,
// a missing file, a plugin that refuses). Invariant violations are not Results.
#ifndef GPUSTACK_HOST_COMMON_RESULT_H_
#define GPUSTACK_HOST_COMMON_RESULT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace gpustack {

struct Error {
  std::string message;
  // For failures reported by a plugin: its gpustack_status. For Kubernetes API calls: the HTTP
  // status (0 when no answer came). -1 for the host's own errors.
  int32_t code = -1;
  // For Kubernetes API calls: the Status reason (NotFound, Conflict, Expired, ...), if any.
  std::string reason = {};
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
  const Error& failure() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Result<void> spelled for operations that only succeed or fail.
struct Ok {};
using Status = Result<Ok>;

}  // namespace gpustack

#endif  // GPUSTACK_HOST_COMMON_RESULT_H_
