// gRPC's wire format over HTTP/2, the parts that are not HTTP/2 (docs/kubelet-api.md §4): the
// length-prefixed messages of a request or response body, the grpc-message percent-encoding and
// the grpc-timeout header. Pure functions, so the server and the client share them and a fuzzer
// can reach them without a socket.
#ifndef GPUSTACK_HOST_KUBELET_RPC_FRAMING_H_
#define GPUSTACK_HOST_KUBELET_RPC_FRAMING_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"

namespace gpustack::kubelet_rpc {

// gRPC's default limit on a received message; the kubelet's messages are a few KB.
inline constexpr size_t kMaxMessageBytes = 4u << 20;

// One message as it travels: a zero "compressed" flag, four bytes of big-endian length, the bytes.
std::string FrameMessage(std::string_view message);

// Splits a body into its messages. Refused: a compressed message (no compression is ever
// negotiated: we send no grpc-accept-encoding), one over `max_bytes`, or a body that ends inside
// a message.
Result<std::vector<std::string>> SplitMessages(std::string_view body,
                                               size_t max_bytes = kMaxMessageBytes);

// Pulls the complete messages off the front of `buffer` (a stream's body as it arrives); what is
// left is the start of the next one. Errors as SplitMessages, except that a partial message is
// not one.
Result<std::vector<std::string>> TakeMessages(std::string& buffer,
                                              size_t max_bytes = kMaxMessageBytes);

// grpc-message is percent-encoded: bytes outside printable ASCII, and '%', as %XX.
std::string PercentEncode(std::string_view text);
std::string PercentDecode(std::string_view text);

// grpc-timeout as the client sends it: at most eight digits and a unit (here m or S). The
// server does not read it: its handlers answer at once or fail.
std::string FormatTimeout(std::chrono::milliseconds timeout);

// Whether a content-type names gRPC ("application/grpc" or "application/grpc+proto", any case).
bool IsGrpcContentType(std::string_view value);

}  // namespace gpustack::kubelet_rpc

#endif  // GPUSTACK_HOST_KUBELET_RPC_FRAMING_H_
