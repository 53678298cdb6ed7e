#include <gtest/gtest.h>

#include "host/api/authn.h"
#include "host/api/documents.h"
#include "host/api/kinds.h"
#include "host/api/request.h"
#include "host/api/selectors.h"
#include "host/https/certs.h"

namespace gpustack::api {
namespace {

RequestInfo Info(const std::string& method, const std::string& target) {
  const size_t q = target.find('?');
  auto info = ParseRequestInfo(method, target.substr(0, q),
                               Query::Parse(q == std::string::npos ? "" : target.substr(q + 1)));
  EXPECT_TRUE(info) << target << ": " << info.error();
  return info ? *info : RequestInfo{};
}

// The verb and the coordinates, as k8s.io/apiserver reads them.
TEST(RequestInfo, VerbsAndCoordinates) {
  const std::string base = "/apis/worker.gpustack.ai/v1";
  RequestInfo i = Info("GET", base + "/namespaces/ns1/instances");
  EXPECT_EQ(i.verb, "list");
  EXPECT_EQ(i.ns, "ns1");
  EXPECT_EQ(i.resource, "instances");
  EXPECT_TRUE(i.resource_request);
  EXPECT_EQ(Info("GET", base + "/namespaces/ns1/instances?watch=true").verb, "watch");
  EXPECT_EQ(Info("GET", base + "/instances?watch=1").verb, "watch");
  i = Info("GET", base + "/namespaces/ns1/instances/a/metrics");
  EXPECT_EQ(i.verb, "get");
  EXPECT_EQ(i.name, "a");
  EXPECT_EQ(i.subresource, "metrics");
  EXPECT_EQ(Info("POST", base + "/namespaces/ns1/instances").verb, "create");
  EXPECT_EQ(Info("PUT", base + "/namespaces/ns1/instances/a/status").verb, "update");
  EXPECT_EQ(Info("PATCH", base + "/instancetypes/t").verb, "patch");
  EXPECT_EQ(Info("DELETE", base + "/namespaces/ns1/instances/a").verb, "delete");
  EXPECT_EQ(Info("DELETE", base + "/namespaces/ns1/instances").verb, "deletecollection");
  i = Info("GET", base + "/devices/node%2Da");
  EXPECT_EQ(i.name, "node-a");
  EXPECT_TRUE(i.ns.empty());
  i = Info("GET", "/apis/worker.gpustack.ai");
  EXPECT_FALSE(i.resource_request);
  EXPECT_EQ(i.verb, "get");
  EXPECT_FALSE(Info("GET", "/openapi/v3").resource_request);
  for (const char* bad : {"/apis/g/v1/namespaces", "/apis/g/v1/instances/a/b/c/d",
                          "/apis/g/v1/namespaces/x/instances/..", "/apis/g/v1//instances",
                          "/apis/g/v1/instances/a%2Fb", "relative"}) {
    EXPECT_FALSE(ParseRequestInfo("GET", bad, Query{})) << bad;
  }
}

TEST(Query, DecodesAndKeepsTheFirst) {
  Query q = Query::Parse("labelSelector=a%3Db%2Cc+in+(x)&limit=5&limit=6&flag&watch=true");
  EXPECT_EQ(q.Get("labelSelector"), "a=b,c in (x)");
  EXPECT_EQ(q.Get("limit"), "5");
  EXPECT_TRUE(q.Has("flag"));
  EXPECT_TRUE(q.IsTrue("watch"));
  EXPECT_FALSE(q.IsTrue("flag"));
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
}

TEST(Selector, LabelsAndFields) {
  const nlohmann::json o = {
      {"metadata", {{"name", "a"}, {"namespace", "n"}, {"labels", {{"app", "x"}, {"tier", "web"}}}}}};
  auto match = [&](const std::string& s) {
    auto sel = Selector::ParseLabels(s);
    EXPECT_TRUE(sel) << s << ": " << sel.error();
    return sel && sel->Matches(Selectable::Of(o));
  };
  EXPECT_TRUE(match(""));
  EXPECT_TRUE(match("app=x"));
  EXPECT_TRUE(match("app==x,tier"));
  EXPECT_FALSE(match("app!=x"));
  EXPECT_TRUE(match("app in (y, x)"));
  EXPECT_FALSE(match("app notin (x)"));
  EXPECT_TRUE(match("!missing"));
  EXPECT_FALSE(match("missing"));
  EXPECT_TRUE(match("missing!=v"));
  for (const char* bad : {"app in (x", "app foo (x)", "=x", "a b=c"})
    EXPECT_FALSE(Selector::ParseLabels(bad)) << bad;
  auto fields = Selector::ParseFields("metadata.name=a,metadata.namespace!=m");
  ASSERT_TRUE(fields) << fields.error();
  EXPECT_TRUE(fields->Matches(Selectable::Of(o)));
  // Only string values are labels; an object without a namespace has an empty one.
  nlohmann::json odd = {{"metadata", {{"name", "b"}, {"labels", {{"n", 1}, {"s", "v"}}}}}};
  const Selectable b = Selectable::Of(odd);
  EXPECT_EQ(b.Label("n"), nullptr);
  ASSERT_NE(b.Label("s"), nullptr);
  EXPECT_EQ(*b.Label("s"), "v");
  EXPECT_FALSE(Selector::ParseLabels("n")->Matches(b));
  EXPECT_TRUE(Selector::ParseFields("metadata.namespace=")->Matches(b));
  EXPECT_FALSE(fields->Matches(b));
  auto unsupported = Selector::ParseFields("spec.type=x");
  ASSERT_FALSE(unsupported);
  EXPECT_EQ(unsupported.error(), "field label not supported: spec.type");
}

struct FrontProxy {
  https::KeyPair ca = *https::MakeCertificateAuthority("front-proxy-ca", std::chrono::hours(1));
  https::KeyPair client =
      *https::MakeClientCertificate(ca, "front-proxy-client", std::chrono::hours(1));
  nlohmann::json config_map = {
      {"data",
       {{"requestheader-client-ca-file", ca.cert_pem},
        {"requestheader-allowed-names", "[\"front-proxy-client\"]"},
        {"requestheader-username-headers", "[\"X-Remote-User\"]"},
        {"requestheader-group-headers", "[\"X-Remote-Group\"]"},
        {"requestheader-extra-headers-prefix", "[\"X-Remote-Extra-\"]"}}}};
};

TEST(Authenticate, TheFrontProxyNamesTheUserAndNobodyElseCan) {
  FrontProxy proxy;
  auto config = RequestHeaderConfigFrom(proxy.config_map);
  ASSERT_TRUE(config) << config.error();
  https::Request r;
  r.headers = {{"x-remote-user", "ada"},
               {"x-remote-group", "devs"},
               {"x-remote-extra-scopes%2fwho", "a"}};
  auto refused = Authenticate(*config, r);  // no certificate: 401
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.failure().http_status, 401);
  r.peer_certificates = {proxy.client.cert_pem};
  auto user = Authenticate(*config, r);
  ASSERT_TRUE(user) << user.error();
  EXPECT_EQ(user->name, "ada");
  EXPECT_EQ(user->groups, (std::vector<std::string>{"devs", "system:authenticated"}));
  EXPECT_EQ(user->extra["scopes/who"], std::vector<std::string>{"a"});

