#include "host/https/server.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace gpustack::https {
namespace {

std::string Curl(const std::string& args) {
  std::string out;
  if (FILE* pipe = popen(("curl -sk -o - -w ' %{http_code}' " + args + " 2>&1").c_str(), "r")) {
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    pclose(pipe);
  }
  return out;
}

KeyPair Serving() {
  auto ca = MakeCertificateAuthority("ca", std::chrono::hours(1));
  auto serving =
      MakeServingCertificate(*ca, "localhost", {"localhost"}, {"127.0.0.1"}, std::chrono::hours(1));
  EXPECT_TRUE(serving) << serving.error();
  return *serving;
}

// The server's own answers: the handler's, a wrong method, a wrong path, a body over the limit
// (said, not a dropped connection), and the latency of what it answered.
TEST(Server, AnswersRefusesAndMeasures) {
  const KeyPair serving = Serving();
  ServerOptions options;
  options.address = "127.0.0.1";
  options.body_limit = 1024;
  Server server(options, {{"/echo", {"POST"}, [](const Request& r) {
                             return Response{200, "{\"got\":" + std::to_string(r.body.size()) +
                                                      ",\"query\":\"" + r.query + "\"}"};
                           }}});
  EXPECT_FALSE(server.Start());  // no certificate yet
  ASSERT_TRUE(server.SetCertificate(serving));
  EXPECT_FALSE(server.SetCertificate({serving.cert_pem, Serving().key_pem}));  // not its key
  ASSERT_TRUE(server.Start());
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
  EXPECT_EQ(Curl("-X POST --data abc '" + url + "/echo?x=1'"), "{\"got\":3,\"query\":\"x=1\"} 200");
  EXPECT_EQ(Curl(url + "/echo"), "{\"error\":\"only POST\"} 405");
  EXPECT_EQ(Curl("-X POST --data abc " + url + "/nope"), "{\"error\":\"no such path: /nope\"} 404");
  EXPECT_EQ(Curl("-X POST --data " + std::string(2000, 'a') + " " + url + "/echo"),
            "{\"error\":\"the request is larger than 1024 bytes\"} 413");
  server.Stop();
  EXPECT_EQ(server.Latencies()["/echo"].total, 2u);  // the POST and the GET; not the 413
  const std::string metrics = server.RenderMetrics("gpustack_test");
  EXPECT_NE(metrics.find("gpustack_test_requests_total{path=\"(too large)\",code=\"413\"} 1"),
            std::string::npos)
      << metrics;
  // A path no route serves is counted without its name: a client cannot grow the series.
  EXPECT_NE(metrics.find("gpustack_test_requests_total{path=\"(unknown)\",code=\"404\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("/nope"), std::string::npos) << metrics;
}

TEST(Server, AHandlerThatThrowsIsA500AndTheServerGoesOn) {
  Server server(
      {.address = "127.0.0.1"},
      {{"/boom", {"GET"}, [](const Request&) -> Response { throw std::runtime_error("kaput"); }}});
  ASSERT_TRUE(server.SetCertificate(Serving()));
  ASSERT_TRUE(server.Start());
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
  EXPECT_EQ(Curl(url + "/boom"), "{\"error\":\"internal error: kaput\"} 500");
  EXPECT_EQ(Curl(url + "/boom"), "{\"error\":\"internal error: kaput\"} 500");
}

TEST(Server, AnAddressInUseIsNamed) {
  Server first({.name = "first", .address = "127.0.0.1"}, {});
  ASSERT_TRUE(first.SetCertificate(Serving()));
  ASSERT_TRUE(first.Start());
  Server second({.name = "second", .address = "127.0.0.1", .port = first.port()}, {});
  ASSERT_TRUE(second.SetCertificate(Serving()));
  Status started = second.Start();
  ASSERT_FALSE(started);
  EXPECT_NE(
      started.error().find("cannot listen for second on 127.0.0.1:" + std::to_string(first.port())),
      std::string::npos)
      << started.error();
}

// On a unix socket: plain HTTP, no certificate, a file only its owner may open; a socket left
// by a dead process is replaced, anything else at the path is refused, and Stop removes it.
TEST(Server, ServesPlainHttpOnAUnixSocketOnlyItsOwnerMayOpen) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("https-unix-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const fs::path socket = dir / "nested" / "api.sock";
  auto stream = std::make_shared<ChunkStream>();
  std::vector<Route> routes = {{"/hello",
                                {"GET"},
                                [](const Request& r) {
                                  return Response{200, "{\"q\":\"" + r.query + "\"}"};
                                }},
                               {"/watch", {"GET"}, [stream](const Request&) {
                                  Response r;
                                  r.stream = stream;
                                  return r;
                                }}};
  {
    Server stale({.name = "stale", .unix_socket = socket}, routes);
    ASSERT_TRUE(stale.Start());  // no certificate needed
    // Left behind as a killed process leaves it: the file stays, nobody listens.
    const fs::path kept = dir / "kept.sock";
    fs::rename(socket, kept);
    stale.Stop();
    fs::rename(kept, socket);
  }
  Server server({.name = "gateway", .unix_socket = socket}, routes);
  ASSERT_TRUE(server.Start());
  // A second server at the same path while the first answers: refused, the first untouched.
  Server second({.name = "second", .unix_socket = socket}, routes);
  Status taken = second.Start();
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.error().find("another process is serving there"), std::string::npos)
      << taken.error();
  EXPECT_EQ(fs::status(socket).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  const std::string via = "--unix-socket " + socket.string() + " http://localhost";
  EXPECT_EQ(Curl(via + "/hello?x=1"), "{\"q\":\"x=1\"} 200");
  EXPECT_EQ(Curl(via + "/nope"), "{\"error\":\"no such path: /nope\"} 404");
  std::thread producer([stream] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stream->Push("one\n");
    stream->Close();
  });
  EXPECT_EQ(Curl(via + "/watch"), "one\n 200");
  producer.join();
  server.Stop();
  EXPECT_FALSE(fs::exists(socket));

  fs::create_directories(socket.parent_path());
  std::ofstream(socket) << "not a socket";
  Server refused({.name = "refused", .unix_socket = socket}, routes);
  Status started = refused.Start();
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().find("something that is not a socket is there"), std::string::npos)
      << started.error();
  Server too_long({.name = "long", .unix_socket = dir / std::string(120, 'x')}, routes);
  Status long_path = too_long.Start();
  ASSERT_FALSE(long_path);
  EXPECT_NE(long_path.error().find("at most 107 bytes"), std::string::npos) << long_path.error();
  fs::remove_all(dir);
}

TEST(HealthRoutes, MetricsLivenessReadinessAndTheSnapshot) {
  bool ready = false;
  HealthHandlers handlers{.metrics = [] { return std::string("up 1\n"); },
                          .ready = [&] { return ready; },
                          .not_ready = "waiting for the kubelet"};
  auto self = CertificateFor({}, "health-test");
  ASSERT_TRUE(self) << self.error();
  Server without({.address = "127.0.0.1"}, HealthRoutes(handlers));
  ASSERT_TRUE(without.SetCertificate(*self));
  ASSERT_TRUE(without.Start());
  std::string url = "https://127.0.0.1:" + std::to_string(without.port());
  EXPECT_EQ(Curl(url + "/metrics"), "up 1\n 200");
  const std::string head = Curl("-I " + url + "/metrics");  // the headers, no body
  EXPECT_NE(head.find("HTTP/1.1 200"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Length: 5"), std::string::npos) << head;
  EXPECT_EQ(Curl(url + "/livez"), "ok\n 200");
  EXPECT_EQ(Curl(url + "/readyz"), "not ready: waiting for the kubelet\n 503");
  ready = true;
  EXPECT_EQ(Curl(url + "/readyz"), "ok\n 200");
  EXPECT_EQ(Curl(url + "/monitor/snapshot").substr(0, 1), "{");  // no snapshot: 404's JSON
  EXPECT_NE(Curl(url + "/monitor/snapshot").find("404"), std::string::npos);
  EXPECT_EQ(Curl("-X POST " + url + "/metrics"), "{\"error\":\"only GET\"} 405");

  handlers.snapshot = [] { return std::string("{\"round\":1}"); };
  Server with({.address = "127.0.0.1"}, HealthRoutes(handlers));
  ASSERT_TRUE(with.SetCertificate(*self));
  ASSERT_TRUE(with.Start());
  url = "https://127.0.0.1:" + std::to_string(with.port());
  EXPECT_EQ(Curl(url + "/monitor/snapshot"), "{\"round\":1} 200");
}

// What an aggregated API needs of the server: prefix routes (the longest wins, an exact route
// first), the request's header fields, the client's certificate chain (verified by the route,
// not the handshake), and a response streamed as it is produced.
TEST(Server, PrefixRoutesHeadersClientCertificatesAndStreams) {
  auto ca = MakeCertificateAuthority("front-proxy-ca", std::chrono::hours(1));
  ASSERT_TRUE(ca) << ca.error();
  auto client = MakeClientCertificate(*ca, "front-proxy-client", std::chrono::hours(1));
  ASSERT_TRUE(client) << client.error();
  const std::string dir = ::testing::TempDir();
  const std::string crt = dir + "/client.crt", key = dir + "/client.key";
  FILE* out = std::fopen(crt.c_str(), "w");
  std::fputs(client->cert_pem.c_str(), out);
  std::fclose(out);
  out = std::fopen(key.c_str(), "w");
  std::fputs(client->key_pem.c_str(), out);
  std::fclose(out);

  auto stream = std::make_shared<ChunkStream>();
  ServerOptions options{.address = "127.0.0.1", .threads = 2};
  options.request_client_certificate = true;
  auto who = [&](const Request& r) {
    auto cn = VerifyClientCertificate(r.peer_certificates, ca->cert_pem);
    return Response{200, r.path + " " + r.Header("x-remote-user") + " " +
                             (cn ? *cn : "refused: " + cn.error())};
  };
  Server server(options, {{"/apis", {"GET"}, who, true},
                          {"/apis/exact", {"GET"}, [](const Request&) {
                             return Response{200, "exact"};
                           }},
                          {"/apis/watch", {"GET"}, [&](const Request&) {
                             Response r;
                             r.stream = stream;
                             return r;
                           }, false}});
  ASSERT_TRUE(server.SetCertificate(Serving()));
  ASSERT_TRUE(server.Start());
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
  EXPECT_EQ(Curl("--cert " + crt + " --key " + key + " -H 'X-Remote-User: ada' " + url +
                 "/apis/worker.gpustack.ai/v1"),
            "/apis/worker.gpustack.ai/v1 ada front-proxy-client 200");
  EXPECT_EQ(Curl(url + "/apis/x"), "/apis/x  refused: no client certificate 200");
  // A certificate of another authority is presented, and refused by the route.
  auto other = MakeCertificateAuthority("other", std::chrono::hours(1));
  auto stranger = MakeClientCertificate(*other, "front-proxy-client", std::chrono::hours(1));
  out = std::fopen(crt.c_str(), "w");
  std::fputs(stranger->cert_pem.c_str(), out);
  std::fclose(out);
  out = std::fopen(key.c_str(), "w");
  std::fputs(stranger->key_pem.c_str(), out);
  std::fclose(out);
  EXPECT_NE(Curl("--cert " + crt + " --key " + key + " " + url + "/apis/x")
                .find("refused: the client certificate is not trusted"),
            std::string::npos);
  EXPECT_EQ(Curl(url + "/apis/exact"), "exact 200");
  EXPECT_EQ(Curl(url + "/apisx"), "{\"error\":\"no such path: /apisx\"} 404");

  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stream->Push("one\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stream->Push("two\n");
    stream->Close();
  });
  EXPECT_EQ(Curl(url + "/apis/watch"), "one\ntwo\n 200");
  producer.join();
  EXPECT_TRUE(stream->Done());
  server.Stop();
}

}  // namespace
}  // namespace gpustack::https
