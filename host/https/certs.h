// Every certificate the project mints, in one place: a private CA and the serving certificates
// it signs (the worker's self-managed webhook certificate, kept in a Secret, the CA handed to the
// apiserver as a caBundle), and a self-signed certificate for a server given no certificate (the
// node exporter without --cert-dir). Pure OpenSSL; no I/O but the certificate directory reader.
#ifndef GPUSTACK_HOST_HTTPS_CERTS_H_
#define GPUSTACK_HOST_HTTPS_CERTS_H_

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "host/common/result.h"

namespace gpustack::https {

struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

// A fresh P-256 private key, PKCS#8 PEM (OpenSSH reads it too: an Instance's SSH host key).
Result<std::string> MakePrivateKey();

// A self-signed P-256 CA that may sign serving certificates only (pathlen 0).
Result<KeyPair> MakeCertificateAuthority(const std::string& common_name,
                                         std::chrono::seconds validity);

// A serving certificate for `dns_names` and `ip_addresses` (subjectAltName), signed by `ca`.
Result<KeyPair> MakeServingCertificate(const KeyPair& ca, const std::string& common_name,
                                       const std::vector<std::string>& dns_names,
                                       const std::vector<std::string>& ip_addresses,
                                       std::chrono::seconds validity);

// A self-signed serving certificate (no CA): what a server with no certificate given serves.
Result<KeyPair> MakeSelfSignedCertificate(const std::string& common_name,
                                          const std::vector<std::string>& dns_names,
                                          const std::vector<std::string>& ip_addresses,
                                          std::chrono::seconds validity);

// A client certificate (extendedKeyUsage clientAuth) for `common_name`, signed by `ca` (tests
// play an aggregating apiserver's front proxy with it).
Result<KeyPair> MakeClientCertificate(const KeyPair& ca, const std::string& common_name,
                                      std::chrono::seconds validity);

// Verifies a client's chain (PEM, leaf first) against every CA certificate in `ca_bundle_pem`,
// for client authentication, now. Returns the leaf's subject common name; the error says why
// the chain is refused.
Result<std::string> VerifyClientCertificate(const std::vector<std::string>& chain_pem,
                                            const std::string& ca_bundle_pem);

// tls.crt and tls.key of a mounted certificate directory (a Kubernetes TLS Secret, cert-manager's
// included); the error names the file that could not be read.
Result<KeyPair> ReadCertificateDir(const std::filesystem::path& dir);

struct CertificateFacts {
  std::chrono::system_clock::time_point not_before, not_after;
  std::vector<std::string> dns_names, ip_addresses;
};
// The first certificate of a PEM text; an error when it is not one.
Result<CertificateFacts> ReadCertificate(const std::string& cert_pem);

// True when `cert_pem` was signed by the first certificate of `ca_pem` and `key_pem` is its key.
bool SignedBy(const std::string& cert_pem, const std::string& key_pem, const std::string& ca_pem);

// Whether a serving certificate must be made again: unreadable, not signed by the CA, missing a
// name, or less than a third of its life left.
bool NeedsRenewal(const KeyPair& serving, const std::string& ca_pem,
                  const std::vector<std::string>& dns_names,
                  const std::vector<std::string>& ip_addresses,
                  std::chrono::system_clock::time_point now, std::string* why);

}  // namespace gpustack::https

#endif  // GPUSTACK_HOST_HTTPS_CERTS_H_