  // Signed by the CA but not an allowed name; signed by another CA; no user named.
  auto other_name = https::MakeClientCertificate(proxy.ca, "someone", std::chrono::hours(1));
  r.peer_certificates = {other_name->cert_pem};
  EXPECT_NE(Authenticate(*config, r).error().find("not an allowed front proxy"), std::string::npos);
  auto other_ca = https::MakeCertificateAuthority("x", std::chrono::hours(1));
  auto forged = https::MakeClientCertificate(*other_ca, "front-proxy-client", std::chrono::hours(1));
  r.peer_certificates = {forged->cert_pem};
  EXPECT_NE(Authenticate(*config, r).error().find("not trusted"), std::string::npos);
  r.peer_certificates = {proxy.client.cert_pem};
  r.headers = {};
  EXPECT_NE(Authenticate(*config, r).error().find("named no user"), std::string::npos);

  EXPECT_FALSE(RequestHeaderConfigFrom({{"data", nlohmann::json::object()}}));
}

TEST(Kinds, FromTheCompiledInCrds) {
  auto kinds = ServedKinds();
  ASSERT_TRUE(kinds) << kinds.error();
  ASSERT_EQ(kinds->size(), 3u);
  std::map<std::string, Kind> by;
  for (const Kind& k : *kinds) by[k.kind] = k;
  EXPECT_TRUE(by["Instance"].namespaced);
  EXPECT_EQ(by["Instance"].short_names, std::vector<std::string>{"inst"});
  EXPECT_EQ(by["Instance"].subresources, (std::vector<std::string>{"status", "metrics"}));
  EXPECT_EQ(by["Devices"].short_names, std::vector<std::string>{"devs"});
  EXPECT_EQ(by["InstanceType"].short_names, std::vector<std::string>{"instype"});
  EXPECT_FALSE(by["InstanceType"].namespaced);
  EXPECT_EQ(by["Instance"].storage.ApiVersion(), "worker.gpustack.ai/v1alpha1");
  EXPECT_TRUE(by["Instance"].schema.contains("properties"));
  EXPECT_FALSE(KindFromCrd("apiVersion: v1\nkind: ConfigMap\n"));
}

TEST(Conversion, RenamesTheVersionWhereverTheObjectNamesItsOwn) {
  const nlohmann::json stored = {
      {"apiVersion", "worker.gpustack.ai/v1alpha1"},
      {"kind", "Instance"},
      {"metadata",
       {{"name", "a"},
        {"managedFields",
         {{{"manager", "kubectl"}, {"apiVersion", "worker.gpustack.ai/v1alpha1"}},
          {{"manager", "x"}, {"apiVersion", "v1"}}}},
        {"ownerReferences", {{{"apiVersion", "worker.gpustack.ai/v1alpha1"}}}}}},
      {"spec", {{"image", "worker.gpustack.ai/v1alpha1"}}}};
  const nlohmann::json served = ToServed(stored);
  EXPECT_EQ(served["apiVersion"], "worker.gpustack.ai/v1");
  EXPECT_EQ(served["metadata"]["managedFields"][0]["apiVersion"], "worker.gpustack.ai/v1");
  EXPECT_EQ(served["metadata"]["managedFields"][1]["apiVersion"], "v1");
  // Another object's reference and the spec's contents are not this object's version.
  EXPECT_EQ(served["metadata"]["ownerReferences"][0]["apiVersion"], "worker.gpustack.ai/v1alpha1");
  EXPECT_EQ(served["spec"]["image"], "worker.gpustack.ai/v1alpha1");
  EXPECT_EQ(ToStorage(served), stored);
  const nlohmann::json list = {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
                               {"kind", "InstanceList"},
                               {"items", {stored}}};
  EXPECT_EQ(ToServed(list)["items"][0]["apiVersion"], "worker.gpustack.ai/v1");
  EXPECT_EQ(ToStorage(ToServed(list)), list);
  EXPECT_EQ(ToServed(nlohmann::json("text")), "text");
}

TEST(Documents, DiscoveryNamesKindsVerbsShortNamesAndTheCategory) {
  auto kinds = *ServedKinds();
  const auto list = ResourceList(kinds, "worker.gpustack.ai");
  EXPECT_EQ(list["groupVersion"], "worker.gpustack.ai/v1");
  std::set<std::string> names;
  for (const auto& r : list["resources"]) names.insert(r["name"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"devices", "devices/status", "instances",
                                          "instances/status", "instances/metrics",
                                          "instancetypes", "instancetypes/status"}));
  EXPECT_EQ(list["resources"][0]["categories"], nlohmann::json::array({"gpustack"}));
  const auto aggregated = AggregatedDiscovery(kinds, "apidiscovery.k8s.io/v2");
  EXPECT_EQ(aggregated["items"][0]["metadata"]["name"], "worker.gpustack.ai");
  EXPECT_EQ(aggregated["items"][0]["versions"][0]["resources"].size(), 3u);
  const auto v3 = OpenApiV3(kinds, "worker.gpustack.ai");
  const auto& instance = v3["components"]["schemas"]["ai.gpustack.worker.v1.Instance"];
  EXPECT_EQ(instance["x-kubernetes-group-version-kind"][0]["kind"], "Instance");
  EXPECT_TRUE(instance["properties"]["spec"]["properties"].contains("resources"));
  const auto v2 = OpenApiV2(kinds);
  EXPECT_TRUE(v2["definitions"].contains("ai.gpustack.worker.v1.InstanceList"));
  EXPECT_EQ(v2.dump().find("x-kubernetes-validations"), std::string::npos);
}

