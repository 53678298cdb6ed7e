#include "host/operator/webhook_server.h"

#include <nlohmann/json.hpp>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "host/common/logging.h"

namespace gpustack::op {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr int kMaxConnections = 512;

}  // namespace

const std::vector<double>& LatencyHistogram::Bounds() {
  static const std::vector<double> bounds = {0.00005, 0.0001, 0.0002, 0.0003, 0.0005, 0.00075,
                                             0.001,   0.002,  0.005,  0.01,   0.025,  0.05,
                                             0.1,     0.25,   0.5,    1,      2.5,    10};
  return bounds;
}

double LatencyHistogram::Quantile(double q) const {
  if (total == 0) return 0;
  const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total)));
  const auto& bounds = Bounds();
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (counts[i] >= rank) return bounds[i];
  }
  return INFINITY;
}

struct WebhookServer::State : std::enable_shared_from_this<WebhookServer::State> {
  WebhookServerOptions options;
  std::map<std::string, PostHandler> handlers;
  asio::io_context io;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  std::atomic<int> connections{0};

  mutable std::mutex mutex;  // guards tls, latencies, answers
  std::shared_ptr<asio::ssl::context> tls;
  std::map<std::string, LatencyHistogram> latencies;
  std::map<std::pair<std::string, int>, uint64_t> answers;  // path, status

  std::shared_ptr<asio::ssl::context> Tls() {
    std::lock_guard lock(mutex);
    return tls;
  }

  void Record(const std::string& path, int status, Clock::duration took) {
    const double seconds = std::chrono::duration<double>(took).count();
    std::lock_guard lock(mutex);
    ++answers[{path, status}];
    if (!handlers.contains(path)) return;
    LatencyHistogram& h = latencies[path];
    const auto& bounds = LatencyHistogram::Bounds();
    if (h.counts.empty()) h.counts.assign(bounds.size() + 1, 0);
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (seconds <= bounds[i]) ++h.counts[i];
    }
    ++h.counts.back();
    ++h.total;
    h.sum_seconds += seconds;
  }

  http::response<http::string_body> Respond(const http::request<http::string_body>& request) {
    const auto started = Clock::now();
    http::response<http::string_body> response;
    response.version(request.version());
    response.keep_alive(request.keep_alive());
    const std::string target(request.target());
    const std::string path = target.substr(0, target.find('?'));
    auto handler = handlers.find(path);
    HttpAnswer answer;
    if (handler == handlers.end()) {
      answer = {404, "{\"error\":\"no such webhook\"}"};
    } else if (request.method() != http::verb::post) {
      answer = {405, "{\"error\":\"only POST\"}"};
    } else {
      if (!options.dump_dir.empty()) Dump(path, request.body());
      try {
        answer = handler->second(request.body());
      } catch (const std::exception& e) {
        answer = {500,
                  nlohmann::json{{"error", std::string("internal error: ") + e.what()}}.dump()};
      }
    }
    response.result(static_cast<http::status>(answer.status));
    response.set(http::field::content_type, answer.content_type);
    response.body() = std::move(answer.body);
    response.prepare_payload();
    Record(path, answer.status, Clock::now() - started);
    return response;
  }

  void Dump(const std::string& path, const std::string& body) {
    static std::atomic<uint64_t> sequence{0};
    const std::string file =
        options.dump_dir + "/" + path.substr(1) + "-" + std::to_string(sequence++) + ".json";
    if (FILE* out = std::fopen(file.c_str(), "w")) {
      std::fwrite(body.data(), 1, body.size(), out);
      std::fclose(out);
    }
  }

  asio::awaitable<void> Session(tcp::socket socket) {
    struct Count {
      std::atomic<int>& n;
      ~Count() { --n; }
    } count{connections};
    auto tls_context = Tls();
    beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), *tls_context);
    try {
      beast::get_lowest_layer(stream).expires_after(options.request_timeout);
      co_await stream.async_handshake(asio::ssl::stream_base::server, asio::use_awaitable);
      beast::flat_buffer buffer(16384);
      for (;;) {
        http::request_parser<http::string_body> parser;
        parser.body_limit(options.body_limit);
        parser.header_limit(16384);
        // A kept-alive connection may wait this long for its next request.
        beast::get_lowest_layer(stream).expires_after(options.idle_timeout);
        beast::error_code read_error;
        co_await http::async_read_header(stream, buffer, parser,
                                         asio::redirect_error(asio::use_awaitable, read_error));
        beast::get_lowest_layer(stream).expires_after(options.request_timeout);
        if (!read_error && !parser.is_done())
          co_await http::async_read(stream, buffer, parser,
                                    asio::redirect_error(asio::use_awaitable, read_error));
        if (read_error == http::error::body_limit) {
          // Said, then closed: the rest of the body is never read.
          Logger("webhooks")
              ->warn("refused a request over the size limit ({} bytes)", options.body_limit);
          http::response<http::string_body> too_large{http::status::payload_too_large, 11};
          too_large.set(http::field::content_type, "application/json");
          too_large.body() = "{\"error\":\"the request is larger than " +
                             std::to_string(options.body_limit) + " bytes\"}";
          too_large.keep_alive(false);
          too_large.prepare_payload();
          {
            std::lock_guard lock(mutex);
            ++answers[{"(too large)", 413}];
          }
          co_await http::async_write(stream, too_large, asio::use_awaitable);
          break;
        }
        if (read_error) throw boost::system::system_error(read_error);
        auto response = Respond(parser.get());
        const bool keep = response.keep_alive();
        co_await http::async_write(stream, response, asio::use_awaitable);
        if (!keep) break;
      }
      beast::error_code ignored;
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
      co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ignored));
    } catch (const boost::system::system_error& e) {
      if (e.code() == http::error::body_limit || e.code() == http::error::header_limit) {
        Logger("webhooks")
            ->warn("refused a request over the size limit ({} bytes)", options.body_limit);
        std::lock_guard lock(mutex);
        ++answers[{"(too large)", 413}];
      } else {
        Logger("webhooks")->debug("connection ended: {}", e.what());
      }
    } catch (const std::exception& e) {
      Logger("webhooks")->debug("connection ended: {}", e.what());
    }
  }

  asio::awaitable<void> Accept() {
    for (;;) {
      tcp::socket socket = co_await acceptor->async_accept(asio::use_awaitable);
      if (connections.load() >= kMaxConnections) {
        beast::error_code ignored;
        socket.close(ignored);
        continue;
      }
      ++connections;
      asio::co_spawn(io, Session(std::move(socket)), asio::detached);
    }
  }
};

