// The kubelet front end over its own RPC server, against gRPC's client and a gRPC registration
// server standing in for the kubelet: every resource registered on its socket, ListAndWatch lists
// pushed when the ledger changes, Allocate answered, and a removed socket served again.
#include "host/node/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <thread>

#include "host/kubelet_rpc/client.h"
#include "host/node/tests/node_fixture.h"
#include "proto/deviceplugin.grpc.pb.h"

namespace gpustack::node {
namespace {

using namespace std::chrono_literals;

// Like the kubelet, it dials back into the plugin's socket before it answers, and refuses a
// registration whose socket does not answer.
class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(std::filesystem::path dir) : dir_(std::move(dir)) {}

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    auto plugin = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
        "unix://" + (dir_ / request->endpoint()).string(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    v1beta1::DevicePluginOptions options;
    if (grpc::Status dialed = plugin->GetDevicePluginOptions(&context, {}, &options); !dialed.ok())
      return {grpc::StatusCode::UNAVAILABLE, "cannot dial back: " + dialed.error_message()};
    std::lock_guard lock(mutex_);
    requests_.push_back(*request);
    return grpc::Status::OK;
  }
  std::vector<v1beta1::RegisterRequest> Requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  const std::filesystem::path dir_;
  std::mutex mutex_;
  std::vector<v1beta1::RegisterRequest> requests_;
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

// A fake kubelet on its socket in a directory of its own, and the front end serving two acme
// cards into it.
class KubeletFrontEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/front-end-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
    kubelet = std::make_unique<FakeKubelet>(dir);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + (dir / "kubelet.sock").string(),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(kubelet.get());
    kubelet_server = builder.BuildAndStart();
    ASSERT_NE(kubelet_server, nullptr);

    runtime = testing::AcmeRuntime(node);
    ASSERT_NE(runtime, nullptr);
    served = ResourcesOf(runtime->RunningIdentities().at(0), {});
    board = std::make_unique<TokenBoard>(*runtime, served);
    board->Refresh();
    allocator = std::make_unique<Allocator>(*runtime, pods, AllocatorOptions{});
    allocator->set_on_change([this] { board->Refresh(); });
    KubeletOptions options;
    options.device_plugin_dir = dir;
    front = std::make_unique<KubeletFrontEnd>(*board, *allocator, options);
    front->Start();
  }

  void TearDown() override {
    front.reset();
    if (kubelet_server) kubelet_server->Shutdown(std::chrono::system_clock::now() + 1s);
    std::filesystem::remove_all(dir);
  }

  std::filesystem::path dir;
  std::unique_ptr<FakeKubelet> kubelet;
  std::unique_ptr<grpc::Server> kubelet_server;
  runtime::testing::Node node;
  std::unique_ptr<runtime::NodeRuntime> runtime;
  std::vector<ServedResource> served;
  std::unique_ptr<TokenBoard> board;
  testing::MemoryPods pods;
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<KubeletFrontEnd> front;
};

TEST_F(KubeletFrontEndTest, RegistersServesPushesAndServesAgain) {
  ASSERT_TRUE(Eventually([&] { return front->registered_generations() == 1; }));
  std::set<std::string> registered;
  for (const auto& r : kubelet->Requests()) {
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
}

// What the daemon waits for before it starts what registration does not need.
TEST_F(KubeletFrontEndTest, WaitUntilRegisteredReturnsOnceEveryResourceIs) {
  ASSERT_TRUE(front->WaitUntilRegistered(std::chrono::steady_clock::now() + 30s, {}));
  EXPECT_EQ(front->registered_generations(), 1u);
  EXPECT_EQ(kubelet->Requests().size(), served.size());

  // No kubelet in its directory: the wait ends at its deadline, or at once when stopped.
  char pattern[] = "/tmp/front-end-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  KubeletOptions options;
  options.device_plugin_dir = pattern;
  KubeletFrontEnd alone(*board, *allocator, options);
  alone.Start();
  EXPECT_FALSE(alone.WaitUntilRegistered(std::chrono::steady_clock::now() + 200ms, {}));
  std::stop_source stop;
  stop.request_stop();
  EXPECT_FALSE(alone.WaitUntilRegistered(std::chrono::steady_clock::now() + 1h, stop.get_token()));
  alone.Stop();
  std::filesystem::remove_all(pattern);
}

// A restarting kubelet removes what it listed in the directory one by one: the sockets of a
// generation we bind after its first removal go too, and their events may be read before that
// generation is current. Every resource must still end up served and registered.
TEST_F(KubeletFrontEndTest, SocketsRemovedAsTheyAreBoundAreServedAgain) {
  ASSERT_TRUE(Eventually([&] { return front->registered_generations() == 1; }));
  std::vector<std::filesystem::path> sockets;
  for (const ServedResource& r : served) sockets.push_back(dir / SocketName(r.name));
  ASSERT_GE(sockets.size(), 2u);
  for (int round = 0; round < 20; ++round) {
    const uint64_t before = front->registered_generations();
    std::filesystem::remove(sockets.front());
    // The next generation binds the first socket first: the rest go the moment it is back.
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!std::filesystem::exists(sockets.front())) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << "round " << round;
    }
    // For a millisecond, as the kubelet's clean-up takes: what is bound in it goes again.
    const auto cleaned = std::chrono::steady_clock::now() + 1ms;
    while (std::chrono::steady_clock::now() < cleaned) {
      for (size_t i = 1; i < sockets.size(); ++i) std::filesystem::remove(sockets[i]);
    }
    ASSERT_TRUE(Eventually([&] {
      return front->registered_generations() > before &&
             std::ranges::all_of(sockets,
                                 [](const auto& p) { return std::filesystem::is_socket(p); });
    })) << "round "
        << round;
  }
  // Each one answers, as the kubelet's dial-back needs.
  for (const auto& socket : sockets) {
    auto stub = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix://" + socket.string(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    v1beta1::DevicePluginOptions options;
    EXPECT_TRUE(stub->GetDevicePluginOptions(&context, {}, &options).ok()) << socket;
  }
}

}  // namespace
}  // namespace gpustack::node
