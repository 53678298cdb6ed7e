// One unary call to a kubelet gRPC API on its unix socket (docs/kubelet-api.md §4), blocking
// until the answer or the timeout, on a connection of its own. The daemon calls the kubelet
// rarely (a registration per resource, the pod-resources List when an Allocate needs it), so it
// keeps nothing open between calls, and no thread.
#ifndef GPUSTACK_HOST_KUBELET_RPC_CLIENT_H_
#define GPUSTACK_HOST_KUBELET_RPC_CLIENT_H_

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "host/common/result.h"
#include "host/kubelet_rpc/message.h"

namespace gpustack::kubelet_rpc {

// `method` as "/v1beta1.Registration/Register"; the request and the response as their bytes.
// A failure carries the server's gRPC code and message, kUnavailable when nothing listens at
// `socket`, kDeadlineExceeded when no answer came in time.
Result<std::string> CallUnary(const std::filesystem::path& socket, std::string_view method,
                              std::string_view request, std::chrono::milliseconds timeout);

// The same with protobuf messages.
template <class Response, class Request>
Result<Response> Call(const std::filesystem::path& socket, std::string_view method,
                      const Request& request, std::chrono::milliseconds timeout) {
  auto bytes = CallUnary(socket, method, request.SerializeAsString(), timeout);
  if (!bytes) return bytes.failure();
  auto response = ParseMessage<Response>(*bytes);
  if (!response) {
    // The server's bytes are wrong, not the caller's request.
    return Error{fmt::format("{} on {}: {}", method, socket.string(), response.error()),
                 Code::kInternal};
  }
  return response;
}

}  // namespace gpustack::kubelet_rpc

#endif  // GPUSTACK_HOST_KUBELET_RPC_CLIENT_H_
