// The worker's admission endpoint (ARCHITECTURE §4): HTTPS on Boost.Beast + OpenSSL, HTTP/1.1
// keep-alive (the apiserver reuses connections), bounded in request size and in time, served by
// every replica (a webhook must answer while another replica leads). The certificate can be
// swapped while serving: rotation never drops a connection, new ones get the new certificate.
#ifndef GPUSTACK_HOST_OPERATOR_WEBHOOK_SERVER_H_
#define GPUSTACK_HOST_OPERATOR_WEBHOOK_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host/common/result.h"

namespace gpustack::op {

struct WebhookServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 9443;         // 0: any free port (tests)
  int threads = 2;              // I/O threads
  size_t body_limit = 8 << 20;  // an AdmissionReview carries the object and the old one
  std::chrono::seconds request_timeout{10};  // to read one request and write its answer
  std::chrono::seconds idle_timeout{90};     // a kept-alive connection with nothing to read
  // When set, every request body is also written here (the fuzz corpus is seeded from real
  // apiserver requests this way); GPUSTACK_WEBHOOK_DUMP_DIR.
  std::string dump_dir;
};

struct HttpAnswer {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};
// POST handlers by path; each runs on an I/O thread and must not block for long.
using PostHandler = std::function<HttpAnswer(const std::string& body)>;

// Latency of the handlers, per path, as a cumulative histogram (Prometheus buckets).
struct LatencyHistogram {
  static const std::vector<double>& Bounds();  // seconds
  std::vector<uint64_t> counts;                // per bound, cumulative; last = +Inf
  uint64_t total = 0;
  double sum_seconds = 0;
  // The q-quantile (0..1) read from the buckets: the upper bound of the bucket that holds it.
  double Quantile(double q) const;
};

class WebhookServer {
 public:
  WebhookServer(WebhookServerOptions options, std::map<std::string, PostHandler> handlers);
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Installs the certificate (PEM) new connections get; the error says what is wrong with it.
  Status SetCertificate(const std::string& cert_pem, const std::string& key_pem);
  // Listens (after SetCertificate) on the I/O threads.
  Status Start();
  void Stop();
  uint16_t port() const;

  std::map<std::string, LatencyHistogram> Latencies() const;
  // The histograms and request counters in Prometheus text.
  std::string RenderMetrics() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace gpustack::op

#endif  // GPUSTACK_HOST_OPERATOR_WEBHOOK_SERVER_H_
