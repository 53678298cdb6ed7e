// HTTPS to one API server over Boost.Beast and OpenSSL: the server is verified against the
// configured CA and host name, the client authenticates with a certificate or a bearer token,
// and every exchange has a deadline. Idle connections are kept for reuse. The blocking calls
// drive asynchronous operations on a per-connection io_context, which is what gives them
// deadlines and lets another thread cancel a stream.
#ifndef GPUSTACK_HOST_KUBE_TRANSPORT_H_
#define GPUSTACK_HOST_KUBE_TRANSPORT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/kube/config.h"

namespace gpustack::kube {

using Clock = std::chrono::steady_clock;

struct HttpRequest {
  std::string method = "GET";
  std::string target;  // path and query, without the server's path prefix
  std::string body;
  std::string content_type;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::chrono::seconds retry_after{0};  // from Retry-After, when the server sent one
};

// The bearer token, from the config or re-read from its file when it may have rotated:
// at most `max_age` old, and at once after the server answered 401.
class TokenSource {
 public:
  TokenSource(std::string token, std::string file,
              std::chrono::seconds max_age = std::chrono::seconds(60));
  Result<std::string> Token();
  void Invalidate();
  bool FromFile() const { return !file_.empty(); }

 private:
  std::mutex mutex_;
  std::string token_;
  std::string file_;
  std::chrono::seconds max_age_;
  Clock::time_point read_at_{};
  bool valid_ = false;
};

class Connection;

class Transport {
 public:
  static Result<std::unique_ptr<Transport>> Create(const ClientConfig& config,
                                                   std::string user_agent);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // One request and its whole response. A failure to reach the server, or a deadline passed, is
  // an Error with code 0; any HTTP answer, 4xx and 5xx included, is a response.
  Result<HttpResponse> Send(const HttpRequest& request, Clock::time_point deadline);

  // A streamed response (watch). `on_status` sees the status once the headers arrive; for 200
  // `on_data` then gets each piece of body as it arrives, and for any other status the whole
  // body comes in `error_body`. Ends when the server ends the body, when `on_data` returns
  // false, when no byte arrived for `idle_timeout`, or when `stop` is requested (returns Ok).
  Status Stream(const HttpRequest& request, Clock::time_point header_deadline,
                std::chrono::milliseconds idle_timeout,
                const std::function<void(int status)>& on_status,
                const std::function<bool(std::string_view)>& on_data, std::string* error_body,
                std::stop_token stop);

  const ClientConfig& config() const { return config_; }

 private:
  Transport(ClientConfig config, std::string user_agent);
  // A pooled connection that is still usable (`*reused`), or a new one; `fresh` skips the pool.
  Result<std::unique_ptr<Connection>> Acquire(Clock::time_point deadline, bool fresh, bool* reused);
  void Release(std::unique_ptr<Connection> connection);
  Result<std::string> Authorization();

  struct TlsContext;
  ClientConfig config_;
  std::string user_agent_;
  std::unique_ptr<TlsContext> tls_;
  TokenSource tokens_;
  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace gpustack::kube

#endif  // GPUSTACK_HOST_KUBE_TRANSPORT_H_
