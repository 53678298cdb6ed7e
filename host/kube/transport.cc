#include "host/kube/transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

namespace gpustack::kube {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kMaxResponseBytes = 512u << 20;  // a LIST of many large objects still fits
constexpr size_t kMaxErrorBodyBytes = 1u << 20;

bool IsIpAddress(const std::string& host) {
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  if (code == 0) {
    return "unknown OpenSSL error";
  }
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return text;
}

}  // namespace

// --- TokenSource ---------------------------------------------------------------------------

TokenSource::TokenSource(std::string token, std::string file, std::chrono::seconds max_age)
    : token_(std::move(token)), file_(std::move(file)), max_age_(max_age) {
  valid_ = file_.empty();
}

Result<std::string> TokenSource::Token() {
  std::lock_guard lock(mutex_);
  if (file_.empty() || (valid_ && Clock::now() - read_at_ < max_age_)) {
    return token_;
  }
  std::ifstream in(file_);
  if (!in) {
    return Error{"cannot read the bearer token file " + file_, Code::kUnavailable};
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
    token.pop_back();
  }
  if (token.empty()) {
    return Error{"the bearer token file " + file_ + " is empty", Code::kUnavailable};
  }
  token_ = std::move(token);
  read_at_ = Clock::now();
  valid_ = true;
  return token_;
}

void TokenSource::Invalidate() {
  std::lock_guard lock(mutex_);
  if (!file_.empty()) {
    valid_ = false;
  }
}

// --- TLS context ---------------------------------------------------------------------------

struct Transport::TlsContext {
  ssl::context context{ssl::context::tls_client};
};

// --- Connection ----------------------------------------------------------------------------

class Connection {
 public:
  Connection(ssl::context& tls) : stream_(ioc_, tls) {}

  // Runs one asynchronous operation to completion or until `deadline`.
  template <class Start>
  beast::error_code Run(Clock::time_point deadline, Start&& start) {
    beast::error_code result = asio::error::would_block;
    beast::get_lowest_layer(stream_).expires_at(deadline);
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc_.restart();
    ioc_.run();
    return result;
  }

  // The apiserver's addresses. An address literal (in a cluster, KUBERNETES_SERVICE_HOST is one)
  // needs no resolver, whose asynchronous form starts a thread of its own for every connection.
  Result<std::vector<tcp::endpoint>> Endpoints(const ClientConfig& config,
                                               Clock::time_point deadline) {
    beast::error_code ec;
    const asio::ip::address literal = asio::ip::make_address(config.host, ec);
    char* end = nullptr;
    const unsigned long port = std::strtoul(config.port.c_str(), &end, 10);
    if (!ec && end != config.port.c_str() && *end == '\0' && port > 0 && port <= 65535)
      return std::vector<tcp::endpoint>{tcp::endpoint(literal, static_cast<uint16_t>(port))};
    tcp::resolver resolver(ioc_);
    std::vector<tcp::endpoint> endpoints;
    ec = asio::error::would_block;
    resolver.async_resolve(config.host, config.port,
                           [&](beast::error_code e, tcp::resolver::results_type r) {
                             ec = e;
                             for (const auto& entry : r) endpoints.push_back(entry.endpoint());
                           });
    ioc_.restart();
    ioc_.run_until(deadline);
    if (ec == asio::error::would_block) {
      return Error{"cannot resolve " + config.host + ": deadline exceeded", Code::kUnavailable};
    }
    if (ec) {
      return Error{"cannot resolve " + config.host + ": " + ec.message(), Code::kUnavailable};
    }
    return endpoints;
  }

