#include "host/https/certs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpustack::https {
namespace {

TEST(Certificates, MadeSignedNamedAndRenewedInTime) {
  auto ca = MakeCertificateAuthority("test-ca", std::chrono::hours(24 * 365));
  ASSERT_TRUE(ca) << ca.error();
  const std::vector<std::string> dns = {"svc.ns.svc"}, ips = {"127.0.0.1"};
  auto serving = MakeServingCertificate(*ca, "svc", dns, ips, std::chrono::hours(24 * 90));
  ASSERT_TRUE(serving) << serving.error();
  EXPECT_TRUE(SignedBy(serving->cert_pem, serving->key_pem, ca->cert_pem));
  auto other = MakeCertificateAuthority("other", std::chrono::hours(24));
  EXPECT_FALSE(SignedBy(serving->cert_pem, serving->key_pem, other->cert_pem));
  auto facts = ReadCertificate(serving->cert_pem);
  ASSERT_TRUE(facts);
  EXPECT_EQ(facts->dns_names, dns);
  EXPECT_EQ(facts->ip_addresses, ips);
  std::string why;
  const auto now = std::chrono::system_clock::now();
  EXPECT_FALSE(NeedsRenewal(*serving, ca->cert_pem, dns, ips, now, &why)) << why;
  EXPECT_TRUE(NeedsRenewal(*serving, ca->cert_pem, {"other.ns.svc"}, ips, now, &why));
  EXPECT_EQ(why, "the serving certificate lacks the name other.ns.svc");
  EXPECT_TRUE(
      NeedsRenewal(*serving, ca->cert_pem, dns, ips, now + std::chrono::hours(24 * 61), &why));
  EXPECT_EQ(why, "the serving certificate expires soon");
  EXPECT_TRUE(NeedsRenewal(*serving, other->cert_pem, dns, ips, now, &why));
  EXPECT_TRUE(NeedsRenewal({}, ca->cert_pem, dns, ips, now, &why));
  EXPECT_FALSE(ReadCertificate("not a certificate"));
  EXPECT_FALSE(MakeServingCertificate(*ca, "svc", {}, {}, std::chrono::hours(1)));  // no name
  EXPECT_FALSE(MakeServingCertificate({"junk", "junk"}, "svc", dns, ips, std::chrono::hours(1)));
}

TEST(Certificates, SelfSignedCarriesItsNamesAndSignsItself) {
  auto self = MakeSelfSignedCertificate("node", {"node", "localhost"}, {"127.0.0.1"},
                                        std::chrono::hours(1));
  ASSERT_TRUE(self) << self.error();
  EXPECT_TRUE(SignedBy(self->cert_pem, self->key_pem, self->cert_pem));
  auto facts = ReadCertificate(self->cert_pem);
  ASSERT_TRUE(facts);
  EXPECT_EQ(facts->dns_names, (std::vector<std::string>{"node", "localhost"}));
  EXPECT_EQ(facts->ip_addresses, std::vector<std::string>{"127.0.0.1"});
}

TEST(Certificates, ADirectoryNeedsBothFilesAndNamesTheMissingOne) {
  const auto dir = std::filesystem::temp_directory_path() / "gpustack-certs-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto missing = ReadCertificateDir(dir);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("tls.crt"), std::string::npos) << missing.error();
  auto self = MakeSelfSignedCertificate("x", {"x"}, {}, std::chrono::hours(1));
  ASSERT_TRUE(self);
  std::ofstream(dir / "tls.crt") << self->cert_pem;
  missing = ReadCertificateDir(dir);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("tls.key"), std::string::npos) << missing.error();
  std::ofstream(dir / "tls.key") << self->key_pem;
  auto read = ReadCertificateDir(dir);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->cert_pem, self->cert_pem);
  EXPECT_EQ(read->key_pem, self->key_pem);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpustack::https
