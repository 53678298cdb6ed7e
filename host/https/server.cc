#include "host/https/server.h"

#include <nlohmann/json.hpp>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "host/common/logging.h"
#include "host/common/process_stop.h"

namespace gpustack::https {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
namespace local = asio::local;
using Clock = std::chrono::steady_clock;

// The label of requests for paths no route serves: a client must not grow the counters at will.
constexpr const char* kUnknownPath = "(unknown)";
constexpr const char* kTooLarge = "(too large)";

std::string ErrorBody(const std::string& message) {
  return nlohmann::json{{"error", message}}.dump();
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

std::string Pem(X509* certificate) {
  std::string out;
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio && PEM_write_bio_X509(bio, certificate) == 1) {
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio, &data);
    out.assign(data, static_cast<size_t>(size));
  }
  BIO_free(bio);
  return out;
}

// The client's chain, leaf first (OpenSSL keeps the leaf apart from the rest on a server).
std::vector<std::string> PeerChain(SSL* ssl) {
  std::vector<std::string> chain;
  X509* leaf = SSL_get1_peer_certificate(ssl);
  if (!leaf) return chain;
  chain.push_back(Pem(leaf));
  if (STACK_OF(X509)* rest = SSL_get_peer_cert_chain(ssl)) {
    for (int i = 0; i < sk_X509_num(rest); ++i) {
      X509* c = sk_X509_value(rest, i);
      if (X509_cmp(c, leaf) != 0) chain.push_back(Pem(c));
    }
  }
  X509_free(leaf);
  return chain;
}

// Verification is the route's (it knows which authority it trusts): the handshake accepts any
// client certificate, or none.
int AcceptAnyClient(int, X509_STORE_CTX*) { return 1; }

}  // namespace

std::string Request::Header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (key == name) return value;
  return {};
}

struct ChunkStream::Shared {
  static constexpr size_t kMaxBuffered = 64 << 20;
  std::mutex mutex;
  std::deque<std::string> chunks;
  size_t buffered = 0;  // bytes in chunks
  bool closed = false;  // by the producer
  bool gone = false;    // the client went away, or the response ended
  std::function<void()> wake;
};

ChunkStream::ChunkStream() : shared_(std::make_shared<Shared>()) {}

void ChunkStream::Push(std::string chunk) {
  std::function<void()> wake;
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->gone || shared_->closed) return;
    shared_->buffered += chunk.size();
    shared_->chunks.push_back(std::move(chunk));
    // A client that stops reading must not make us keep everything for it: the stream ends
    // after what it has, and it starts again (a watch resumes from its last version).
    if (shared_->buffered > Shared::kMaxBuffered) shared_->closed = true;
    wake = shared_->wake;
  }
  if (wake) wake();
}

void ChunkStream::Close() {
  std::function<void()> wake;
  {
    std::lock_guard lock(shared_->mutex);
    shared_->closed = true;
    wake = shared_->wake;
  }
  if (wake) wake();
}

bool ChunkStream::Done() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->gone || shared_->closed;
}

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

struct Server::State : std::enable_shared_from_this<Server::State> {
  // Declared before `io`, so that they outlive it: destroying the io_context destroys the
  // suspended sessions, which still count their connection and log.
  ServerOptions options;
  std::map<std::string, https::Route> routes;  // by path
  uint16_t port = 0;
  std::atomic<int> connections{0};
  std::shared_ptr<spdlog::logger> log;
  mutable std::mutex mutex;  // guards tls, latencies, answers
  std::shared_ptr<asio::ssl::context> tls;
  std::map<std::string, LatencyHistogram> latencies;
  std::map<std::pair<std::string, int>, uint64_t> answers;  // path, status

  asio::io_context io;
  // Destroyed before the io_context they use.
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<local::stream_protocol::acceptor> local_acceptor;
  ino_t socket_inode = 0;  // the socket file it made, removed at Stop only if still there
  dev_t socket_device = 0;
  std::vector<std::thread> threads;

  std::shared_ptr<asio::ssl::context> Tls() {
    std::lock_guard lock(mutex);
    return tls;
  }

