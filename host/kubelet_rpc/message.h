// Protobuf messages in and out of the RPC's bytes, for the server's handlers and the client.
// Templates on any MessageLite: this component itself links no protobuf.
#ifndef GPUSTACK_HOST_KUBELET_RPC_MESSAGE_H_
#define GPUSTACK_HOST_KUBELET_RPC_MESSAGE_H_

#include <string_view>

#include <fmt/format.h>

#include "host/common/result.h"

namespace gpustack::kubelet_rpc {

template <class Message>
Result<Message> ParseMessage(std::string_view bytes) {
  Message message;
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Error{fmt::format("the message does not parse as {}", message.GetTypeName()),
                 Code::kInvalidArgument};
  }
  return message;
}

}  // namespace gpustack::kubelet_rpc

#endif  // GPUSTACK_HOST_KUBELET_RPC_MESSAGE_H_
