// Allocate latency (issue 11): 1,000 slices, each a container of its own Pod, on ten fake cards,
// with the node as full as a kubelet lets it be (110 Pods: the oldest is deleted as one arrives).
//   decision  Allocator::Allocate in-process: identify, fit, reserve, grant, record (in memory)
//   grpc      the same through a v1beta1 DevicePlugin server on a unix socket, from a gRPC client
//   apiserver with KUBECONFIG set: the same, with the Pods listed from and the record patched on
//             a real apiserver (scripts/bench-node.sh starts one); Pods bound to a node without
//             a kubelet, so they stay Pending
// Prints p50, p99 and max per mode. Not a test: figures go to the README and the issue notes.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>

#include "host/common/logging.h"
#include "host/kube/client.h"
#include "host/kube/informer.h"
#include "host/node/device_plugin.h"
#include "host/node/pod_directory.h"
#include "host/node/tests/node_fixture.h"
#include "proto/deviceplugin.grpc.pb.h"

namespace {

using namespace gpustack;  // NOLINT(google-build-using-namespace): a benchmark's main
using Clock = std::chrono::steady_clock;

constexpr int kCalls = 1000;
constexpr int kCards = 10;

std::unique_ptr<runtime::NodeRuntime> Runtime(runtime::testing::Node& node) {
  auto script = runtime::testing::MakeScript("acme", 0x1234, kCards);
  script->identity.capabilities |= GPUSTACK_CAP_LOGICAL_SLICING;
  for (sdk::Accelerator& c : script->groups[0].accelerators) {
    c.logical_slice_count = 128;
    c.cores_percentage_overcommit = true;
  }
  node.AddPci(0x1234, kCards);
  auto runtime = runtime::NodeRuntime::Open(
      node.Options(), std::make_unique<runtime::testing::FakeSource>(
                          std::vector<runtime::testing::FakeSource::Entry>{
                              {runtime::testing::CandidateOf(*script), script}}));
  (*runtime)->Discover();
  return std::move(runtime).value();
}

constexpr size_t kPodsOnNode = 110;  // the kubelet's default maxPods

// Call `i`: a new Pod waits; once the node is full, the oldest goes (untimed), as on a busy node.
void Arrive(node::testing::MemoryPods& pods, node::Allocator& allocator, int i) {
  char created[32];
  std::snprintf(created, sizeof created, "2026-01-01T%02d:%02d:%02dZ", i / 3600, i / 60 % 60,
                i % 60);
  pods.Add("p" + std::to_string(i),
           {{"acme.example.com/accel.sliced", "1"},
            {"acme.example.com/accel.sliced.memory-percentage", "1"}},
           created);
  if (pods.pods.size() > kPodsOnNode) {
    const std::string uid = pods.pods.front()["metadata"]["uid"];
    pods.pods.erase(pods.pods.begin());
    allocator.ReleaseDeleted({uid});
  }
}

// The device the kubelet would offer, as GetPreferredAllocation answers (untimed).
std::string TokenFor(runtime::NodeRuntime& runtime, node::Allocator& allocator,
                     const node::ServedResource& sliced) {
  std::vector<std::string> available;
  runtime.WithLedger([&](ledger::NodeLedger& ledger) {
    for (const auto& t : node::TokensOf(ledger, sliced)) available.push_back(t.id);
  });
  return allocator.Prefer(sliced, available, {}, 1).at(0);
}

// One timed Allocate of the device GetPreferredAllocation would offer; exits on a refusal.
double TimedAllocate(runtime::NodeRuntime& runtime, node::Allocator& allocator,
                     const node::ServedResource& sliced, int i) {
  const std::string token = TokenFor(runtime, allocator, sliced);
  const auto start = Clock::now();
  auto result = allocator.Allocate(sliced, {token});
  const double micros = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  if (!result) {
    std::fprintf(stderr, "call %d: %s\n", i, result.error().c_str());
    std::exit(1);
  }
  return micros;
}

void Report(const char* mode, std::vector<double> micros) {
  std::sort(micros.begin(), micros.end());
  std::printf("%-30s n=%zu p50=%.0f us p99=%.0f us max=%.0f us\n", mode, micros.size(),
              micros[micros.size() / 2], micros[micros.size() * 99 / 100], micros.back());
}

node::ServedResource Sliced(runtime::NodeRuntime& runtime) {
  for (const auto& r : node::ResourcesOf(runtime.RunningIdentities().at(0), {})) {
    if (r.mode == ledger::Mode::kSliced) return r;
  }
  std::abort();
}

void Decision() {
  runtime::testing::Node node;
  auto runtime = Runtime(node);
  node::testing::MemoryPods pods;
  node::Allocator allocator(*runtime, pods, {});
  const auto sliced = Sliced(*runtime);
  std::vector<double> micros;
  for (int i = 0; i < kCalls; ++i) {
    Arrive(pods, allocator, i);
    micros.push_back(TimedAllocate(*runtime, allocator, sliced, i));
  }
  Report("decision", micros);
}

void Grpc() {
  runtime::testing::Node node;
  auto runtime = Runtime(node);
  node::testing::MemoryPods pods;
  node::Allocator allocator(*runtime, pods, {});
  const auto sliced = Sliced(*runtime);
  node::TokenBoard board(*runtime, {sliced});
  board.Refresh();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("gpustack-allocate-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  node::KubeletOptions options;
  options.device_plugin_dir = dir;  // no kubelet here: registration keeps retrying, unheeded
  options.register_retry = std::chrono::hours(1);
  node::KubeletFrontEnd front(board, allocator, options);
  front.Start();
  auto channel = grpc::CreateChannel("unix://" + (dir / node::SocketName(sliced.name)).string(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  std::vector<double> micros;
  for (int i = 0; i < kCalls; ++i) {
    Arrive(pods, allocator, i);
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(TokenFor(*runtime, allocator, sliced));
    v1beta1::AllocateResponse response;
    grpc::ClientContext context;
    const auto start = Clock::now();
    grpc::Status status = stub->Allocate(&context, request, &response);
    micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (!status.ok()) {
      std::fprintf(stderr, "call %d: %s\n", i, status.error_message().c_str());
      std::exit(1);
    }
  }
  Report("grpc", micros);
  front.Stop();
  std::filesystem::remove_all(dir);
}

// Through the kubelet API with the apiserver behind the allocator.
void Apiserver(bool with_cache) {
  auto client = kube::Client::FromEnvironment();
  if (!client) {
    std::fprintf(stderr, "apiserver: %s\n", client.error().c_str());
    std::exit(1);
  }
  const std::string ns =
      "allocate-bench-" + std::to_string(getpid()) + (with_cache ? "-cache" : "-list");
  if (auto made = (*client)->Create(
          kube::resources::Namespaces(),
          {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
      !made) {
    std::fprintf(stderr, "namespace: %s\n", made.error().c_str());
    std::exit(1);
  }
  runtime::testing::Node node;
  auto runtime = Runtime(node);
  node::KubePodDirectory pods(**client, "bench-node", "");
  kube::InformerOptions informer_options;
  informer_options.field_selector = "spec.nodeName=bench-node";
  kube::Informer informer(**client, kube::resources::Pods(), ns, informer_options);
  if (with_cache) {
    informer.Start();
    informer.WaitForSync(std::chrono::seconds(10));
    pods.set_informer(&informer);
  }
  node::Allocator allocator(*runtime, pods, {});
  const auto sliced = Sliced(*runtime);
  std::deque<std::string> live;
  std::vector<double> micros;
  for (int i = 0; i < kCalls; ++i) {
    const std::string name = "p" + std::to_string(i);
    kube::Json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}, {"namespace", ns}}},
        {"spec",
         {{"nodeName", "bench-node"},
          {"containers",
           kube::Json::array(
               {{{"name", "main"},
                 {"image", "busybox"},
                 {"resources",
                  {{"limits",
                    {{"acme.example.com/accel.sliced", "1"},
                     {"acme.example.com/accel.sliced.memory-percentage", "1"}}}}}}})}}}};
    auto created = (*client)->Create(kube::resources::Pods(), pod);
    if (!created) {
      std::fprintf(stderr, "create: %s\n", created.error().c_str());
      std::exit(1);
    }
    live.push_back((*created)["metadata"]["uid"]);
    if (live.size() > kPodsOnNode) {
      const std::string old = "p" + std::to_string(i - static_cast<int>(kPodsOnNode));
      (void)(*client)->Delete(kube::resources::Pods(), ns, old, {});
      allocator.ReleaseDeleted({live.front()});
      live.pop_front();
    }
    micros.push_back(TimedAllocate(*runtime, allocator, sliced, i));
  }
  Report(with_cache ? "apiserver (watch cache first)" : "apiserver (a list per call)", micros);
  pods.set_informer(nullptr);
  informer.Stop();
  (void)(*client)->Delete(kube::resources::Namespaces(), "", ns, {});
}

}  // namespace

int main() {
  InitLogging("off");
  Decision();
  Grpc();
  if (std::getenv("KUBECONFIG") != nullptr) {
    Apiserver(false);
    Apiserver(true);
  }
  return 0;
}
