// The kubelet front end over its own RPC server, against gRPC's client and a gRPC registration
// server standing in for the kubelet: every resource registered on its socket, ListAndWatch lists
// pushed when the ledger changes, Allocate answered, and a removed socket served again.
#include "host/node/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <thread>

#include "host/kubelet_rpc/client.h"
#include "host/node/tests/node_fixture.h"
#include "proto/deviceplugin.grpc.pb.h"

namespace gpustack::node {
namespace {

using namespace std::chrono_literals;

class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    std::lock_guard lock(mutex);
    requests.push_back(*request);
    return grpc::Status::OK;
  }
  std::vector<v1beta1::RegisterRequest> Requests() {
    std::lock_guard lock(mutex);
    return requests;
  }

 private:
  std::mutex mutex;
  std::vector<v1beta1::RegisterRequest> requests;
};

template <class Predicate>
bool Eventually(Predicate done) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

int Unhealthy(const v1beta1::ListAndWatchResponse& list) {
  int n = 0;
  for (const auto& device : list.devices()) n += device.health() == "Unhealthy" ? 1 : 0;
  return n;
}

TEST(KubeletFrontEnd, RegistersServesPushesAndServesAgain) {
  char pattern[] = "/tmp/front-end-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::filesystem::path dir = pattern;

  FakeKubelet kubelet;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + (dir / "kubelet.sock").string(),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&kubelet);
  auto kubelet_server = builder.BuildAndStart();
  ASSERT_NE(kubelet_server, nullptr);

  runtime::testing::Node node;
  auto runtime = testing::AcmeRuntime(node);
  ASSERT_NE(runtime, nullptr);
  const auto served = ResourcesOf(runtime->RunningIdentities().at(0), {});
  TokenBoard board(*runtime, served);
  board.Refresh();
  testing::MemoryPods pods;
  Allocator allocator(*runtime, pods, {});
  allocator.set_on_change([&] { board.Refresh(); });
  KubeletOptions options;
  options.device_plugin_dir = dir;
  auto front = std::make_unique<KubeletFrontEnd>(board, allocator, options);
  front->Start();

  ASSERT_TRUE(Eventually([&] { return front->registered_generations() == 1; }));
  std::set<std::string> registered;
  for (const auto& r : kubelet.Requests()) {
    EXPECT_EQ(r.version(), "v1beta1");
    EXPECT_EQ(r.endpoint(), SocketName(r.resource_name()));
    EXPECT_TRUE(std::filesystem::exists(dir / r.endpoint()));
    registered.insert(r.resource_name());
  }
  std::set<std::string> names;
  for (const ServedResource& r : served) names.insert(r.name);
  EXPECT_EQ(registered, names);

  const ServedResource& base = served.at(0);
  const ServedResource& sliced = *std::find_if(
      served.begin(), served.end(), [](const auto& r) { return r.mode == ledger::Mode::kSliced; });
  auto stub = [&](const ServedResource& r) {
    return v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
        "unix://" + (dir / SocketName(r.name)).string(), grpc::InsecureChannelCredentials()));
  };
  auto sliced_stub = stub(sliced);
  grpc::ClientContext watch_context;
  auto watch = sliced_stub->ListAndWatch(&watch_context, {});
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(watch->Read(&list));
  EXPECT_EQ(list.devices_size(), 16);  // two cards of eight slices
  EXPECT_EQ(Unhealthy(list), 0);

  grpc::ClientContext options_context;
  v1beta1::DevicePluginOptions plugin_options;
  ASSERT_TRUE(sliced_stub->GetDevicePluginOptions(&options_context, {}, &plugin_options).ok());
  EXPECT_TRUE(plugin_options.get_preferred_allocation_available());

  // A whole card goes to a Pod: its eight slices turn Unhealthy in the sliced list, pushed.
  pods.Add("whole", {{base.name, "1"}}, "2026-01-01T00:00:00Z");
  std::vector<std::string> base_tokens;
  runtime->WithLedger([&](ledger::NodeLedger& ledger) {
    for (const Token& t : TokensOf(ledger, base)) base_tokens.push_back(t.id);
  });
  ASSERT_FALSE(base_tokens.empty());
  auto base_stub = stub(base);
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids(base_tokens.front());
  v1beta1::AllocateResponse response;
  grpc::ClientContext allocate_context;
  grpc::Status status = base_stub->Allocate(&allocate_context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.container_responses_size(), 1);
  ASSERT_TRUE(watch->Read(&list));
  EXPECT_EQ(Unhealthy(list), 8);

  // A refusal reaches the kubelet as gRPC's status: a token that is not ours.
  request.mutable_container_requests(0)->set_devices_ids(0, "not-a-token");
  grpc::ClientContext refused_context;
  status = base_stub->Allocate(&refused_context, request, &response);
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(status.error_message().empty());

  // Bytes that are no AllocateRequest: refused as such, the server still serving.
  auto garbage = kubelet_rpc::CallUnary(dir / SocketName(base.name),
                                        "/v1beta1.DevicePlugin/Allocate", "\xff\xff\xff", 5s);
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.code(), Code::kInvalidArgument);
  EXPECT_NE(garbage.error().find("v1beta1.AllocateRequest"), std::string::npos) << garbage.error();

  // A socket removed (as a restarting kubelet removes them): served and registered again; the
  // old stream ends, a new one lists what the ledger holds.
  std::filesystem::remove(dir / SocketName(sliced.name));
  ASSERT_TRUE(Eventually([&] { return front->registered_generations() == 2; }));
  EXPECT_FALSE(watch->Read(&list));
  (void)watch->Finish();
  auto again = stub(sliced);
  grpc::ClientContext again_context;
  auto rewatch = again->ListAndWatch(&again_context, {});
  ASSERT_TRUE(rewatch->Read(&list));
  EXPECT_EQ(Unhealthy(list), 8);

  // Stopping ends the open stream and removes every socket.
  front.reset();
  EXPECT_FALSE(rewatch->Read(&list));
  for (const ServedResource& r : served)
    EXPECT_FALSE(std::filesystem::exists(dir / SocketName(r.name)));
  kubelet_server->Shutdown(std::chrono::system_clock::now() + 1s);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpustack::node