WebhookServer::WebhookServer(WebhookServerOptions options,
                             std::map<std::string, PostHandler> handlers)
    : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  state_->handlers = std::move(handlers);
}

WebhookServer::~WebhookServer() { Stop(); }

Status WebhookServer::SetCertificate(const std::string& cert_pem, const std::string& key_pem) {
  auto tls = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  beast::error_code ec;
  tls->use_certificate_chain(asio::buffer(cert_pem), ec);
  if (ec) return Error{"the webhook certificate is not usable: " + ec.message()};
  tls->use_private_key(asio::buffer(key_pem), asio::ssl::context::pem, ec);
  if (ec) return Error{"the webhook key is not usable: " + ec.message()};
  if (SSL_CTX_check_private_key(tls->native_handle()) != 1)
    return Error{"the webhook key does not belong to its certificate"};
  std::lock_guard lock(state_->mutex);
  state_->tls = std::move(tls);
  return Ok{};
}

Status WebhookServer::Start() {
  State& s = *state_;
  if (!s.Tls()) return Error{"the webhook server has no certificate"};
  beast::error_code ec;
  const auto address = asio::ip::make_address(s.options.address, ec);
  if (ec) return Error{"bad webhook listen address " + s.options.address + ": " + ec.message()};
  s.acceptor = std::make_unique<tcp::acceptor>(s.io);
  const tcp::endpoint endpoint(address, s.options.port);
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Error{"cannot listen for webhooks on " + s.options.address + ":" +
                 std::to_string(s.options.port) + ": " + ec.message()};
  }
  s.port = s.acceptor->local_endpoint().port();
  asio::co_spawn(s.io, s.Accept(), asio::detached);
  for (int i = 0; i < std::max(1, s.options.threads); ++i)
    s.threads.emplace_back([state = state_] { state->io.run(); });
  return Ok{};
}

void WebhookServer::Stop() {
  if (!state_) return;
  state_->io.stop();
  for (std::thread& t : state_->threads) {
    if (t.joinable()) t.join();
  }
  state_->threads.clear();
}

uint16_t WebhookServer::port() const { return state_->port; }

std::map<std::string, LatencyHistogram> WebhookServer::Latencies() const {
  std::lock_guard lock(state_->mutex);
  return state_->latencies;
}

std::string WebhookServer::RenderMetrics() const {
  std::lock_guard lock(state_->mutex);
  std::string out =
      "# HELP gpustack_webhook_requests_total Admission requests answered, by path and HTTP "
      "status.\n# TYPE gpustack_webhook_requests_total counter\n";
  for (const auto& [key, n] : state_->answers) {
    out += "gpustack_webhook_requests_total{path=\"" + key.first + "\",code=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  out +=
      "# HELP gpustack_webhook_duration_seconds Time to decide one admission request, at the "
      "server.\n# TYPE gpustack_webhook_duration_seconds histogram\n";
  for (const auto& [path, h] : state_->latencies) {
    const auto& bounds = LatencyHistogram::Bounds();
    for (size_t i = 0; i < bounds.size(); ++i) {
      char le[32];
      std::snprintf(le, sizeof le, "%g", bounds[i]);
      out += "gpustack_webhook_duration_seconds_bucket{path=\"" + path + "\",le=\"" + le + "\"} " +
             std::to_string(h.counts[i]) + "\n";
    }
    out += "gpustack_webhook_duration_seconds_bucket{path=\"" + path + "\",le=\"+Inf\"} " +
           std::to_string(h.total) + "\n";
    out += "gpustack_webhook_duration_seconds_sum{path=\"" + path + "\"} " +
           std::to_string(h.sum_seconds) + "\n";
    out += "gpustack_webhook_duration_seconds_count{path=\"" + path + "\"} " +
           std::to_string(h.total) + "\n";
  }
  return out;
}

}  // namespace gpustack::op
