// The server against gRPC's own client, the client against gRPC's own server: each end of the
// kubelet's conversations checked against the implementation the kubelet's side is compatible
// with (the kubelet's grpc-go speaks the same protocol).
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <thread>

#include "host/kubelet_rpc/client.h"
#include "host/kubelet_rpc/server.h"
#include "host/kubelet_rpc/socket.h"
#include "proto/deviceplugin.grpc.pb.h"

namespace gpustack::kubelet_rpc {
namespace {

using namespace std::chrono_literals;

constexpr const char* kAllocate = "/v1beta1.DevicePlugin/Allocate";
constexpr const char* kListAndWatch = "/v1beta1.DevicePlugin/ListAndWatch";

class RpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kubelet-rpc-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path Socket(const std::string& name) const { return dir_ / name; }

  static std::unique_ptr<v1beta1::DevicePlugin::Stub> Stub(const std::filesystem::path& socket) {
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix://" + socket.string(), grpc::InsecureChannelCredentials()));
  }

  // Allocate answers with one env per requested device; a request for "bad" is refused.
  static std::shared_ptr<Service> AllocatingService(std::string tag) {
    auto service = std::make_shared<Service>();
    service->unary[kAllocate] = [tag](std::string_view bytes) -> Result<std::string> {
      v1beta1::AllocateRequest request;
      if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
        return Error{"unparsable", Code::kInvalidArgument};
      v1beta1::AllocateResponse response;
      for (const auto& container : request.container_requests()) {
        auto* out = response.add_container_responses();
        for (const auto& id : container.devices_ids()) {
          if (id == "bad") return Error{"100% refused: caf\xc3\xa9\nbad", Code::kResourceExhausted};
          (*out->mutable_envs())[id] = tag;
        }
      }
      return response.SerializeAsString();
    };
    return service;
  }

  static v1beta1::AllocateRequest Request(std::initializer_list<std::string> ids) {
    v1beta1::AllocateRequest request;
    auto* container = request.add_container_requests();
    for (const auto& id : ids) container->add_devices_ids(id);
    return request;
  }

  std::filesystem::path dir_;
};

// A ListAndWatch service that keeps every stream it is given, each first sent `first` when set.
class StreamKeeper {
 public:
  explicit StreamKeeper(std::optional<std::string> first = std::nullopt)
      : first_(std::move(first)) {}

  std::shared_ptr<Service> MakeService() {
    auto service = std::make_shared<Service>();
    service->streaming[kListAndWatch] = [this](std::shared_ptr<ServerStream> s, std::string_view) {
      if (first_) {
        EXPECT_TRUE(s->Send(*first_));
      }
      std::lock_guard lock(mutex_);
      streams_.push_back(std::move(s));
    };
    return service;
  }
  // The `n`th stream (from 0) once it has arrived, or nullptr after 5 s.
  std::shared_ptr<ServerStream> Wait(size_t n) {
    const auto until = std::chrono::steady_clock::now() + 5s;
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        if (streams_.size() > n) return streams_[n];
      }
      if (std::chrono::steady_clock::now() > until) return nullptr;
      std::this_thread::sleep_for(2ms);
    }
  }

 private:
  const std::optional<std::string> first_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<ServerStream>> streams_;
};