  void Record(const std::string& path, int status, Clock::duration took) {
    const double seconds = std::chrono::duration<double>(took).count();
    const bool routed = routes.contains(path);
    std::lock_guard lock(mutex);
    ++answers[{routed ? path : kUnknownPath, status}];
    if (!routed) return;
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

  // The route serving `path`: the exact one, else the longest prefix route above it.
  const https::Route* RouteFor(const std::string& path) const {
    if (auto exact = routes.find(path); exact != routes.end()) return &exact->second;
    const https::Route* best = nullptr;
    for (const auto& [key, route] : routes) {
      if (!route.prefix || path.compare(0, key.size(), key) != 0) continue;
      if (key.back() != '/' && path.size() > key.size() && path[key.size()] != '/') continue;
      if (!best || key.size() > best->path.size()) best = &route;
    }
    return best;
  }

  Response Answer(const http::request<http::string_body>& request,
                  const std::vector<std::string>& peer, std::string* route_path) {
    const std::string target(request.target());
    const size_t question = target.find('?');
    Request in{std::string(request.method_string()), target.substr(0, question),
               question == std::string::npos ? std::string() : target.substr(question + 1),
               request.body()};
    if (request.method() == http::verb::head) in.method = "GET";
    const https::Route* route = RouteFor(in.path);
    if (!route) return {404, ErrorBody("no such path: " + in.path)};
    *route_path = route->path;
    const std::vector<std::string>& methods = route->methods;
    if (std::find(methods.begin(), methods.end(), in.method) == methods.end())
      return {405, ErrorBody("only " + Join(methods))};
    for (const auto& field : request) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      in.headers.emplace_back(std::move(name), std::string(field.value()));
    }
    in.peer_certificates = peer;
    if (!options.dump_dir.empty() && !in.body.empty()) Dump(in.path, in.body);
    try {
      return route->handler(in);
    } catch (const std::exception& e) {
      return {500, ErrorBody(std::string("internal error: ") + e.what())};
    }
  }

  // The answer, and its stream when it is one. Counted under the route's path (a prefix route
  // under its prefix, so that object names never become series).
  std::pair<http::response<http::string_body>, std::shared_ptr<ChunkStream>> Respond(
      const http::request<http::string_body>& request, const std::vector<std::string>& peer) {
    const auto started = Clock::now();
    std::string route_path = kUnknownPath;
    Response answer = Answer(request, peer, &route_path);
    http::response<http::string_body> response;
    response.version(request.version());
    response.keep_alive(request.keep_alive());
    response.result(static_cast<http::status>(answer.status));
    response.set(http::field::content_type, answer.content_type);
    for (const auto& [name, value] : answer.headers) response.set(name, value);
    if (answer.stream) {
      response.chunked(true);
      response.keep_alive(false);  // a stream ends with its connection
    } else {
      response.body() = std::move(answer.body);
      response.prepare_payload();
    }
    if (request.method() == http::verb::head) response.body().clear();
    Record(route_path, answer.status, Clock::now() - started);
    return {std::move(response), std::move(answer.stream)};
  }

