#include "host/node/exporter.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <thread>

#include "host/common/logging.h"

namespace gpustack::node {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// A self-signed P-256 certificate for `name`, valid a year: PEM certificate and key.
Result<std::pair<std::string, std::string>> SelfSigned(const std::string& name) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  if (!key || !cert) return Error{"cannot make a key for the self-signed certificate"};
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), static_cast<long>(std::time(nullptr)));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), subject);
  X509_set_pubkey(cert.get(), key.get());
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0)
    return Error{"cannot sign the self-signed certificate"};
  auto pem = [](auto write) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    write(bio.get());
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<size_t>(size));
  };
  return std::make_pair(pem([&](BIO* b) { PEM_write_bio_X509(b, cert.get()); }), pem([&](BIO* b) {
                          PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr,
                                                   nullptr);
                        }));
}

}  // namespace

struct Exporter::State {
  ExporterOptions options;
  ExporterHandlers handlers;
  asio::io_context io{1};
  asio::ssl::context tls{asio::ssl::context::tls_server};
  std::unique_ptr<tcp::acceptor> acceptor;
  std::thread thread;
  uint16_t port = 0;

  http::response<http::string_body> Respond(const http::request<http::string_body>& request) {
    http::response<http::string_body> response;
    response.version(request.version());
    response.keep_alive(false);
    const std::string target(request.target());
    const std::string path = target.substr(0, target.find('?'));
    if (request.method() != http::verb::get && request.method() != http::verb::head) {
      response.result(http::status::method_not_allowed);
      response.body() = "only GET\n";
    } else if (path == "/metrics") {
      response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      response.body() = handlers.metrics();
    } else if (path == "/monitor/snapshot") {
      response.set(http::field::content_type, "application/json");
      response.body() = handlers.snapshot();
    } else if (path == "/livez") {
      response.body() = "ok\n";
    } else if (path == "/readyz") {
      const bool ready = handlers.ready();
      response.result(ready ? http::status::ok : http::status::service_unavailable);
      response.body() =
          ready ? "ok\n" : "not ready: the kubelet has not registered every resource\n";
    } else {
      response.result(http::status::not_found);
      response.body() = "not found\n";
    }
    if (request.method() == http::verb::head) response.body().clear();
    response.prepare_payload();
    return response;
  }

  asio::awaitable<void> Session(tcp::socket socket) {
    beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), tls);
    try {
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(10));
      co_await stream.async_handshake(asio::ssl::stream_base::server, asio::use_awaitable);
      beast::flat_buffer buffer(8192);
      http::request_parser<http::string_body> parser;
      parser.body_limit(4096);
      parser.header_limit(8192);
      co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
      auto response = Respond(parser.get());
      co_await http::async_write(stream, response, asio::use_awaitable);
      beast::error_code ignored;
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
      co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ignored));
    } catch (const std::exception& e) {
      Logger("exporter")->debug("connection ended: {}", e.what());
    }
  }

  asio::awaitable<void> Accept() {
    for (;;) {
      tcp::socket socket = co_await acceptor->async_accept(asio::use_awaitable);
      asio::co_spawn(io, Session(std::move(socket)), asio::detached);
    }
  }
};

Exporter::Exporter(ExporterOptions options, ExporterHandlers handlers)
    : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->handlers = std::move(handlers);
}

Exporter::~Exporter() { Stop(); }

Status Exporter::Start() {
  State& s = *state_;
  s.tls.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                    asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                    asio::ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  if (!s.options.cert_dir.empty()) {
    const auto cert = s.options.cert_dir / "tls.crt", key = s.options.cert_dir / "tls.key";
    s.tls.use_certificate_chain_file(cert.string(), ec);
    if (ec) return Error{"cannot use the certificate " + cert.string() + ": " + ec.message()};
    s.tls.use_private_key_file(key.string(), asio::ssl::context::pem, ec);
    if (ec) return Error{"cannot use the key " + key.string() + ": " + ec.message()};
  } else {
    auto made = SelfSigned(s.options.common_name);
    if (!made) return made.failure();
    s.tls.use_certificate_chain(asio::buffer(made->first));
    s.tls.use_private_key(asio::buffer(made->second), asio::ssl::context::pem);
    Logger("exporter")->info("no --cert-dir: serving a self-signed certificate");
  }
  auto address = asio::ip::make_address(s.options.address, ec);
  if (ec) return Error{"bad listen address " + s.options.address + ": " + ec.message()};
  try {
    s.acceptor = std::make_unique<tcp::acceptor>(s.io, tcp::endpoint(address, s.options.port));
  } catch (const std::exception& e) {
    return Error{"cannot listen on " + s.options.address + ":" + std::to_string(s.options.port) +
                 ": " + e.what()};
  }
  s.port = s.acceptor->local_endpoint().port();
  asio::co_spawn(s.io, s.Accept(), asio::detached);
  s.thread = std::thread([&s] { s.io.run(); });
  return Ok{};
}

void Exporter::Stop() {
  if (!state_ || !state_->thread.joinable()) return;
  state_->io.stop();
  state_->thread.join();
}

uint16_t Exporter::port() const { return state_->port; }

}  // namespace gpustack::node
