#include "host/kubelet_rpc/client.h"

#include <poll.h>
#include <sys/socket.h>

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "host/kubelet_rpc/framing.h"
#include "host/kubelet_rpc/nghttp2_glue.h"
#include "host/kubelet_rpc/socket.h"

namespace gpustack::kubelet_rpc {
namespace {

struct Exchange {
  FileDescriptor fd;
  std::string request;  // framed
  size_t sent = 0;
  std::string http_status;
  std::optional<int64_t> grpc_status;
  std::string grpc_message;
  std::string body;
  bool body_too_large = false;
  bool closed = false;
  uint32_t reset_code = 0;  // the HTTP/2 error code the stream closed with
};

Exchange& ExchangeOf(void* user_data) { return *static_cast<Exchange*>(user_data); }

ssize_t SendBytes(nghttp2_session*, const uint8_t* data, size_t length, int, void* user_data) {
  return SendNonBlocking(ExchangeOf(user_data).fd.get(), data, length);
}

int OnHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t* name, size_t name_length,
             const uint8_t* value, size_t value_length, uint8_t, void* user_data) {
  Exchange& exchange = ExchangeOf(user_data);
  const std::string_view key(reinterpret_cast<const char*>(name), name_length);
  const std::string_view text(reinterpret_cast<const char*>(value), value_length);
  if (key == ":status") exchange.http_status = text;
  if (key == "grpc-message") exchange.grpc_message = PercentDecode(text);
  if (key == "grpc-status") {
    int64_t code = 0;
    const bool digits =
        !text.empty() && text.size() < 10 &&
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) code = std::stoll(std::string(text));
    exchange.grpc_status = digits ? code : static_cast<int64_t>(Code::kUnknown);
  }
  return 0;
}

int OnDataChunk(nghttp2_session*, uint8_t, int32_t, const uint8_t* data, size_t length,
                void* user_data) {
  Exchange& exchange = ExchangeOf(user_data);
  if (exchange.body.size() + length > kMaxMessageBytes + 5) {
    exchange.body_too_large = true;
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  exchange.body.append(reinterpret_cast<const char*>(data), length);
  return 0;
}

int OnStreamClose(nghttp2_session*, int32_t, uint32_t error_code, void* user_data) {
  ExchangeOf(user_data).closed = true;
  ExchangeOf(user_data).reset_code = error_code;
  return 0;
}

ssize_t ReadRequest(nghttp2_session*, int32_t, uint8_t* buffer, size_t length, uint32_t* data_flags,
                    nghttp2_data_source*, void* user_data) {
  Exchange& exchange = ExchangeOf(user_data);
  const size_t n = std::min(length, exchange.request.size() - exchange.sent);
  std::memcpy(buffer, exchange.request.data() + exchange.sent, n);
  exchange.sent += n;
  if (exchange.sent == exchange.request.size()) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

struct Session {
  nghttp2_session* session = nullptr;
  ~Session() {
    if (session != nullptr) nghttp2_session_del(session);
  }
};

}  // namespace

Result<std::string> CallUnary(const std::filesystem::path& socket, std::string_view method,
                              std::string_view request, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string where = fmt::format("{} on {}", method, socket.string());
  Exchange exchange;
  auto fd = ConnectUnix(socket);
  if (!fd) return fd.failure().WithContext(where + ": ");
  exchange.fd = std::move(*fd);
  exchange.request = FrameMessage(request);

  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_send_callback(callbacks, SendBytes);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, OnStreamClose);
  Session session;
  const int created = nghttp2_session_client_new(&session.session, callbacks, &exchange);
  nghttp2_session_callbacks_del(callbacks);
  if (created != 0) return Error{where + ": cannot start an HTTP/2 session", Code::kInternal};

  nghttp2_submit_settings(session.session, NGHTTP2_FLAG_NONE, nullptr, 0);
  const std::string path(method);
  const std::string grpc_timeout = FormatTimeout(timeout);
  const nghttp2_nv headers[] = {Header(":method", "POST"),
                                Header(":scheme", "http"),
                                Header(":path", path),
                                Header(":authority", "localhost"),
                                Header("content-type", "application/grpc"),
                                Header("te", "trailers"),
                                Header("grpc-timeout", grpc_timeout)};
  nghttp2_data_provider provider{};
  provider.read_callback = ReadRequest;
  if (nghttp2_submit_request(session.session, nullptr, headers, std::size(headers), &provider,
                             nullptr) < 0)
    return Error{where + ": cannot submit the request", Code::kInternal};

  while (!exchange.closed) {
    if (nghttp2_session_send(session.session) != 0) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Error{fmt::format("{}: no answer within {} ms", where, timeout.count()),
                   Code::kDeadlineExceeded};
    }
    pollfd p{exchange.fd.get(), POLLIN, 0};
    if (nghttp2_session_want_write(session.session) != 0) p.events |= POLLOUT;
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    uint8_t buffer[16384];
    const ssize_t n = recv(exchange.fd.get(), buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      break;
    }
    if (nghttp2_session_mem_recv(session.session, buffer, static_cast<size_t>(n)) < 0) break;
  }
  if (exchange.body_too_large) {
    return Error{
        fmt::format("{}: the response is over the limit of {} bytes", where, kMaxMessageBytes),
        Code::kResourceExhausted};
  }
  if (!exchange.grpc_status) {
    // No gRPC status: the connection or stream broke, or this is not a gRPC server.
    return Error{
        fmt::format("{}: {}", where,
                    !exchange.closed ? std::string("the connection closed before the answer")
                    : exchange.reset_code != 0
                        ? fmt::format("the stream was reset ({})",
                                      nghttp2_http2_strerror(exchange.reset_code))
                        : fmt::format("no gRPC status (HTTP status {:?})", exchange.http_status)),
        Code::kUnavailable};
  }
  if (*exchange.grpc_status != 0) {
    return Error{fmt::format("{}: {}", where, exchange.grpc_message),
                 CodeFromNumber(*exchange.grpc_status)};
  }
  auto messages = SplitMessages(exchange.body);
  if (!messages) return messages.failure().WithContext(where + ": ");
  if (messages->size() != 1) {
    return Error{fmt::format("{}: {} response messages, one expected", where, messages->size()),
                 Code::kInternal};
  }
  return std::move(messages->front());
}

}  // namespace gpustack::kubelet_rpc