  Status Open(const ClientConfig& config, Clock::time_point deadline) {
    auto endpoints = Endpoints(config, deadline);
    if (!endpoints) return endpoints.failure();
    beast::error_code ec = Run(deadline, [&](auto handler) {
      beast::get_lowest_layer(stream_).async_connect(
          *endpoints, [handler](beast::error_code e, const tcp::endpoint&) mutable { handler(e); });
    });
    if (ec) {
      return Error{"cannot connect to " + config.server + ": " + Describe(ec), Code::kUnavailable};
    }
    const std::string& name = config.tls_server_name.empty() ? config.host : config.tls_server_name;
    SSL* handle = stream_.native_handle();
    // SNI, spelled out: the OpenSSL macro casts in C style.
    if (!IsIpAddress(name) &&
        SSL_ctrl(handle, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(name.c_str())) != 1) {
      return Error{"cannot set the TLS server name: " + OpenSslError(), Code::kUnavailable};
    }
    if (!config.insecure_skip_tls_verify) {
      X509_VERIFY_PARAM* param = SSL_get0_param(handle);
      int set = IsIpAddress(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                                  : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
      if (set != 1) {
        return Error{"cannot set the name to verify: " + OpenSslError(), Code::kUnavailable};
      }
    }
    ec = Run(deadline,
             [&](auto handler) { stream_.async_handshake(ssl::stream_base::client, handler); });
    if (ec) {
      std::string why = Describe(ec);
      long verify = config.insecure_skip_tls_verify ? X509_V_OK : SSL_get_verify_result(handle);
      if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        why = "the server's certificate is not valid for \"" + name +
              "\" (check the server address, or set tls-server-name)";
      } else if (verify != X509_V_OK) {
        why = "the server's certificate was not accepted: " +
              std::string(X509_verify_cert_error_string(verify)) +
              " (is the kubeconfig's certificate-authority the server's CA?)";
      }
      return Error{"TLS handshake with " + config.server + " failed: " + why, Code::kUnavailable};
    }
    return Ok{};
  }

  static std::string Describe(const beast::error_code& ec) {
    if (ec == beast::error::timeout) {
      return "deadline exceeded";
    }
    return ec.message();
  }

  void Cancel() {
    asio::post(ioc_, [this] { beast::get_lowest_layer(stream_).cancel(); });
  }

  // An idle kept-alive connection the server has closed (or sent anything on) is readable;
  // reusing it would fail or read garbage, so it is dropped before use, as Go's client does.
  bool StillIdle() {
    pollfd fd{beast::get_lowest_layer(stream_).socket().native_handle(), POLLIN | POLLRDHUP, 0};
    return ::poll(&fd, 1, 0) == 0;
  }

  Clock::time_point idle_since{};

  void Close() {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(stream_).close();
  }

  asio::io_context ioc_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
};

// --- Transport -----------------------------------------------------------------------------

Transport::Transport(ClientConfig config, std::string user_agent)
    : config_(std::move(config)),
      user_agent_(std::move(user_agent)),
      tls_(std::make_unique<TlsContext>()),
      tokens_(config_.token, config_.token_file) {}

Transport::~Transport() = default;

Result<std::unique_ptr<Transport>> Transport::Create(const ClientConfig& config,
                                                     std::string user_agent) {
  std::unique_ptr<Transport> transport(new Transport(config, std::move(user_agent)));
  ssl::context& context = transport->tls_->context;
  beast::error_code ec;
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  if (config.insecure_skip_tls_verify) {
    context.set_verify_mode(ssl::verify_none);
  } else {
    context.set_verify_mode(ssl::verify_peer);
    if (config.ca_pem.empty()) {
      context.set_default_verify_paths(ec);
    } else {
      context.add_certificate_authority(asio::buffer(config.ca_pem), ec);
    }
    if (ec && config.ca_pem.empty()) {
      return Error{
          config.source + ": cannot load the system's trusted certificates (" + ec.message() + ")",
          Code::kInvalidArgument};
    }
    if (ec) {
      return Error{config.source + ": the certificate authority is not a valid PEM certificate (" +
                       ec.message() + ")",
                   Code::kInvalidArgument};
    }
  }
  if (!config.client_cert_pem.empty()) {
    context.use_certificate_chain(asio::buffer(config.client_cert_pem), ec);
    if (ec) {
      return Error{
          config.source + ": the client certificate is not valid PEM (" + ec.message() + ")",
          Code::kUnavailable};
    }
    context.use_private_key(asio::buffer(config.client_key_pem), ssl::context::pem, ec);
    if (ec) {
      return Error{config.source +
                       ": the client key is not valid PEM or does not match the certificate (" +
                       ec.message() + ")",
                   Code::kInvalidArgument};
    }
  }
  return transport;
}