TEST_F(RpcTest, ServesUnaryCallsToGrpcClientsOnEverySocket) {
  Server server;
  ASSERT_TRUE(server.Listen(Socket("a.sock"), AllocatingService("from-a")));
  ASSERT_TRUE(server.Listen(Socket("b.sock"), AllocatingService("from-b")));
  ASSERT_TRUE(server.Start("rpc-test"));
  for (const auto& [socket, tag] : {std::pair{"a.sock", "from-a"}, std::pair{"b.sock", "from-b"}}) {
    auto stub = Stub(Socket(socket));
    for (int i = 0; i < 3; ++i) {  // one connection, several calls
      grpc::ClientContext context;
      v1beta1::AllocateResponse response;
      grpc::Status status = stub->Allocate(&context, Request({"gpu-0", "gpu-1"}), &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      ASSERT_EQ(response.container_responses_size(), 1);
      EXPECT_EQ(response.container_responses(0).envs().at("gpu-1"), tag);
    }
  }
}

TEST_F(RpcTest, AWatchedDescriptorIsReadOnTheServingThreadBetweenCalls) {
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC), 0);
  FileDescriptor read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  std::atomic<int> bytes{0};
  std::atomic<bool> on_server_thread{false};
  Server server;
  ASSERT_TRUE(server.Listen(Socket("a.sock"), AllocatingService("from-a")));
  ASSERT_TRUE(server.Watch(read_end.get(), [&] {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    on_server_thread = std::string(name) == "rpc-test";
    char buffer[64];
    for (ssize_t n; (n = read(read_end.get(), buffer, sizeof buffer)) > 0;) bytes += n;
  }));
  ASSERT_TRUE(server.Start("rpc-test"));
  EXPECT_FALSE(server.Watch(read_end.get(), [] {})) << "after Start";
  ASSERT_EQ(write(write_end.get(), "abc", 3), 3);
  for (int i = 0; i < 200 && bytes < 3; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(bytes, 3);
  EXPECT_TRUE(on_server_thread);
  // Calls still go through beside it, and the next bytes are read too.
  grpc::ClientContext context;
  v1beta1::AllocateResponse response;
  grpc::Status status = Stub(Socket("a.sock"))->Allocate(&context, Request({"gpu-0"}), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(write(write_end.get(), "de", 2), 2);
  for (int i = 0; i < 200 && bytes < 5; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(bytes, 5);
}

TEST_F(RpcTest, AGrpcClientReadsTheHandlersRefusalAndUnknownMethods) {
  Server server;
  ASSERT_TRUE(server.Listen(Socket("a.sock"), AllocatingService("x")));
  ASSERT_TRUE(server.Start("rpc-test"));
  auto stub = Stub(Socket("a.sock"));
  grpc::ClientContext context;
  v1beta1::AllocateResponse response;
  grpc::Status status = stub->Allocate(&context, Request({"gpu-0", "bad"}), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(), "100% refused: caf\xc3\xa9\nbad");

  grpc::ClientContext other;
  v1beta1::PreStartContainerResponse prestart;
  status = stub->PreStartContainer(&other, {}, &prestart);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(status.error_message().find("PreStartContainer"), std::string::npos);
}

TEST_F(RpcTest, StreamsUntilTheClientCancels) {
  v1beta1::ListAndWatchResponse first;
  first.add_devices()->set_id("gpu-0");
  StreamKeeper keeper(first.SerializeAsString());
  Server server;
  ASSERT_TRUE(server.Listen(Socket("a.sock"), keeper.MakeService()));
  ASSERT_TRUE(server.Start("rpc-test"));

  auto stub = Stub(Socket("a.sock"));
  grpc::ClientContext context;
  auto reader = stub->ListAndWatch(&context, {});
  v1beta1::ListAndWatchResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.devices(0).id(), "gpu-0");

  // Another thread sends; several messages at once arrive in order.
  std::shared_ptr<ServerStream> held = keeper.Wait(0);
  ASSERT_NE(held, nullptr);
  EXPECT_TRUE(held->open());
  std::thread sender([held] {
    for (int i = 1; i <= 3; ++i) {
      v1beta1::ListAndWatchResponse next;
      next.add_devices()->set_id("gpu-" + std::to_string(i));
      EXPECT_TRUE(held->Send(next.SerializeAsString()));
    }
  });
  sender.join();
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(reader->Read(&response));
    EXPECT_EQ(response.devices(0).id(), "gpu-" + std::to_string(i));
  }

  context.TryCancel();
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (held->open() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(held->open()) << "the server did not see the client cancel";
  EXPECT_FALSE(held->Send("late"));
  (void)reader->Finish();
}

TEST_F(RpcTest, AFinishedStreamEndsWithItsStatusAndAStoppedServerEndsTheRest) {
  StreamKeeper keeper;
  auto server = std::make_unique<Server>();
  ASSERT_TRUE(server->Listen(Socket("a.sock"), keeper.MakeService()));
  ASSERT_TRUE(server->Start("rpc-test"));
  auto stub = Stub(Socket("a.sock"));

  grpc::ClientContext finished_context;
  auto finished = stub->ListAndWatch(&finished_context, {});
  grpc::ClientContext stopped_context;
  auto stopped = stub->ListAndWatch(&stopped_context, {});
  const std::vector<std::shared_ptr<ServerStream>> streams = {keeper.Wait(0), keeper.Wait(1)};
  ASSERT_NE(streams[1], nullptr);
  // gRPC's client may open the two in either order: both end with the same status.
  streams[0]->Finish(Error{"the kubelet front end is going away", Code::kUnavailable});
  streams[1]->Finish(Error{"the kubelet front end is going away", Code::kUnavailable});
  v1beta1::ListAndWatchResponse response;
  EXPECT_FALSE(finished->Read(&response));
  grpc::Status status = finished->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "the kubelet front end is going away");
  EXPECT_FALSE(stopped->Read(&response));
  (void)stopped->Finish();

  // A stream still open when the server stops.
  grpc::ClientContext last_context;
  auto last = stub->ListAndWatch(&last_context, {});
  std::shared_ptr<ServerStream> open = keeper.Wait(2);
  ASSERT_NE(open, nullptr);
  EXPECT_TRUE(open->open());
  server.reset();
  EXPECT_FALSE(open->open());
  EXPECT_FALSE(open->Send("after the end"));
  EXPECT_FALSE(last->Read(&response));
  EXPECT_FALSE(last->Finish().ok());
}