TEST(Documents, TablesCarryThePrinterColumns) {
  auto kinds = *ServedKinds();
  const Kind* instance = nullptr;
  for (const Kind& k : kinds)
    if (k.kind == "Instance") instance = &k;
  const nlohmann::json object = {
      {"metadata", {{"name", "a"}, {"creationTimestamp", "2026-12-05T10:00:00Z"}}},
      {"spec", {{"type", "t1"}}},
      {"status",
       {{"phase", "Ready"},
        {"hostIPs", {{{"ip", "10.0.0.1"}}}},
        {"ports", {{{"port", 8080}, {"nodePort", 1}}, {{"port", 22}, {"nodePort", 30022}}}}}}};
  const auto now = *kube::ParseTime("2026-12-05T10:05:30Z");
  const auto table = TableOf(*instance, {object}, "", "7", "", now);
  std::vector<std::string> columns;
  for (const auto& c : table["columnDefinitions"]) columns.push_back(c["name"]);
  EXPECT_EQ(columns, (std::vector<std::string>{"Name", "Type", "Host-IP", "SSH-Port", "Phase", "Age"}));
  EXPECT_EQ(table["rows"][0]["cells"],
            nlohmann::json::array({"a", "t1", "10.0.0.1", 30022, "Ready", "5m30s"}));
  EXPECT_EQ(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(EvaluateColumn(object, ".status.ports[?(@.port==23)].nodePort"), nlohmann::json());
  EXPECT_EQ(EvaluateColumn(object, ".status.hostIPs[3].ip"), nlohmann::json());
  EXPECT_EQ(HumanAge(std::chrono::seconds(90)), "90s");
  EXPECT_EQ(HumanAge(std::chrono::hours(50)), "2d2h");
}

}  // namespace
}  // namespace gpustack::api
