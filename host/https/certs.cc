#include "host/https/certs.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "host/common/files.h"

namespace gpustack::https {
namespace {

template <typename T, void (*Free)(T*)>
using Owned = std::unique_ptr<T, decltype([](T* p) { Free(p); })>;
using Key = Owned<EVP_PKEY, EVP_PKEY_free>;
using Cert = Owned<X509, X509_free>;
using Bio = Owned<BIO, BIO_free_all>;

std::string Pem(const std::function<int(BIO*)>& write) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return {};
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

KeyPair PemPair(X509* cert, EVP_PKEY* key) {
  return KeyPair{Pem([&](BIO* b) { return PEM_write_bio_X509(b, cert); }), Pem([&](BIO* b) {
                   return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
                 })};
}

Cert ReadCert(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

Key ReadKey(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key` named `common_name`, valid from an hour ago (clock skew) for `validity`.
Cert NewCert(EVP_PKEY* key, const std::string& common_name, std::chrono::seconds validity) {
  Cert cert(X509_new());
  if (!cert) return cert;
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(validity.count()));
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_pubkey(cert.get(), key);
  return cert;
}

std::chrono::system_clock::time_point TimeOf(const ASN1_TIME* t) {
  struct tm tm {};
  ASN1_TIME_to_tm(t, &tm);
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace

Result<std::string> MakePrivateKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Error{"cannot make a P-256 key", Code::kInternal};
  std::string pem = Pem([&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  if (pem.empty()) return Error{"cannot write a P-256 key", Code::kInternal};
  return pem;
}

Result<KeyPair> MakeCertificateAuthority(const std::string& common_name,
                                         std::chrono::seconds validity) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Error{"cannot make a key for the CA"};
  Cert cert = NewCert(key.get(), common_name, validity);
  if (!cert) return Error{"cannot make the CA certificate"};
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  if (!AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"))
    return Error{"cannot mark the CA certificate as a CA"};
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0)
    return Error{"cannot sign the CA certificate"};
  return PemPair(cert.get(), key.get());
}

namespace {

// A serving certificate for the names, issued by `issuer` with `issuer_key`, or self-signed when
// `issuer` is null.
Result<KeyPair> MintServing(X509* issuer, EVP_PKEY* issuer_key, const std::string& common_name,
                            const std::vector<std::string>& dns_names,
                            const std::vector<std::string>& ip_addresses,
                            std::chrono::seconds validity) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Error{"cannot make a key for the serving certificate"};
  Cert cert = NewCert(key.get(), common_name, validity);
  if (!cert) return Error{"cannot make the serving certificate"};
  if (issuer == nullptr) {
    issuer = cert.get();
    issuer_key = key.get();
  }
  X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer));
  std::string names;
  for (const std::string& dns : dns_names) names += (names.empty() ? "" : ",") + ("DNS:" + dns);
  for (const std::string& ip : ip_addresses) names += (names.empty() ? "" : ",") + ("IP:" + ip);
  if (names.empty()) return Error{"a serving certificate needs at least one name"};
  const bool self_signed = issuer == cert.get();
  if (!AddExtension(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(cert.get(), issuer, NID_key_usage, "critical,digitalSignature") ||
      !AddExtension(cert.get(), issuer, NID_ext_key_usage, "serverAuth") ||
      (!self_signed &&
       !AddExtension(cert.get(), issuer, NID_authority_key_identifier, "keyid:always")) ||
      !AddExtension(cert.get(), issuer, NID_subject_alt_name, names))
    return Error{"cannot set the serving certificate's names (" + names + ")"};
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0)
    return Error{"cannot sign the serving certificate"};
  return PemPair(cert.get(), key.get());
}

}  // namespace

Result<KeyPair> MakeClientCertificate(const KeyPair& ca, const std::string& common_name,
                                      std::chrono::seconds validity) {
  Cert issuer = ReadCert(ca.cert_pem);
  Key issuer_key = ReadKey(ca.key_pem);
  if (!issuer || !issuer_key) return Error{"the CA certificate or key is not readable"};
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Error{"cannot make a key for the client certificate"};
  Cert cert = NewCert(key.get(), common_name, validity);
  if (!cert) return Error{"cannot make the client certificate"};
  X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer.get()));
  if (!AddExtension(cert.get(), issuer.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(cert.get(), issuer.get(), NID_key_usage, "critical,digitalSignature") ||
      !AddExtension(cert.get(), issuer.get(), NID_ext_key_usage, "clientAuth"))
    return Error{"cannot mark the client certificate"};
  if (X509_sign(cert.get(), issuer_key.get(), EVP_sha256()) == 0)
    return Error{"cannot sign the client certificate"};
  return PemPair(cert.get(), key.get());
}

Result<std::string> VerifyClientCertificate(const std::vector<std::string>& chain_pem,
                                            const std::string& ca_bundle_pem) {
  if (chain_pem.empty()) return Error{"no client certificate"};
  Cert leaf = ReadCert(chain_pem.front());
  if (!leaf) return Error{"the client certificate is not readable"};
  Owned<X509_STORE, X509_STORE_free> store(X509_STORE_new());
  Bio bundle(BIO_new_mem_buf(ca_bundle_pem.data(), static_cast<int>(ca_bundle_pem.size())));
  int authorities = 0;
  while (X509* ca = PEM_read_bio_X509(bundle.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store.get(), ca);
    X509_free(ca);
    ++authorities;
  }
  ERR_clear_error();  // the end of the bundle reads as an error
  if (authorities == 0) return Error{"no client CA is configured"};
  struct FreeStack {
    void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
  };
  std::unique_ptr<STACK_OF(X509), FreeStack> intermediates(sk_X509_new_null());
  for (size_t i = 1; i < chain_pem.size(); ++i) {
    if (Cert c = ReadCert(chain_pem[i])) sk_X509_push(intermediates.get(), c.release());
  }
  Owned<X509_STORE_CTX, X509_STORE_CTX_free> ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), intermediates.get()) != 1)
    return Error{"cannot verify the client certificate"};
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_CLIENT);
  if (X509_verify_cert(ctx.get()) != 1) {
    return Error{std::string("the client certificate is not trusted: ") +
                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()))};
  }
  char name[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(leaf.get()), NID_commonName, name,
                            sizeof name - 1);
  return std::string(name);
}

Result<KeyPair> MakeServingCertificate(const KeyPair& ca, const std::string& common_name,
                                       const std::vector<std::string>& dns_names,
                                       const std::vector<std::string>& ip_addresses,
                                       std::chrono::seconds validity) {
  Cert ca_cert = ReadCert(ca.cert_pem);
  Key ca_key = ReadKey(ca.key_pem);
  if (!ca_cert || !ca_key) return Error{"the CA's certificate or key is not PEM"};
  return MintServing(ca_cert.get(), ca_key.get(), common_name, dns_names, ip_addresses, validity);
}

Result<KeyPair> MakeSelfSignedCertificate(const std::string& common_name,
                                          const std::vector<std::string>& dns_names,
                                          const std::vector<std::string>& ip_addresses,
                                          std::chrono::seconds validity) {
  return MintServing(nullptr, nullptr, common_name, dns_names, ip_addresses, validity);
}

Result<KeyPair> ReadCertificateDir(const std::filesystem::path& dir) {
  constexpr size_t kMaxPem = 1 << 20;
  KeyPair pair;
  for (auto [file, out] : {std::pair{"tls.crt", &pair.cert_pem}, {"tls.key", &pair.key_pem}}) {
    auto text = ReadSmallFile(dir / file, kMaxPem, "certificate file");
    if (!text) return text.failure();
    *out = std::move(*text);
  }
  return pair;
}

Result<CertificateFacts> ReadCertificate(const std::string& cert_pem) {
  Cert cert = ReadCert(cert_pem);
  if (!cert) return Error{"not a PEM certificate"};
  CertificateFacts facts;
  facts.not_before = TimeOf(X509_get0_notBefore(cert.get()));
  facts.not_after = TimeOf(X509_get0_notAfter(cert.get()));
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS) {
      const ASN1_STRING* s = name->d.dNSName;
      facts.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                   ASN1_STRING_length(s));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      const int length = ASN1_STRING_length(ip);
      char text[INET6_ADDRSTRLEN] = {};
      if ((length == 4 || length == 16) &&
          inet_ntop(length == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text,
                    sizeof text) != nullptr)
        facts.ip_addresses.emplace_back(text);
    }
  }
  GENERAL_NAMES_free(names);
  return facts;
}

bool SignedBy(const std::string& cert_pem, const std::string& key_pem, const std::string& ca_pem) {
  Cert cert = ReadCert(cert_pem), ca = ReadCert(ca_pem);
  Key key = ReadKey(key_pem);
  if (!cert || !ca || !key) return false;
  Key ca_public(X509_get_pubkey(ca.get()));
  return ca_public && X509_verify(cert.get(), ca_public.get()) == 1 &&
         X509_check_private_key(cert.get(), key.get()) == 1;
}

bool NeedsRenewal(const KeyPair& serving, const std::string& ca_pem,
                  const std::vector<std::string>& dns_names,
                  const std::vector<std::string>& ip_addresses,
                  std::chrono::system_clock::time_point now, std::string* why) {
  auto facts = ReadCertificate(serving.cert_pem);
  if (!facts) {
    *why = "no readable serving certificate";
    return true;
  }
  if (!SignedBy(serving.cert_pem, serving.key_pem, ca_pem)) {
    *why = "the serving certificate is not the CA's or its key does not match";
    return true;
  }
  for (const std::string& dns : dns_names) {
    if (std::find(facts->dns_names.begin(), facts->dns_names.end(), dns) ==
        facts->dns_names.end()) {
      *why = "the serving certificate lacks the name " + dns;
      return true;
    }
  }
  for (const std::string& ip : ip_addresses) {
    if (std::find(facts->ip_addresses.begin(), facts->ip_addresses.end(), ip) ==
        facts->ip_addresses.end()) {
      *why = "the serving certificate lacks the address " + ip;
      return true;
    }
  }
  const auto life = facts->not_after - facts->not_before;
  if (now > facts->not_after - life / 3) {
    *why = "the serving certificate expires soon";
    return true;
  }
  return false;
}

}  // namespace gpustack::https
