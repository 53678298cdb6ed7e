// A gRPC server for the kubelet's APIs (docs/kubelet-api.md §4): unary and server-streaming
// methods on unix sockets, HTTP/2 by nghttp2, every socket and connection served by one thread
// that sleeps in poll() until a byte arrives or a stream has something to send. It replaces
// gRPC's sync servers in the node daemon, which took two threads a socket, and gRPC's own timer,
// executor and event-engine threads that woke the process every second (docs/footprint.md).
// Not a general gRPC server: no TLS, no compression, no client streaming; handlers run on the
// serving thread, so they must not wait on another call to this server.
#ifndef GPUSTACK_HOST_KUBELET_RPC_SERVER_H_
#define GPUSTACK_HOST_KUBELET_RPC_SERVER_H_

#include <cstddef>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "host/common/result.h"

namespace gpustack::kubelet_rpc {

// Messages a streaming call keeps for a client that does not read them; one more ends the call
// (RESOURCE_EXHAUSTED), so a stuck client cannot make the server hold without bound.
inline constexpr size_t kMaxQueuedMessages = 1000;

// The sending half of one server-streaming call. Thread-safe: any thread may send.
class ServerStream {
 public:
  // Queues one message (its serialized bytes); false once the call has ended (the client
  // cancelled, its connection closed, the server stopped, or the client read none of the last
  // kMaxQueuedMessages).
  bool Send(std::string message);
  // Ends the call with `status` after what is queued.
  void Finish(Status status = Ok{});
  bool open() const;

  // The server's side (server.cc).
  struct Outbox;
  explicit ServerStream(std::shared_ptr<Outbox> outbox) : outbox_(std::move(outbox)) {}

 private:
  std::shared_ptr<Outbox> outbox_;
};

// A unary method: the request's bytes in, the response's bytes (or a status) out.
using UnaryHandler = std::function<Result<std::string>(std::string_view request)>;
// A server-streaming method: called once when the call arrives; keeps `stream` to send on it.
using StreamHandler =
    std::function<void(std::shared_ptr<ServerStream> stream, std::string_view request)>;

// Methods by their path, "/v1beta1.DevicePlugin/Allocate".
struct Service {
  std::map<std::string, UnaryHandler, std::less<>> unary;
  std::map<std::string, StreamHandler, std::less<>> streaming;
};

class Server {
 public:
  Server();
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens on `socket` (a stale file there is replaced). Before Start() only.
  Status Listen(const std::filesystem::path& socket, std::shared_ptr<const Service> service);
  // Calls `on_readable` on the serving thread whenever `fd` is readable (the poll is
  // level-triggered: it must read what is there). Before Start only; `fd` stays its caller's, open
  // until Stop returns. For a descriptor whose events would otherwise need a thread of their own.
  Status Watch(int fd, std::function<void()> on_readable);
  // Serves every socket on one thread, named `thread_name`.
  Status Start(std::string_view thread_name);
  // Ends every call (streams see open() false), closes every connection and listener, joins the
  // thread. The socket files stay: their owner removes them.
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpustack::kubelet_rpc

#endif  // GPUSTACK_HOST_KUBELET_RPC_SERVER_H_