TEST_F(RpcTest, AStreamWhoseClientReadsNothingEndsInsteadOfGrowing) {
  StreamKeeper keeper;
  Server server;
  ASSERT_TRUE(server.Listen(Socket("a.sock"), keeper.MakeService()));
  ASSERT_TRUE(server.Start("rpc-test"));
  auto stub = Stub(Socket("a.sock"));
  grpc::ClientContext context;
  auto reader = stub->ListAndWatch(&context, {});  // never read
  std::shared_ptr<ServerStream> held = keeper.Wait(0);
  ASSERT_NE(held, nullptr);
  // 64 KiB messages: HTTP/2's windows take a few; the rest wait in the server until the limit.
  v1beta1::ListAndWatchResponse big;
  big.add_devices()->set_id(std::string(64 << 10, 'x'));
  const std::string bytes = big.SerializeAsString();
  size_t sent = 0;
  while (sent < 4 * kMaxQueuedMessages && held->Send(bytes)) {
    ++sent;
    if (sent % 100 == 0) std::this_thread::sleep_for(1ms);  // let the serving thread take some
  }
  EXPECT_LT(sent, 4 * kMaxQueuedMessages) << "the server kept every message a client never read";
  EXPECT_GE(sent, kMaxQueuedMessages);
  EXPECT_FALSE(held->open());
  context.TryCancel();
}

