// The Pod webhook's server alone (the project's https::Server with the MutatePod rule and a fixed
// A10G InstanceType), for a load generator on loopback: scripts/bench-webhook.sh drives h2load
// against it and this prints the server-side latency histogram when it stops.
//   webhook_bench <port> <seconds>
#include <csignal>
#include <cstdio>
#include <thread>

#include "host/common/files.h"
#include "host/https/server.h"
#include "host/operator/admission.h"
#include "tests/bench/report.h"

using namespace gpustack;
using op::Json;

namespace {

volatile std::sig_atomic_t g_stop = 0;

const Json& A10gType() {
  static const Json type = {
      {"metadata", {{"name", "gpustack--nvidia-a10g-linux-amd64"}}},
      {"spec", {{"acceleratable", true}, {"acceleratorGroup", "nvidia-a10g"}}},
      {"status", {{"detail", {{"manufacturer", "nvidia"}, {"memory", 24560}}}}}};
  return type;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: webhook_bench <port> <seconds>\n");
    return 2;
  }
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  auto ca = https::MakeCertificateAuthority("bench-ca", std::chrono::hours(24));
  auto serving = https::MakeServingCertificate(*ca, "localhost", {"localhost"}, {"127.0.0.1"},
                                               std::chrono::hours(24));
  op::AdmissionView view;
  view.manufacturers = {{"nvidia", {"nvidia", "nvidia.com/gpu", "mig", "bench"}}};
  view.instance_type_by_entrance = [](const std::string&) {
    return std::make_shared<const Json>(A10gType());
  };
  https::ServerOptions options{.name = "webhooks",
                               .address = "127.0.0.1",
                               .port = static_cast<uint16_t>(std::stoi(argv[1])),
                               .threads = 2};
  https::Server server(options,
                       {{op::kMutatePodPath, {"POST"}, [&](const https::Request& in) {
                           auto request = op::DecodeReview(in.body);
                           if (!request) return https::Response{400, request.error()};
                           return https::Response{
                               200, op::EncodeReview(request->uid, op::MutatePod(*request, view))};
                         }}});
  if (auto set = server.SetCertificate(*serving); !set) return 1;
  if (auto started = server.Start(); !started) {
    std::fprintf(stderr, "%s\n", started.error().c_str());
    return 1;
  }
  std::printf("listening on https://127.0.0.1:%u%s\n", server.port(), op::kMutatePodPath);
  std::fflush(stdout);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(std::stoi(argv[2]));
  while (!g_stop && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.Stop();
  for (const auto& [path, h] : server.Latencies()) {
    std::printf(
        "server-side %s: %lu requests, mean %.1f us, p50 <= %.0f us, p90 <= %.0f us, "
        "p99 <= %.0f us, p99.9 <= %.0f us (histogram bucket bounds)\n",
        path.c_str(), static_cast<unsigned long>(h.total),
        h.total ? 1e6 * h.sum_seconds / static_cast<double>(h.total) : 0.0, 1e6 * h.Quantile(0.5),
        1e6 * h.Quantile(0.9), 1e6 * h.Quantile(0.99), 1e6 * h.Quantile(0.999));
  }
  std::printf("VmHWM %ld KB\n", ProcStatusField("self", "VmHWM"));
  return 0;
}