Result<std::unique_ptr<Connection>> Transport::Acquire(Clock::time_point deadline, bool fresh,
                                                       bool* reused) {
  // Servers close idle connections (the apiserver after 90 s); ours expire a little sooner.
  constexpr auto kMaxIdleTime = std::chrono::seconds(60);
  if (!fresh) {
    std::lock_guard lock(pool_mutex_);
    while (!idle_.empty()) {
      auto connection = std::move(idle_.back());
      idle_.pop_back();
      if (Clock::now() - connection->idle_since < kMaxIdleTime && connection->StillIdle()) {
        *reused = true;
        return connection;
      }
    }
  }
  *reused = false;
  auto connection = std::make_unique<Connection>(tls_->context);
  if (Status opened = connection->Open(config_, deadline); !opened) {
    return opened.failure();
  }
  return connection;
}

void Transport::Release(std::unique_ptr<Connection> connection) {
  constexpr size_t kMaxIdleConnections = 8;
  connection->idle_since = Clock::now();
  std::lock_guard lock(pool_mutex_);
  if (idle_.size() < kMaxIdleConnections) {
    idle_.push_back(std::move(connection));
  }
}

Result<std::string> Transport::Authorization() {
  if (config_.token.empty() && config_.token_file.empty()) {
    return std::string();
  }
  auto token = tokens_.Token();
  if (!token) {
    return token.failure();
  }
  return "Bearer " + *token;
}

namespace {

template <class Request>
void PrepareRequest(Request& req, const HttpRequest& request, const ClientConfig& config,
                    const std::string& user_agent, const std::string& authorization) {
  req.method_string(request.method);
  req.target(config.path_prefix + request.target);
  req.version(11);
  bool ipv6 = config.host.find(':') != std::string::npos;
  req.set(http::field::host, (ipv6 ? "[" + config.host + "]" : config.host) + ":" + config.port);
  req.set(http::field::user_agent, user_agent);
  req.set(http::field::accept, "application/json, */*");  // logs and metrics are text
  if (!authorization.empty()) {
    req.set(http::field::authorization, authorization);
  }
  if (!request.content_type.empty()) {
    req.set(http::field::content_type, request.content_type);
  }
  req.body() = request.body;
  req.prepare_payload();
}

std::chrono::seconds RetryAfter(const http::fields& headers) {
  auto it = headers.find(http::field::retry_after);
  if (it == headers.end()) {
    return std::chrono::seconds(0);
  }
  try {
    return std::chrono::seconds(std::stoi(std::string(it->value())));
  } catch (...) {
    return std::chrono::seconds(0);
  }
}

}  // namespace

Result<HttpResponse> Transport::Send(const HttpRequest& request, Clock::time_point deadline) {
  bool refreshed_token = false;
  bool fresh_connection = false;
  for (;;) {
    auto authorization = Authorization();
    if (!authorization) {
      return authorization.failure();
    }
    bool reused = false;
    auto connection = Acquire(deadline, fresh_connection, &reused);
    if (!connection) {
      return connection.failure();
    }
    Connection& c = **connection;
    http::request<http::string_body> req;
    PrepareRequest(req, request, config_, user_agent_, *authorization);
    beast::error_code ec =
        c.Run(deadline, [&](auto handler) { http::async_write(c.stream_, req, handler); });
    bool written = !ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBytes);
    if (!ec) {
      ec = c.Run(deadline,
                 [&](auto handler) { http::async_read(c.stream_, c.buffer_, parser, handler); });
    }
    if (ec) {
      // A kept-alive connection can still die between the check in Acquire and our write.
      // Retry once on a fresh connection if the server cannot have acted on the request: the
      // write failed, or the method is safe to repeat.
      bool repeatable = !written || request.method == "GET" || request.method == "HEAD";
      if (reused && !fresh_connection && !parser.got_some() && repeatable &&
          ec != beast::error::timeout) {
        fresh_connection = true;
        continue;
      }
      return Error{request.method + " " + request.target + ": " + Connection::Describe(ec),
                   Code::kUnavailable};
    }
    auto& res = parser.get();
    HttpResponse response{static_cast<int>(res.result_int()), std::move(res.body()),
                          RetryAfter(res)};
    if (res.keep_alive()) {
      Release(std::move(*connection));
    }
    if (response.status == 401 && tokens_.FromFile() && !refreshed_token) {
      refreshed_token = true;
      tokens_.Invalidate();  // the token may have rotated since it was read
      continue;
    }
    return response;
  }
}

