// The daemon's HTTPS endpoint (reference §1.2, §8.2): /metrics (Prometheus), /monitor/snapshot
// (the latest sampling round, for the operator), /livez and /readyz. TLS always: the certificate
// from --cert-dir (tls.crt, tls.key) or, without one, a self-signed one made at start. One thread;
// every connection is bounded in time and size, so a slow or hostile client cannot hold it.
#ifndef GPUSTACK_HOST_NODE_EXPORTER_H_
#define GPUSTACK_HOST_NODE_EXPORTER_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "host/common/result.h"

namespace gpustack::node {

struct ExporterOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 32443;           // 0: any free port (tests)
  std::filesystem::path cert_dir;  // empty: self-signed
  std::string common_name = "gpustack-device-manager";
};

struct ExporterHandlers {
  std::function<std::string()> metrics;
  std::function<std::string()> snapshot;  // JSON
  std::function<bool()> ready;
};

class Exporter {
 public:
  Exporter(ExporterOptions options, ExporterHandlers handlers);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Loads or makes the certificate and starts listening: the error names what failed.
  Status Start();
  void Stop();
  uint16_t port() const;  // the bound port

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace gpustack::node

#endif  // GPUSTACK_HOST_NODE_EXPORTER_H_
