#include "host/kubelet_rpc/server.h"

#include <poll.h>
#include <sys/socket.h>

#include <nghttp2/nghttp2.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "host/common/logging.h"
#include "host/common/process_stop.h"
#include "host/kubelet_rpc/framing.h"
#include "host/kubelet_rpc/nghttp2_glue.h"
#include "host/kubelet_rpc/socket.h"

namespace gpustack::kubelet_rpc {

// What a streaming call's handler has sent and the serving thread has not yet taken.
struct ServerStream::Outbox {
  explicit Outbox(std::shared_ptr<Waker> waker) : waker(std::move(waker)) {}
  const std::shared_ptr<Waker> waker;
  std::mutex mutex;
  std::deque<std::string> frames;  // framed messages
  std::optional<Status> finish;    // Finish() was called
  bool ended = false;              // the call is over: nothing more is taken
};

bool ServerStream::Send(std::string message) {
  {
    std::lock_guard lock(outbox_->mutex);
    if (outbox_->ended || outbox_->finish) return false;
    if (outbox_->frames.size() >= kMaxQueuedMessages) {
      // The client reads nothing (HTTP/2's flow control holds the rest here): end the call
      // rather than keep all it will never read.
      outbox_->finish = Error{
          fmt::format("the client has not read {} messages: the call is ended", kMaxQueuedMessages),
          Code::kResourceExhausted};
      outbox_->frames.clear();
      Logger("kubelet-rpc")
          ->warn("a streaming call ended: its client read none of {} messages", kMaxQueuedMessages);
    } else {
      outbox_->frames.push_back(FrameMessage(message));
    }
  }
  outbox_->waker->Wake();
  return open();
}

void ServerStream::Finish(Status status) {
  {
    std::lock_guard lock(outbox_->mutex);
    if (outbox_->ended || outbox_->finish) return;
    outbox_->finish = std::move(status);
  }
  outbox_->waker->Wake();
}

bool ServerStream::open() const {
  std::lock_guard lock(outbox_->mutex);
  return !outbox_->ended && !outbox_->finish;
}

namespace {

constexpr int32_t kMaxConcurrentCalls = 100;

// One HTTP/2 stream: a call, from its request headers to its trailers.
struct Call {
  std::string method;  // :method
  std::string path;    // :path
  std::string content_type;
  std::string body;
  bool body_too_large = false;
  // The response's framed messages not yet handed to nghttp2, from `sent` on.
  std::string out;
  size_t sent = 0;
  std::shared_ptr<ServerStream::Outbox> outbox;  // streaming calls
  std::optional<Status> final;                   // the status the trailers carry, once known
  bool deferred = false;                         // nghttp2 waits for resume_data
};

struct Listener {
  FileDescriptor fd;
  std::shared_ptr<const Service> service;
};

struct Connection {
  FileDescriptor fd;
  std::shared_ptr<const Service> service;
  nghttp2_session* session = nullptr;
  std::map<int32_t, Call> calls;
  std::vector<int32_t> ready;  // calls whose request has ended, to dispatch
  ~Connection() {
    for (auto& [id, call] : calls) {
      if (!call.outbox) continue;
      std::lock_guard lock(call.outbox->mutex);
      call.outbox->ended = true;
    }
    if (session != nullptr) nghttp2_session_del(session);
  }
};

Connection& ConnectionOf(void* user_data) { return *static_cast<Connection*>(user_data); }

Call* CallOf(Connection& connection, int32_t stream_id) {
  auto it = connection.calls.find(stream_id);
  return it == connection.calls.end() ? nullptr : &it->second;
}

ssize_t SendBytes(nghttp2_session*, const uint8_t* data, size_t length, int, void* user_data) {
  return SendNonBlocking(ConnectionOf(user_data).fd.get(), data, length);
}

int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    ConnectionOf(user_data).calls.try_emplace(frame->hd.stream_id);
  }
  return 0;
}

