// The served kinds that are not proxies: Setting, the InstanceTypeFlavor catalogue, the helper
// wrappers; and the write helpers every kind shares (patches, field validation).
#include <gtest/gtest.h>

#include "host/api/catalog.h"
#include "host/api/helper_kinds.h"
#include "host/api/http.h"
#include "host/api/settings_kind.h"
#include "host/common/base64.h"

namespace gpustack::api {
namespace {

const std::vector<SettingSpec> kSpecs = {
    {"node-management-manual", "false", "manual", "boolean", true, false},
    {"instance-ssh-server-image", "gpustack/ssh-server:v1.3.0", "image", "string", true, false},
    {"registry-token", "", "a token", "string", true, true}};

TEST(Settings, OneObjectPerSettingWithTheStoredValueMaskedWhenSensitive) {
  const Json secret = {{"metadata", {{"name", "gpustack-settings"}, {"creationTimestamp", "2026-12-05T10:00:00Z"}}},
                       {"data",
                        {{"node-management-manual", EncodeBase64("true")},
                         {"registry-token", EncodeBase64("t0ken")},
                         {"unknown", EncodeBase64("x")}}}};
  const auto settings = DeriveSettings(&secret, kSpecs, "gpustack-system");
  ASSERT_EQ(settings.size(), 3u);
  EXPECT_EQ(settings[0]["metadata"]["namespace"], "gpustack-system");
  EXPECT_EQ(settings[0]["status"]["value"], "true");
  EXPECT_EQ(settings[0]["spec"], Json::object());  // spec.value is write-only
  EXPECT_EQ(settings[1]["status"]["value"], "gpustack/ssh-server:v1.3.0");  // not stored: default
  EXPECT_EQ(settings[2]["status"]["value"], kMasked);
  EXPECT_EQ(settings[2]["status"]["sensitive"], true);
  EXPECT_EQ(DeriveSettings(nullptr, kSpecs, "ns")[0]["status"]["value"], "false");
}

TEST(Settings, AValueOfTheWrongTypeIsRefusedNamingTheSettingAndTheType) {
  EXPECT_EQ(*SettingValue(kSpecs[0], Json("TRUE")), "true");
  EXPECT_EQ(*SettingValue(kSpecs[0], Json(false)), "false");
  auto maybe = SettingValue(kSpecs[0], Json("maybe"));
  ASSERT_FALSE(maybe);
  EXPECT_EQ(maybe.error(),
            "node-management-manual is a boolean setting: the value must be \"true\" or \"false\"");
  EXPECT_EQ(*SettingValue(kSpecs[1], Json("my/ssh:1")), "my/ssh:1");
  auto number = SettingValue(kSpecs[1], Json(3));
  ASSERT_FALSE(number);
  EXPECT_EQ(number.error(),
            "instance-ssh-server-image is a string setting: the value must be a string");
}

ObjectPtr Flavor(const std::string& name, Json labels, Json notes = Json::object()) {
  return std::make_shared<const Json>(
      Json{{"metadata", {{"name", name}, {"labels", labels}, {"annotations", notes}}}});
}

TEST(FlavorCatalog, OneEntryPerPoolWithoutOsAndArch) {
  const std::vector<ObjectPtr> flavors = {
      Flavor("gpustack--amd-epyc-linux-amd64-16c",
             {{"general.feature.gpustack.ai/amd-epyc", "true"},
              {"general.feature.gpustack.ai/amd-epyc.count", "16"},
              {"feature.gpustack.ai/acceleratable", "false"}}),
      Flavor("gpustack--amd-epyc--nvidia-a10g-linux-amd64-1d",
             {{"general.feature.gpustack.ai/amd-epyc", "true"},
              {"acceleratable.feature.gpustack.ai/nvidia-a10g", "true"},
              {"acceleratable.feature.gpustack.ai/nvidia-a10g.count", "1"}},
             {{"note.gpustack.ai/manufacturer", "nvidia"},
              {"note.gpustack.ai/product", "NVIDIA A10G"},
              {"note.gpustack.ai/memory", "23028Mi"},
              {"note.gpustack.ai/cores", "80"},
              {"note.gpustack.ai/sliceable", "true"}}),
      // The same pool with two cards a node: one entry.
      Flavor("gpustack--amd-epyc--nvidia-a10g-linux-amd64-2d",
             {{"general.feature.gpustack.ai/amd-epyc", "true"},
              {"acceleratable.feature.gpustack.ai/nvidia-a10g", "true"}})};
  const auto catalog = DeriveFlavorCatalog(flavors, false);
  ASSERT_EQ(catalog.size(), 2u);
  EXPECT_EQ(catalog[0]["metadata"]["name"], "gpustack--generic");
  EXPECT_EQ(catalog[0]["spec"]["manufacturer"], "generic");
  EXPECT_EQ(catalog[0]["spec"]["acceleratable"], false);
  EXPECT_EQ(catalog[1]["metadata"]["name"], "gpustack--nvidia-a10g");
  EXPECT_EQ(catalog[1]["spec"],
            (Json{{"acceleratable", true}, {"acceleratorGroup", "nvidia-a10g"},
                  {"generalGroup", "generic"}, {"manufacturer", "nvidia"},
                  {"product", "NVIDIA A10G"}, {"memory", "23028Mi"}, {"cores", 80},
                  {"sliceable", true}}));
  const auto aware = DeriveFlavorCatalog(flavors, true);
  ASSERT_EQ(aware.size(), 2u);
  EXPECT_EQ(aware[0]["metadata"]["name"], "gpustack--amd-epyc");
  EXPECT_EQ(aware[1]["metadata"]["name"], "gpustack--amd-epyc--nvidia-a10g");
  EXPECT_EQ(aware[1]["spec"]["generalGroup"], "amd-epyc");
  // Someone else's flavor (no gpustack labels) is not in the catalogue.
  EXPECT_TRUE(DeriveFlavorCatalog({Flavor("other", Json::object())}, false).empty());
}

const HelperMapping& Mapping(const std::string& kind) {
  for (const HelperMapping& h : HelperMappings())
    if (h.kind.kind == kind) return h;
  throw std::runtime_error(kind);
}

Json Served(const std::string& kind, Json spec, Json metadata = {{"name", "x"}, {"namespace", "n"}}) {
  return {{"apiVersion", "worker.gpustack.ai/v1"}, {"kind", kind}, {"metadata", metadata}, {"spec", spec}};
}

TEST(Helpers, EachWrapperRoundTripsThroughItsLabelledBackingObject) {
  for (const auto& [kind, spec] : std::vector<std::pair<std::string, Json>>{
           {"InstanceSSHPublicKey", {{"publicKey", "ssh-ed25519 AAAAC3 ada@laptop\n"}}},
           {"InstanceImagePullSecret", {{"registry", "r.example.com"}, {"username", "ada"}, {"email", "a@b"}}},
           {"InstancePersistentVolume", {{"type", "local"}, {"capacity", "10Gi"}, {"accessMode", "ReadWriteMany"}}},
           {"InstancePersistentVolumeType", {{"provisioner", "p"}, {"parameters", {{"k", "v"}}}}}}) {
    const HelperMapping& h = Mapping(kind);
    Json served = Served(kind, spec);
    served["metadata"]["labels"] = {{"team", "a"}};
    if (kind == "InstanceImagePullSecret") served["spec"]["password"] = "pw";
    auto backing = h.to_backing(served, nullptr);
    ASSERT_TRUE(backing) << kind << ": " << backing.error();
    EXPECT_EQ((*backing)["metadata"]["labels"][kHelperLabel], h.label_value) << kind;
    EXPECT_EQ((*backing)["metadata"]["labels"]["team"], "a") << kind;
    Json back = h.to_served(*backing);
    EXPECT_EQ(back["metadata"]["labels"], (Json{{"team", "a"}})) << kind;  // ours is hidden
    EXPECT_EQ(back["spec"], spec) << kind;  // the password is write-only
  }
}

TEST(Helpers, RefusalsNameTheField) {
  auto bad_key = Mapping("InstanceSSHPublicKey")
                     .to_backing(Served("InstanceSSHPublicKey", {{"publicKey", "# c\nhello world"}}), nullptr);
  ASSERT_FALSE(bad_key);
  EXPECT_EQ(bad_key.error(), "spec.publicKey: line 2 is not an OpenSSH public key (\"hello world...\")");
  EXPECT_FALSE(Mapping("InstanceSSHPublicKey")
                   .to_backing(Served("InstanceSSHPublicKey", {{"publicKey", "# only a comment"}}), nullptr));
  EXPECT_TRUE(Mapping("InstanceSSHPublicKey")
                  .to_backing(Served("InstanceSSHPublicKey",
                                     {{"publicKey", "no-pty ssh-rsa AAAAB3 a@b"}}), nullptr));
  auto capacity = Mapping("InstancePersistentVolume")
                      .to_backing(Served("InstancePersistentVolume", {{"type", "t"}, {"capacity", "lots"}}), nullptr);
  ASSERT_FALSE(capacity);
  EXPECT_EQ(capacity.error(), "spec.capacity: \"lots\" is not a quantity (e.g. 10Gi)");
  auto no_password = Mapping("InstanceImagePullSecret")
                         .to_backing(Served("InstanceImagePullSecret", {{"registry", "r"}, {"username", "u"}}), nullptr);
  ASSERT_FALSE(no_password);
  EXPECT_EQ(no_password.error(), "spec.password: Required value");
}

TEST(Helpers, APasswordIsKeptOnUpdateAndNeverReadBack) {
  const HelperMapping& h = Mapping("InstanceImagePullSecret");
  Json served = Served("InstanceImagePullSecret", {{"registry", "r"}, {"username", "u"}, {"password", "pw"}});
  served["metadata"]["annotations"] = {
      {"kubectl.kubernetes.io/last-applied-configuration", served.dump()}};
  auto created = h.to_backing(served, nullptr);
  ASSERT_TRUE(created) << created.error();
  EXPECT_EQ(created->dump().find("\"password\\\":\\\"pw"), std::string::npos)  // not in the annotation
      << created->dump();
  Json update = Served("InstanceImagePullSecret", {{"registry", "r"}, {"username", "v"}});
  auto updated = h.to_backing(update, &*created);
  ASSERT_TRUE(updated) << updated.error();
  auto config = DecodeBase64((*updated)["data"][".dockerconfigjson"].get<std::string>(), "c");
  EXPECT_EQ(Json::parse(*config)["auths"]["r"]["password"], "pw");
  EXPECT_EQ(Json::parse(*config)["auths"]["r"]["username"], "v");
  EXPECT_EQ(h.to_served(*updated).dump().find("pw"), std::string::npos);
}

TEST(Http, PatchesApplyAsTheApiserverAppliesThem) {
  const Json current = {{"metadata", {{"name", "a"}}}, {"spec", {{"x", 1}, {"y", 2}}}};
  EXPECT_EQ(*Patched(current, "application/merge-patch+json", R"({"spec":{"y":null,"z":3}})"),
            (Json{{"metadata", {{"name", "a"}}}, {"spec", {{"x", 1}, {"z", 3}}}}));
  EXPECT_EQ((*Patched(current, "application/json-patch+json",
                      R"([{"op":"replace","path":"/spec/x","value":5}])"))["spec"]["x"], 5);
  EXPECT_EQ((*Patched(current, "application/apply-patch+yaml", "spec:\n  x: 7\n"))["spec"]["x"], 7);
  auto smp = Patched(current, "application/strategic-merge-patch+json", "{}");
  ASSERT_FALSE(smp);
  EXPECT_EQ(smp.failure().http_status, 415);
  auto failing = Patched(current, "application/json-patch+json", R"([{"op":"test","path":"/spec/x","value":9}])");
  ASSERT_FALSE(failing);
  EXPECT_EQ(failing.failure().http_status, 422);
  EXPECT_FALSE(Patched(current, "application/merge-patch+json", "not json"));
}

TEST(Http, FieldValidationStrictRefusesWarnWarnsIgnorePasses) {
  const Kind kind = SettingKind();
  const Json object = {{"apiVersion", "gpustack.ai/v1"},
                       {"kind", "Setting"},
                       {"metadata", {{"name", "a"}, {"anything", 1}}},
                       {"spec", {{"value", "x"}, {"valu", "y"}}},
                       {"extra", true}};
  EXPECT_EQ(UnknownFields(object, kind.schema), (std::vector<std::string>{"extra", "spec.valu"}));
  std::vector<std::string> warnings;
  auto strict = CheckFields(object, kind, Query::Parse("fieldValidation=Strict"), &warnings);
  ASSERT_FALSE(strict);
  EXPECT_EQ(strict.error(),
            "strict decoding error: unknown field \"extra\", unknown field \"spec.valu\"");
  EXPECT_TRUE(CheckFields(object, kind, Query::Parse("fieldValidation=Warn"), &warnings));
  EXPECT_EQ(warnings.size(), 2u);
  EXPECT_TRUE(CheckFields(object, kind, Query::Parse("fieldValidation=Ignore"), &warnings));
  EXPECT_FALSE(CheckFields(object, kind, Query::Parse("fieldValidation=Loose"), &warnings));
}

}  // namespace
}  // namespace gpustack::api