Status Transport::Stream(const HttpRequest& request, Clock::time_point header_deadline,
                         std::chrono::milliseconds idle_timeout,
                         const std::function<void(int)>& on_status,
                         const std::function<bool(std::string_view)>& on_data,
                         std::string* error_body, std::stop_token stop) {
  auto authorization = Authorization();
  if (!authorization) {
    return authorization.failure();
  }
  // A stream gets its own connection and never returns it to the pool.
  auto connection = std::make_unique<Connection>(tls_->context);
  Connection& c = *connection;
  std::atomic<bool> stopped{false};
  std::stop_callback on_stop(stop, [&] {
    stopped = true;
    c.Cancel();  // also ends a connect or handshake in progress
  });
  if (Status opened = c.Open(config_, header_deadline); !opened) {
    return stopped ? Status(Ok{}) : opened;
  }
  http::request<http::string_body> req;
  PrepareRequest(req, request, config_, user_agent_, *authorization);
  beast::error_code ec =
      c.Run(header_deadline, [&](auto handler) { http::async_write(c.stream_, req, handler); });
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  if (!ec) {
    ec = c.Run(header_deadline, [&](auto handler) {
      http::async_read_header(c.stream_, c.buffer_, parser, handler);
    });
  }
  if (stopped) {
    return Ok{};
  }
  if (ec) {
    return Error{request.method + " " + request.target + ": " + Connection::Describe(ec),
                 Code::kUnavailable};
  }
  int status = static_cast<int>(parser.get().result_int());
  on_status(status);
  if (status == 401) {
    tokens_.Invalidate();
  }
  std::string collected;
  // One TLS record's worth (16 KB): a read hands out at most one decrypted record, and every
  // watch holds this on its own thread's stack, resident for as long as the watch lives.
  char piece[16 * 1024];
  while (!parser.is_done()) {
    if (stopped) {
      return Ok{};
    }
    parser.get().body().data = piece;
    parser.get().body().size = sizeof(piece);
    ec = c.Run(Clock::now() + idle_timeout,
               [&](auto handler) { http::async_read_some(c.stream_, c.buffer_, parser, handler); });
    if (ec == http::error::need_buffer) {
      ec = {};
    }
    size_t n = sizeof(piece) - parser.get().body().size;
    if (stopped) {
      return Ok{};
    }
    if (ec) {
      if (ec == beast::error::timeout) {
        return Error{"watch " + request.target + ": nothing arrived for " +
                         std::to_string(idle_timeout.count()) + " ms",
                     Code::kUnavailable};
      }
      return Error{"watch " + request.target + ": " + Connection::Describe(ec), Code::kUnavailable};
    }
    if (n == 0) {
      continue;
    }
    if (status != 200) {
      if (collected.size() < kMaxErrorBodyBytes) {
        collected.append(piece, n);
      }
      continue;
    }
    if (!on_data(std::string_view(piece, n))) {
      c.Close();
      return Ok{};
    }
  }
  if (error_body != nullptr) {
    *error_body = std::move(collected);
  }
  return Ok{};
}

}  // namespace gpustack::kube