int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t name_length,
             const uint8_t* value, size_t value_length, uint8_t, void* user_data) {
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  Call* call = CallOf(ConnectionOf(user_data), frame->hd.stream_id);
  if (call == nullptr) return 0;
  const std::string_view key(reinterpret_cast<const char*>(name), name_length);
  const std::string_view text(reinterpret_cast<const char*>(value), value_length);
  if (key == ":path") call->path = text;
  if (key == ":method") call->method = text;
  if (key == "content-type") call->content_type = text;
  return 0;
}

int OnDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t length,
                void* user_data) {
  Call* call = CallOf(ConnectionOf(user_data), stream_id);
  if (call == nullptr || call->body_too_large) return 0;
  // One request message and its prefix at most: the rest is not kept.
  if (call->body.size() + length > kMaxMessageBytes + 5) {
    call->body_too_large = true;
    call->body.clear();
    return 0;
  }
  call->body.append(reinterpret_cast<const char*>(data), length);
  return 0;
}

int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  const bool request_part = frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA;
  if (request_part && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
    Connection& connection = ConnectionOf(user_data);
    if (CallOf(connection, frame->hd.stream_id) != nullptr)
      connection.ready.push_back(frame->hd.stream_id);
  }
  return 0;
}

int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t, void* user_data) {
  Connection& connection = ConnectionOf(user_data);
  auto it = connection.calls.find(stream_id);
  if (it == connection.calls.end()) return 0;
  if (it->second.outbox) {
    std::lock_guard lock(it->second.outbox->mutex);
    it->second.outbox->ended = true;  // the client cancelled or the call completed
  }
  connection.calls.erase(it);
  return 0;
}

// The trailers that end a call: grpc-status and, on failure, grpc-message.
int SubmitTrailers(nghttp2_session* session, int32_t stream_id, const Status& status) {
  const std::string code = std::to_string(static_cast<int>(status.code()));
  const std::string message = status ? std::string() : PercentEncode(status.error());
  std::vector<nghttp2_nv> trailers = {Header("grpc-status", code)};
  if (!status) trailers.push_back(Header("grpc-message", message));
  return nghttp2_submit_trailer(session, stream_id, trailers.data(), trailers.size());
}