  // Writes a stream's chunks as they come, until the producer closes it or the client goes.
  template <class Stream>
  asio::awaitable<void> Pump(Stream& stream, http::response<http::string_body>& header,
                             const std::shared_ptr<ChunkStream>& source) {
    auto shared = source->shared();
    auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
    struct Gone {
      std::shared_ptr<ChunkStream::Shared> shared;
      ~Gone() {
        std::lock_guard lock(shared->mutex);
        shared->gone = true;
        shared->wake = nullptr;
      }
    } gone{shared};
    {
      std::lock_guard lock(shared->mutex);
      // The session runs on a strand: a wake posted there cannot slip between the check for
      // chunks below and the wait that follows it.
      shared->wake = [weak = std::weak_ptr<asio::steady_timer>(timer)] {
        if (auto t = weak.lock()) asio::post(t->get_executor(), [t] { t->cancel(); });
      };
    }
    http::response_serializer<http::string_body> serializer(header);
    beast::get_lowest_layer(stream).expires_after(options.request_timeout);
    co_await http::async_write_header(stream, serializer, asio::use_awaitable);
    for (;;) {
      std::deque<std::string> ready;
      bool closed = false;
      {
        std::lock_guard lock(shared->mutex);
        ready.swap(shared->chunks);
        shared->buffered = 0;
        closed = shared->closed;
      }
      for (const std::string& chunk : ready) {
        if (chunk.empty()) continue;
        beast::get_lowest_layer(stream).expires_after(options.request_timeout);
        co_await asio::async_write(stream, http::make_chunk(asio::buffer(chunk)),
                                   asio::use_awaitable);
      }
      if (closed) break;
      if (!ready.empty()) continue;
      timer->expires_after(std::chrono::seconds(30));
      beast::error_code ignored;
      co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
    beast::get_lowest_layer(stream).expires_after(options.request_timeout);
    co_await asio::async_write(stream, http::make_chunk_last(), asio::use_awaitable);
  }

  void Dump(const std::string& path, const std::string& body) {
    static std::atomic<uint64_t> sequence{0};
    std::string name = path.substr(1);
    std::replace(name.begin(), name.end(), '/', '_');
    const std::string file =
        options.dump_dir + "/" + name + "-" + std::to_string(sequence++) + ".json";
    if (FILE* out = std::fopen(file.c_str(), "w")) {
      std::fwrite(body.data(), 1, body.size(), out);
      std::fclose(out);
    }
  }

  void CountTooLarge() {
    log->warn("refused a request over the size limit ({} bytes)", options.body_limit);
    std::lock_guard lock(mutex);
    ++answers[{kTooLarge, 413}];
  }

  // Gives back the connection's place in the count when its session ends, however it ends.
  struct ConnectionSlot {
    std::atomic<int>& n;
    ~ConnectionSlot() { --n; }
  };

  // A TLS connection: the handshake, its requests, then a TLS shutdown.
  asio::awaitable<void> TlsSession(tcp::socket socket) {
    const ConnectionSlot slot{connections};
    auto tls_context = Tls();
    beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), *tls_context);
    try {
      beast::get_lowest_layer(stream).expires_after(options.request_timeout);
      co_await stream.async_handshake(asio::ssl::stream_base::server, asio::use_awaitable);
      const std::vector<std::string> peer = options.request_client_certificate
                                                ? PeerChain(stream.native_handle())
                                                : std::vector<std::string>{};
      co_await Serve(stream, peer);
      beast::error_code ignored;
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
      co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ignored));
    } catch (const boost::system::system_error& e) {
      Ended(e);
    } catch (const std::exception& e) {
      log->debug("connection ended: {}", e.what());
    }
  }

  // A connection on the unix socket: plain HTTP, its file's permissions are the access control.
  asio::awaitable<void> LocalSession(local::stream_protocol::socket socket) {
    const ConnectionSlot slot{connections};
    beast::basic_stream<local::stream_protocol> stream(std::move(socket));
    try {
      const std::vector<std::string> no_certificates;
      co_await Serve(stream, no_certificates);
      beast::error_code ignored;
      stream.socket().shutdown(local::stream_protocol::socket::shutdown_send, ignored);
    } catch (const boost::system::system_error& e) {
      Ended(e);
    } catch (const std::exception& e) {
      log->debug("connection ended: {}", e.what());
    }
  }

  void Ended(const boost::system::system_error& e) {
    if (e.code() == http::error::header_limit) {
      CountTooLarge();
    } else {
      log->debug("connection ended: {}", e.what());
    }
  }

  // Reads requests and writes their answers until the client or an answer ends the connection.
  template <class Stream>
  asio::awaitable<void> Serve(Stream& stream, const std::vector<std::string>& peer) {
    beast::flat_buffer buffer(16384);
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(options.body_limit);
      parser.header_limit(static_cast<uint32_t>(options.header_limit));
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
        CountTooLarge();
        http::response<http::string_body> too_large{http::status::payload_too_large, 11};
        too_large.set(http::field::content_type, "application/json");
        too_large.body() = ErrorBody("the request is larger than " +
                                     std::to_string(options.body_limit) + " bytes");
        too_large.keep_alive(false);
        too_large.prepare_payload();
        co_await http::async_write(stream, too_large, asio::use_awaitable);
        break;
      }
      if (read_error) throw boost::system::system_error(read_error);
      auto [response, streamed] = Respond(parser.get(), peer);
      if (streamed) {
        co_await Pump(stream, response, streamed);
        break;
      }
      const bool keep = response.keep_alive();
      co_await http::async_write(stream, response, asio::use_awaitable);
      if (!keep) break;
    }
  }

  asio::awaitable<void> Accept() {
    for (;;) {
      // One strand per connection: a stream's wake-ups are ordered with its own steps.
      tcp::socket socket =
          co_await acceptor->async_accept(asio::make_strand(io), asio::use_awaitable);
      if (connections.load() >= options.max_connections) {
        beast::error_code ignored;
        socket.close(ignored);
        continue;
      }
      ++connections;
      // A response's last small TLS record must not wait for the client's delayed ACK (Nagle):
      // that was a 40 ms tail on large answers.
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      auto executor = socket.get_executor();
      asio::co_spawn(executor, TlsSession(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> AcceptLocal() {
    for (;;) {
      local::stream_protocol::socket socket =
          co_await local_acceptor->async_accept(asio::make_strand(io), asio::use_awaitable);
      if (connections.load() >= options.max_connections) {
        beast::error_code ignored;
        socket.close(ignored);
        continue;
      }
      ++connections;
      auto executor = socket.get_executor();
      asio::co_spawn(executor, LocalSession(std::move(socket)), asio::detached);
    }
  }

  Status ListenLocal();
  Status ListenTcp();
};

Status Server::State::ListenLocal() {
  namespace fs = std::filesystem;
  const fs::path& path = options.unix_socket;
  const std::string where = "cannot listen for " + options.name + " on " + path.string() + ": ";
  if (path.string().size() >= sizeof(sockaddr_un{}.sun_path))
    return Error{where + "a unix socket path has at most " +
                 std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes"};
  std::error_code fec;
  fs::create_directories(path.parent_path(), fec);
  const local::stream_protocol::endpoint endpoint(path.string());
  if (fs::is_socket(fs::symlink_status(path, fec))) {
    // Someone still answering there keeps it (a rolling update's old process is not ours to
    // cut off); a socket nobody answers on was left by a process that died.
    local::stream_protocol::socket probe(io);
    beast::error_code refused;
    probe.connect(endpoint, refused);
    if (!refused) return Error{where + "another process is serving there"};
    fs::remove(path, fec);
  }
  if (fs::exists(fs::symlink_status(path, fec)))
    return Error{where + "something that is not a socket is there"};
  beast::error_code ec;
  local_acceptor = std::make_unique<local::stream_protocol::acceptor>(io);
  local_acceptor->open(endpoint.protocol(), ec);
  if (!ec) local_acceptor->bind(endpoint, ec);
  // Owner only, before anyone may connect (listen comes after). The file is checked to be the
  // socket just made, not something swapped in at the path since.
  struct stat made {};
  if (!ec && (::lstat(path.c_str(), &made) != 0 || !S_ISSOCK(made.st_mode)))
    ec.assign(EEXIST, boost::system::system_category());
  if (!ec && ::chmod(path.c_str(), 0600) != 0) ec.assign(errno, boost::system::system_category());
  if (!ec) local_acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Error{where + ec.message()};
  socket_inode = made.st_ino;
  socket_device = made.st_dev;
  asio::co_spawn(io, AcceptLocal(), asio::detached);
  return Ok{};
}

Status Server::State::ListenTcp() {
  if (!Tls()) return Error{"the " + options.name + " server has no certificate"};
  beast::error_code ec;
  const auto address = asio::ip::make_address(options.address, ec);
  if (ec)
    return Error{"bad " + options.name + " listen address " + options.address + ": " +
                 ec.message()};
  acceptor = std::make_unique<tcp::acceptor>(io);
  const tcp::endpoint endpoint(address, options.port);
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Error{"cannot listen for " + options.name + " on " + options.address + ":" +
                 std::to_string(options.port) + ": " + ec.message()};
  }
  port = acceptor->local_endpoint().port();
  asio::co_spawn(io, Accept(), asio::detached);
  return Ok{};
}

Server::Server(ServerOptions options, std::vector<Route> routes)
    : state_(std::make_shared<State>()) {
  state_->log = Logger(options.name);
  state_->options = std::move(options);
  for (Route& r : routes) {
    std::string path = r.path;
    state_->routes.emplace(std::move(path), std::move(r));
  }
}

Server::~Server() { Stop(); }

Status Server::SetCertificate(const KeyPair& pair) {
  auto tls = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  const std::string& name = state_->options.name;
  beast::error_code ec;
  tls->use_certificate_chain(asio::buffer(pair.cert_pem), ec);
  if (ec) return Error{"the " + name + " certificate is not usable: " + ec.message()};
  tls->use_private_key(asio::buffer(pair.key_pem), asio::ssl::context::pem, ec);
  if (ec) return Error{"the " + name + " key is not usable: " + ec.message()};
  if (SSL_CTX_check_private_key(tls->native_handle()) != 1)
    return Error{"the " + name + " key does not belong to its certificate"};
  if (state_->options.request_client_certificate)
    SSL_CTX_set_verify(tls->native_handle(), SSL_VERIFY_PEER, AcceptAnyClient);
  std::lock_guard lock(state_->mutex);
  state_->tls = std::move(tls);
  return Ok{};
}

Status Server::Start() {
  State& s = *state_;
  if (Status listening = s.options.unix_socket.empty() ? s.ListenTcp() : s.ListenLocal();
      !listening)
    return listening;
  for (int i = 0; i < std::max(1, s.options.threads); ++i)
    s.threads.emplace_back([state = state_] {
      NameThisThread("https");
      state->io.run();
    });
  return Ok{};
}

void Server::Stop() {
  if (!state_) return;
  state_->io.stop();
  for (std::thread& t : state_->threads) {
    if (t.joinable()) t.join();
  }
  state_->threads.clear();
  if (state_->local_acceptor) {
    // Only the file this server made: a successor may already serve at the path.
    struct stat now {};
    const std::string& path = state_->options.unix_socket.string();
    if (::lstat(path.c_str(), &now) == 0 && now.st_ino == state_->socket_inode &&
        now.st_dev == state_->socket_device)
      ::unlink(path.c_str());
    state_->local_acceptor.reset();
  }
}

uint16_t Server::port() const { return state_->port; }

std::map<std::string, LatencyHistogram> Server::Latencies() const {
  std::lock_guard lock(state_->mutex);
  return state_->latencies;
}

std::string Server::RenderMetrics(std::string_view family) const {
  const std::string requests = std::string(family) + "_requests_total";
  const std::string duration = std::string(family) + "_duration_seconds";
  std::lock_guard lock(state_->mutex);
  std::string out = "# HELP " + requests + " Requests answered, by path and HTTP status.\n# TYPE " +
                    requests + " counter\n";
  for (const auto& [key, n] : state_->answers) {
    out += requests + "{path=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  }
  out += "# HELP " + duration + " Time to answer one request, at the server.\n# TYPE " + duration +
         " histogram\n";
  for (const auto& [path, h] : state_->latencies) {
    const auto& bounds = LatencyHistogram::Bounds();
    for (size_t i = 0; i < bounds.size(); ++i) {
      char le[32];
      std::snprintf(le, sizeof le, "%g", bounds[i]);
      out += duration + "_bucket{path=\"" + path + "\",le=\"" + le + "\"} " +
             std::to_string(h.counts[i]) + "\n";
    }
    out +=
        duration + "_bucket{path=\"" + path + "\",le=\"+Inf\"} " + std::to_string(h.total) + "\n";
    out += duration + "_sum{path=\"" + path + "\"} " + std::to_string(h.sum_seconds) + "\n";
    out += duration + "_count{path=\"" + path + "\"} " + std::to_string(h.total) + "\n";
  }
  return out;
}

Result<KeyPair> CertificateFor(const std::filesystem::path& dir, const std::string& common_name) {
  if (!dir.empty()) return ReadCertificateDir(dir);
  Logger("https")->info("no certificate directory: serving a self-signed certificate for {}",
                        common_name);
  return MakeSelfSignedCertificate(common_name, {common_name, "localhost"}, {"127.0.0.1"},
                                   std::chrono::hours(24 * 365));
}

Result<std::unique_ptr<Server>> StartEndpoint(const EndpointOptions& options,
                                              std::vector<Route> routes) {
  if (!options.server.unix_socket.empty()) {
    auto server = std::make_unique<Server>(options.server, std::move(routes));
    if (Status started = server->Start(); !started) return started.failure();
    return server;
  }
  auto certificate = CertificateFor(options.cert_dir, options.common_name);
  if (!certificate) return certificate.failure();
  auto server = std::make_unique<Server>(options.server, std::move(routes));
  if (Status set = server->SetCertificate(*certificate); !set) return set.failure();
  if (Status started = server->Start(); !started) return started.failure();
  return server;
}

std::vector<Route> HealthRoutes(HealthHandlers handlers) {
  const std::vector<std::string> get = {"GET"};
  std::vector<Route> routes = {
      {"/metrics", get,
       [metrics = handlers.metrics](const Request&) {
         return Response{200, metrics(), "text/plain; version=0.0.4; charset=utf-8"};
       }},
      {"/livez", get,
       [](const Request&) {
         return Response{200, "ok\n", "text/plain"};
       }},
      {"/readyz", get, [ready = handlers.ready, why = handlers.not_ready](const Request&) {
         return ready() ? Response{200, "ok\n", "text/plain"}
                        : Response{503, "not ready: " + why + "\n", "text/plain"};
       }}};
  if (handlers.snapshot) {
    routes.push_back({"/monitor/snapshot", get, [snapshot = handlers.snapshot](const Request&) {
                        return Response{200, snapshot(), "application/json"};
                      }});
  }
  return routes;
}

}  // namespace gpustack::https