TEST_F(RpcTest, HostileBytesCloseOnlyTheirConnection) {
  Server server;
  ASSERT_TRUE(server.Listen(Socket("a.sock"), AllocatingService("ok")));
  ASSERT_TRUE(server.Start("rpc-test"));
  for (const std::string& garbage :
       {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string(4096, '\xff'),
        std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string(64, '\0')}) {
    auto fd = ConnectUnix(Socket("a.sock"));
    ASSERT_TRUE(fd) << fd.error();
    ASSERT_EQ(send(fd->get(), garbage.data(), garbage.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(garbage.size()));
    // The server answers (a GOAWAY) or closes; either way the read ends.
    char buffer[256];
    const auto until = std::chrono::steady_clock::now() + 5s;
    ssize_t n = 1;
    while (n != 0 && std::chrono::steady_clock::now() < until) {
      n = recv(fd->get(), buffer, sizeof(buffer), 0);
      if (n < 0 && errno != EAGAIN) break;
      if (n < 0) std::this_thread::sleep_for(5ms);
    }
    EXPECT_LE(n, 0) << "the server kept a connection that spoke no HTTP/2";
  }
  // A half-sent request, then the client goes away: the server forgets it.
  {
    auto fd = ConnectUnix(Socket("a.sock"));
    ASSERT_TRUE(fd);
    const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    ASSERT_GT(send(fd->get(), preface.data(), preface.size(), MSG_NOSIGNAL), 0);
  }
  auto response =
      Call<v1beta1::AllocateResponse>(Socket("a.sock"), kAllocate, Request({"gpu-3"}), 5s);
  ASSERT_TRUE(response) << response.error();
  EXPECT_EQ(response->container_responses(0).envs().at("gpu-3"), "ok");
}

// The registration side: our client calling gRPC's own server, as the daemon calls the kubelet.
class Registrar final : public v1beta1::Registration::Service {
 public:
  grpc::Status Register(grpc::ServerContext* context, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    if (request->resource_name() == "slow") {
      std::this_thread::sleep_for(2s);
      return grpc::Status::OK;
    }
    if (request->version() != "v1beta1")
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "unsupported version \"" + request->version() + "\""};
    std::lock_guard lock(mutex);
    names.push_back(request->resource_name());
    deadline_set = context->deadline() < std::chrono::system_clock::now() + 1h;
    return grpc::Status::OK;
  }
  std::mutex mutex;
  std::vector<std::string> names;
  bool deadline_set = false;
};

TEST_F(RpcTest, TheClientCallsAGrpcServer) {
  Registrar registrar;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + Socket("kubelet.sock").string(),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&registrar);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  constexpr const char* kRegister = "/v1beta1.Registration/Register";

  v1beta1::RegisterRequest request;
  request.set_version("v1beta1");
  request.set_resource_name("nvidia.com/gpu");
  auto done = Call<v1beta1::Empty>(Socket("kubelet.sock"), kRegister, request, 5s);
  ASSERT_TRUE(done) << done.error();
  {
    std::lock_guard lock(registrar.mutex);
    EXPECT_EQ(registrar.names, std::vector<std::string>{"nvidia.com/gpu"});
    EXPECT_TRUE(registrar.deadline_set) << "grpc-timeout was not sent";
  }

  request.set_version("v1alpha");
  auto refused = Call<v1beta1::Empty>(Socket("kubelet.sock"), kRegister, request, 5s);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_NE(refused.error().find("unsupported version \"v1alpha\""), std::string::npos);

  auto unknown = CallUnary(Socket("kubelet.sock"), "/v1beta1.Registration/Nope", "", 5s);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.code(), Code::kUnimplemented);

  request.set_version("v1beta1");
  request.set_resource_name("slow");
  auto late = Call<v1beta1::Empty>(Socket("kubelet.sock"), kRegister, request, 200ms);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.code(), Code::kDeadlineExceeded);
  server->Shutdown(std::chrono::system_clock::now() + 3s);
}

TEST_F(RpcTest, TheClientSaysWhenNothingListensOrTheAnswerIsNotGrpc) {
  auto absent = CallUnary(Socket("absent.sock"), kAllocate, "", 1s);
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.code(), Code::kUnavailable);
  EXPECT_NE(absent.error().find("absent.sock"), std::string::npos);

  // A listener that accepts and closes at once.
  auto listener = ListenUnix(Socket("closing.sock"));
  ASSERT_TRUE(listener);
  std::thread closer([&] {
    pollfd p{listener->get(), POLLIN, 0};
    if (poll(&p, 1, 5000) == 1) close(accept(listener->get(), nullptr, nullptr));
  });
  auto closed = CallUnary(Socket("closing.sock"), kAllocate, "", 5s);
  closer.join();
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.code(), Code::kUnavailable);

  auto bad_path = CallUnary(dir_ / std::string(200, 'x'), kAllocate, "", 1s);
  ASSERT_FALSE(bad_path);
  EXPECT_EQ(bad_path.code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace gpustack::kubelet_rpc