ssize_t ReadResponse(nghttp2_session* session, int32_t stream_id, uint8_t* buffer, size_t length,
                     uint32_t* data_flags, nghttp2_data_source*, void* user_data) {
  Call* call = CallOf(ConnectionOf(user_data), stream_id);
  if (call == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (call->sent == call->out.size() && call->outbox) {
    call->out.clear();
    call->sent = 0;
    std::lock_guard lock(call->outbox->mutex);
    for (std::string& frame : call->outbox->frames) call->out += frame;
    call->outbox->frames.clear();
    if (call->outbox->finish) call->final = *call->outbox->finish;
  }
  if (call->sent < call->out.size()) {
    const size_t n = std::min(length, call->out.size() - call->sent);
    std::memcpy(buffer, call->out.data() + call->sent, n);
    call->sent += n;
    return static_cast<ssize_t>(n);
  }
  if (call->final) {
    *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    if (SubmitTrailers(session, stream_id, *call->final) != 0)
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
  }
  call->deferred = true;
  return NGHTTP2_ERR_DEFERRED;
}

// A call refused before any response: the status goes in the response headers ("Trailers-Only").
void RefuseCall(nghttp2_session* session, int32_t stream_id, const Error& error,
                std::string_view http_status = "200") {
  const std::string code = std::to_string(static_cast<int>(error.code));
  const std::string message = PercentEncode(error.message);
  const nghttp2_nv headers[] = {Header(":status", http_status),
                                Header("content-type", "application/grpc"),
                                Header("grpc-status", code), Header("grpc-message", message)};
  nghttp2_submit_response(session, stream_id, headers, std::size(headers), nullptr);
}

void Respond(Connection& connection, int32_t stream_id) {
  const nghttp2_nv headers[] = {Header(":status", "200"),
                                Header("content-type", "application/grpc")};
  nghttp2_data_provider provider{};
  provider.read_callback = ReadResponse;
  nghttp2_submit_response(connection.session, stream_id, headers, std::size(headers), &provider);
}

void Dispatch(Connection& connection, int32_t stream_id, const std::shared_ptr<Waker>& waker) {
  Call* call = CallOf(connection, stream_id);
  if (call == nullptr) return;
  nghttp2_session* session = connection.session;
  if (call->method != "POST") {
    RefuseCall(session, stream_id, Error{"gRPC calls are POSTs", Code::kUnimplemented}, "405");
    return;
  }
  if (!IsGrpcContentType(call->content_type)) {
    RefuseCall(
        session, stream_id,
        Error{fmt::format("content-type {:?} is not gRPC", call->content_type), Code::kInternal},
        "415");
    return;
  }
  const Service& service = *connection.service;
  const auto unary = service.unary.find(call->path);
  const auto streaming = service.streaming.find(call->path);
  if (unary == service.unary.end() && streaming == service.streaming.end()) {
    RefuseCall(session, stream_id,
               Error{fmt::format("unknown method {}", call->path), Code::kUnimplemented});
    return;
  }
  if (call->body_too_large) {
    RefuseCall(session, stream_id,
               Error{fmt::format("the request is over the limit of {} bytes", kMaxMessageBytes),
                     Code::kResourceExhausted});
    return;
  }
  auto messages = SplitMessages(call->body);
  if (!messages) {
    RefuseCall(session, stream_id, messages.failure());
    return;
  }
  if (messages->size() != 1) {
    RefuseCall(
        session, stream_id,
        Error{fmt::format("{} takes one request message, {} came", call->path, messages->size()),
              Code::kInternal});
    return;
  }
  const std::string& request = messages->front();
  call->body.clear();
  try {
    if (unary != service.unary.end()) {
      Result<std::string> response = unary->second(request);
      if (!response) {
        RefuseCall(session, stream_id, response.failure());
        return;
      }
      call->out = FrameMessage(*response);
      call->final = Ok{};
    } else {
      call->outbox = std::make_shared<ServerStream::Outbox>(waker);
      streaming->second(std::make_shared<ServerStream>(call->outbox), request);
    }
  } catch (const std::exception& e) {
    RefuseCall(session, stream_id,
               Error{fmt::format("{} failed: {}", call->path, e.what()), Code::kInternal});
    return;
  }
  Respond(connection, stream_id);
}

}  // namespace

struct Server::Impl {
  struct Watched {
    int fd;
    std::function<void()> on_readable;
  };
  std::vector<Watched> watched;
  std::vector<Listener> listeners;
  std::vector<std::unique_ptr<Connection>> connections;
  std::shared_ptr<Waker> waker = std::make_shared<Waker>();
  std::atomic<bool> stopping{false};
  std::thread thread;
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_option* options = nullptr;

