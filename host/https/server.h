// The one HTTPS server of the project: the worker's admission webhooks, its v1 APIs and health
// endpoints, and the node daemon's exporter are routes on it. HTTPS on
// Boost.Beast + OpenSSL, HTTP/1.1 keep-alive, every connection bounded in request size and in
// time and their number capped, so a slow or hostile client cannot hold it. The certificate can
// be swapped while serving: rotation never drops a connection, new ones get the new certificate.
#ifndef GPUSTACK_HOST_HTTPS_SERVER_H_
#define GPUSTACK_HOST_HTTPS_SERVER_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.h"
#include "host/https/certs.h"

namespace gpustack::https {

struct Request {
  std::string method;  // "GET", "POST"; HEAD reaches a GET route as "GET"
  std::string path;    // the target without its query
  std::string query;   // after '?', as sent
  std::string body;
  // Header fields as sent (names lower-cased); a repeated field appears once per value.
  std::vector<std::pair<std::string, std::string>> headers{};
  // The client's certificate chain (PEM, leaf first) when the server asks for one
  // (ServerOptions::request_client_certificate) and the client sent it. Not verified here: the
  // route knows which authority it trusts.
  std::vector<std::string> peer_certificates{};

  // The first value of a header field (`name` lower-case); empty when absent.
  std::string Header(std::string_view name) const;
};

// A response body written as it is produced (a watch): chunks pushed from any thread reach the
// client in order. The producer stops when Done() says the client went away or the stream closed.
// More than 64 MiB waiting for a client that does not read closes the stream.
class ChunkStream {
 public:
  ChunkStream();
  void Push(std::string chunk);
  void Close();  // ends the response after what was pushed
  bool Done() const;

  struct Shared;
  std::shared_ptr<Shared> shared() const { return shared_; }

 private:
  std::shared_ptr<Shared> shared_;
};

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers{};  // extra header fields
  // When set, `body` is ignored and the response is chunked from this stream until it closes.
  std::shared_ptr<ChunkStream> stream{};
};

// Runs on an I/O thread: it must not block for long. An exception becomes a 500.
using Handler = std::function<Response(const Request&)>;

struct Route {
  std::string path;
  std::vector<std::string> methods;  // the accepted ones; another gets 405
  Handler handler;
  // Serves every path under `path` too (the longest such route wins; an exact route first).
  bool prefix = false;
};

struct ServerOptions {
  std::string name = "https";  // names the server in the log ("webhooks", "exporter")
  std::string address = "0.0.0.0";
  uint16_t port = 0;            // 0: any free port (tests)
  int threads = 1;              // I/O threads
  size_t body_limit = 8 << 20;  // larger: 413, said, then the connection closes
  size_t header_limit = 16 << 10;
  std::chrono::seconds request_timeout{10};  // to read one request and write its answer
  std::chrono::seconds idle_timeout{90};     // a kept-alive connection with nothing to read
  int max_connections = 512;                 // more are closed at once
  // When set, every request body is also written here (the webhook fuzz corpus is seeded from
  // real apiserver requests this way).
  std::string dump_dir{};
  // Ask clients for a certificate (an aggregating apiserver's front-proxy identity); a client
  // without one is still served. Its chain reaches the handler in Request::peer_certificates.
  bool request_client_certificate = false;
  // When set, plain HTTP on this unix socket instead of HTTPS on address:port (no certificate
  // needed). The socket is made mode 0600: its owner is the only client. A socket left at the
  // path by a process that died is replaced; any other file there is an error.
  std::filesystem::path unix_socket{};
};

// Latency of the answers on one route, as a cumulative histogram (Prometheus buckets).
struct LatencyHistogram {
  static const std::vector<double>& Bounds();  // seconds
  std::vector<uint64_t> counts;                // per bound, cumulative; last = +Inf
  uint64_t total = 0;
  double sum_seconds = 0;
  // The q-quantile (0..1) read from the buckets: the upper bound of the bucket that holds it.
  double Quantile(double q) const;
};

class Server {
 public:
  Server(ServerOptions options, std::vector<Route> routes);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Installs the certificate new connections get; the error says what is wrong with it.
  Status SetCertificate(const KeyPair& pair);
  // Listens (after SetCertificate, unless on a unix socket) on the I/O threads; the error names
  // the address.
  Status Start();
  void Stop();
  uint16_t port() const;  // the bound port

  std::map<std::string, LatencyHistogram> Latencies() const;  // by route path
  // The answers by path and status, and the latency histograms, as Prometheus text under
  // `<family>_requests_total` and `<family>_duration_seconds`.
  std::string RenderMetrics(std::string_view family) const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// The certificate of a server configured with a certificate directory (tls.crt, tls.key), or a
// self-signed one for `common_name` when `dir` is empty.
Result<KeyPair> CertificateFor(const std::filesystem::path& dir, const std::string& common_name);

// A server whose certificate is fixed at start: the exporter's, the worker's health endpoint.
struct EndpointOptions {
  ServerOptions server{};
  std::filesystem::path cert_dir{};  // empty: self-signed
  std::string common_name{};
};
// Makes the certificate and starts listening; the error says which failed.
Result<std::unique_ptr<Server>> StartEndpoint(const EndpointOptions& options,
                                              std::vector<Route> routes);

// The routes every long-running process serves about itself: /metrics (Prometheus text),
// /livez, /readyz and, when `snapshot` is set, /monitor/snapshot (JSON).
struct HealthHandlers {
  std::function<std::string()> metrics{};
  std::function<bool()> ready{};
  std::string not_ready{};  // what /readyz says while not ready
  std::function<std::string()> snapshot{};
};
std::vector<Route> HealthRoutes(HealthHandlers handlers);

}  // namespace gpustack::https

#endif  // GPUSTACK_HOST_HTTPS_SERVER_H_
