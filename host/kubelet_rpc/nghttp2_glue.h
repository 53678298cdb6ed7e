// What the server and the client both hand nghttp2: a header pair without copies, and a
// non-blocking send with nghttp2's answers. Private to host/kubelet_rpc.
#ifndef GPUSTACK_HOST_KUBELET_RPC_NGHTTP2_GLUE_H_
#define GPUSTACK_HOST_KUBELET_RPC_NGHTTP2_GLUE_H_

#include <sys/socket.h>

#include <nghttp2/nghttp2.h>

#include <cerrno>
#include <cstdint>
#include <string_view>

namespace gpustack::kubelet_rpc {

// nghttp2 copies name and value when the frame is submitted; the views need only live until then.
inline nghttp2_nv Header(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

// A send callback's body: the bytes written, NGHTTP2_ERR_WOULDBLOCK when the socket is full.
inline ssize_t SendNonBlocking(int fd, const uint8_t* data, size_t length) {
  const ssize_t n = send(fd, data, length, MSG_NOSIGNAL);
  if (n >= 0) return n;
  if (errno == EAGAIN || errno == EWOULDBLOCK) return NGHTTP2_ERR_WOULDBLOCK;
  return NGHTTP2_ERR_CALLBACK_FAILURE;
}

}  // namespace gpustack::kubelet_rpc

#endif  // GPUSTACK_HOST_KUBELET_RPC_NGHTTP2_GLUE_H_