  Impl() {
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_send_callback(callbacks, SendBytes);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, OnBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnDataChunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, OnFrame);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, OnStreamClose);
    nghttp2_option_new(&options);
    // gRPC clients name a unix socket's path as :authority, which HTTP's rules refuse; we check
    // what we read (:method, :path, content-type) ourselves.
    nghttp2_option_set_no_http_messaging(options, 1);
  }
  ~Impl() {
    connections.clear();
    nghttp2_option_del(options);
    nghttp2_session_callbacks_del(callbacks);
  }

  void Accept(const Listener& listener) {
    for (;;) {
      FileDescriptor fd(accept4(listener.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) return;  // EAGAIN: none left; anything else: the next poll says again
      auto connection = std::make_unique<Connection>();
      connection->fd = std::move(fd);
      connection->service = listener.service;
      if (nghttp2_session_server_new2(&connection->session, callbacks, connection.get(), options) !=
          0)
        return;
      const nghttp2_settings_entry settings[] = {
          {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentCalls}};
      nghttp2_submit_settings(connection->session, NGHTTP2_FLAG_NONE, settings,
                              std::size(settings));
      connections.push_back(std::move(connection));
    }
  }

  // Reads what arrived; false when the connection is over (closed, or broke the protocol).
  static bool Receive(Connection& connection) {
    uint8_t buffer[16384];
    for (;;) {
      const ssize_t n = recv(connection.fd.get(), buffer, sizeof(buffer), 0);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      if (nghttp2_session_mem_recv(connection.session, buffer, static_cast<size_t>(n)) < 0)
        return false;
    }
  }

  // Dispatches the calls whose requests are complete and sends what nghttp2 has; false when the
  // connection is over.
  bool Advance(Connection& connection) {
    std::vector<int32_t> ready;
    ready.swap(connection.ready);
    for (const int32_t id : ready) Dispatch(connection, id, waker);
    for (auto& [id, call] : connection.calls) {
      if (!call.deferred) continue;
      call.deferred = false;
      nghttp2_session_resume_data(connection.session, id);
    }
    if (nghttp2_session_send(connection.session) != 0) return false;
    return nghttp2_session_want_read(connection.session) != 0 ||
           nghttp2_session_want_write(connection.session) != 0;
  }

  void Run() {
    std::vector<pollfd> fds;
    while (!stopping) {
      fds.clear();
      fds.push_back({waker->fd(), POLLIN, 0});
      for (const Watched& w : watched) fds.push_back({w.fd, POLLIN, 0});
      for (const Listener& listener : listeners) fds.push_back({listener.fd.get(), POLLIN, 0});
      for (const auto& connection : connections) {
        short events = POLLIN;
        if (nghttp2_session_want_write(connection->session) != 0) events |= POLLOUT;
        fds.push_back({connection->fd.get(), events, 0});
      }
      if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
      if (stopping) break;
      if ((fds[0].revents & POLLIN) != 0) waker->Drain();
      const pollfd* polled_fd = fds.data() + 1;
      for (const Watched& w : watched) {
        if (((polled_fd++)->revents & (POLLIN | POLLHUP | POLLERR)) != 0) w.on_readable();
      }
      for (const Listener& listener : listeners) {
        if (((polled_fd++)->revents & POLLIN) != 0) Accept(listener);
      }
      // Connections accepted just now are not in `fds`: they are polled next time round.
      const size_t polled = static_cast<size_t>(fds.data() + fds.size() - polled_fd);
      std::vector<bool> over(connections.size(), false);
      for (size_t i = 0; i < connections.size(); ++i) {
        Connection& connection = *connections[i];
        bool alive = true;
        if (i < polled && (polled_fd[i].revents & (POLLIN | POLLHUP | POLLERR)))
          alive = Receive(connection);
        over[i] = !alive || !Advance(connection);
      }
      for (size_t i = connections.size(); i-- > 0;) {
        if (over[i]) connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    for (auto& connection : connections) {
      // A GOAWAY, so a client knows to reconnect rather than retry on this connection.
      nghttp2_session_terminate_session(connection->session, NGHTTP2_NO_ERROR);
      (void)nghttp2_session_send(connection->session);
    }
    connections.clear();
  }
};

Server::Server() : impl_(std::make_unique<Impl>()) {}

Server::~Server() { Stop(); }

Status Server::Listen(const std::filesystem::path& socket, std::shared_ptr<const Service> service) {
  if (impl_->thread.joinable()) return Error{"Listen after Start", Code::kFailedPrecondition};
  auto fd = ListenUnix(socket);
  if (!fd) return fd.failure();
  impl_->listeners.push_back({std::move(*fd), std::move(service)});
  return Ok{};
}

Status Server::Watch(int fd, std::function<void()> on_readable) {
  if (impl_->thread.joinable()) return Error{"Watch after Start", Code::kFailedPrecondition};
  if (fd < 0) return Error{"Watch: no descriptor", Code::kInvalidArgument};
  impl_->watched.push_back({fd, std::move(on_readable)});
  return Ok{};
}

Status Server::Start(std::string_view thread_name) {
  if (impl_->thread.joinable()) return Ok{};
  if (!impl_->waker->valid()) {
    return Error{fmt::format("eventfd: {}", std::strerror(errno)), Code::kInternal};
  }
  impl_->thread = std::thread([impl = impl_.get(), name = std::string(thread_name)] {
    NameThisThread(name);
    impl->Run();
  });
  return Ok{};
}

void Server::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->stopping = true;
  impl_->waker->Wake();
  impl_->thread.join();
  impl_->listeners.clear();
}

}  // namespace gpustack::kubelet_rpc
