#include "host/operator/webhooks.h"

#include <atomic>
#include <mutex>
#include <thread>

#include "host/api/api_server.h"
#include "host/common/logging.h"
#include "host/https/certs.h"
#include "host/kube/config.h"
#include "host/kube/informer.h"
#include "host/operator/admission.h"
#include "host/operator/instance_metrics.h"
#include "host/operator/settings.h"

namespace gpustack::op {
namespace {

using namespace std::chrono_literals;
using https::KeyPair;
using kube::ObjectPtr;

constexpr auto kCaValidity = std::chrono::hours(24 * 365 * 10);
constexpr auto kServingValidity = std::chrono::hours(24 * 365);
constexpr auto kCaRenewBefore = std::chrono::hours(24 * 365);
constexpr auto kCheckEvery = 10min;
constexpr const char* kEntranceIndex = "entrance";

bool IsIpAddress(const std::string& host) {
  return !host.empty() && (host.find_first_not_of("0123456789.") == std::string::npos ||
                           host.find(':') != std::string::npos);
}

// The host of an https:// URL base ("https://127.0.0.1:9443" -> "127.0.0.1").
std::string HostOf(const std::string& url) {
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  rest = rest.substr(0, rest.find('/'));
  if (!rest.empty() && rest.front() == '[') return rest.substr(1, rest.find(']') - 1);
  return rest.substr(0, rest.rfind(':') == std::string::npos ? rest.size() : rest.rfind(':'));
}

}  // namespace

std::pair<std::vector<std::string>, std::vector<std::string>> ServingNames(
    const WebhookOptions& options, const std::string& system_namespace) {
  std::vector<std::string> dns, ips;
  const std::string& s = options.service;
  for (const std::string& name :
       {s, s + "." + system_namespace, s + "." + system_namespace + ".svc",
        s + "." + system_namespace + ".svc.cluster.local"})
    dns.push_back(name);
  if (!options.url.empty()) {
    const std::string host = HostOf(options.url);
    (IsIpAddress(host) ? ips : dns).push_back(host);
  }
  return {dns, ips};
}

std::vector<Json> RenderWebhookConfigurations(const WebhookOptions& options,
                                              const std::string& system_namespace,
                                              const std::string& ca_bundle) {
  auto client = [&](const std::string& path) {
    Json c = Json::object();
    if (!options.url.empty()) {
      std::string base = options.url;
      while (!base.empty() && base.back() == '/') base.pop_back();
      c["url"] = base + path;
    } else {
      c["service"] = {{"namespace", system_namespace},
                      {"name", options.service},
                      {"path", path},
                      {"port", options.service_port}};
    }
    if (!ca_bundle.empty()) c["caBundle"] = kube::EncodeBase64(ca_bundle);
    return c;
  };
  // Never kube-system (the control plane must not wait on us) nor our own namespace (the worker
  // must be able to start while its webhooks are down).
  const Json namespaces = {
      {"matchExpressions",
       Json::array({{{"key", "kubernetes.io/metadata.name"},
                     {"operator", "NotIn"},
                     {"values", Json::array({"kube-system", system_namespace})}}})}};
  const Json queued = {
      {"matchExpressions", Json::array({{{"key", kQueueNameLabel}, {"operator", "Exists"}}})}};
  auto webhook = [&](const std::string& name, const std::string& path, const Json& rules,
                     const std::string& failure, int timeout) {
    return Json{{"name", name},
                {"clientConfig", client(path)},
                {"rules", rules},
                {"failurePolicy", failure},
                {"sideEffects", "None"},
                {"timeoutSeconds", timeout},
                {"matchPolicy", "Equivalent"},
                {"admissionReviewVersions", Json::array({"v1"})}};
  };
  auto rule = [](const std::string& group, const std::string& version, const std::string& resource,
                 Json operations, const std::string& scope) {
    return Json::array({{{"apiGroups", Json::array({group})},
                         {"apiVersions", Json::array({version})},
                         {"resources", Json::array({resource})},
                         {"operations", std::move(operations)},
                         {"scope", scope}}});
  };
  Json pod_mutate = webhook("pods.mutate.gpustack.ai", kMutatePodPath,
                            rule("", "v1", "pods", {"CREATE"}, "Namespaced"), "Fail", 5);
  pod_mutate["namespaceSelector"] = namespaces;
  pod_mutate["objectSelector"] = queued;
  pod_mutate["reinvocationPolicy"] = "IfNeeded";
  Json workload_mutate =
      webhook("workloads.mutate.gpustack.ai", kMutateWorkloadPath,
              rule("kueue.x-k8s.io", "v1beta2", "workloads", {"CREATE", "UPDATE"}, "Namespaced"),
              "Ignore", 3);
  workload_mutate["namespaceSelector"] = namespaces;
  Json type_mutate = webhook(
      "instancetypes.mutate.gpustack.ai", kMutateInstanceTypePath,
      rule("worker.gpustack.ai", "v1alpha1", "instancetypes", {"CREATE"}, "Cluster"), "Fail", 5);
  Json pod_validate = webhook("pods.validate.gpustack.ai", kValidatePodPath,
                              rule("", "v1", "pods", {"CREATE"}, "Namespaced"), "Fail", 5);
  pod_validate["namespaceSelector"] = namespaces;
  pod_validate["objectSelector"] = queued;
  Json type_validate = webhook(
      "instancetypes.validate.gpustack.ai", kValidateInstanceTypePath,
      rule("worker.gpustack.ai", "v1alpha1", "instancetypes", {"CREATE", "UPDATE"}, "Cluster"),
      "Fail", 5);
  Json instance_mutate = webhook(
      "instances.mutate.gpustack.ai", kMutateInstancePath,
      rule("worker.gpustack.ai", "v1alpha1", "instances", {"CREATE", "UPDATE"}, "Namespaced"),
      "Fail", 5);
  instance_mutate["namespaceSelector"] = namespaces;
  Json instance_validate = webhook(
      "instances.validate.gpustack.ai", kValidateInstancePath,
      rule("worker.gpustack.ai", "v1alpha1", "instances", {"CREATE", "UPDATE"}, "Namespaced"),
      "Fail", 5);
  instance_validate["namespaceSelector"] = namespaces;
  Json metadata = {{"labels", {{kPartOfLabel, kPartOf}}}};
  if (options.certificates == "cert-manager") {
    metadata["annotations"] = {
        {"cert-manager.io/inject-ca-from", system_namespace + "/" + options.certificate}};
  }
  Json mutating = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "MutatingWebhookConfiguration"},
      {"metadata", metadata},
      {"webhooks", Json::array({pod_mutate, workload_mutate, type_mutate, instance_mutate})}};
  mutating["metadata"]["name"] = kMutatingConfiguration;
  Json validating = {{"apiVersion", "admissionregistration.k8s.io/v1"},
                     {"kind", "ValidatingWebhookConfiguration"},
                     {"metadata", metadata},
                     {"webhooks", Json::array({pod_validate, type_validate, instance_validate})}};
  validating["metadata"]["name"] = kValidatingConfiguration;
  return {mutating, validating};
}

struct AdmissionWebhooks::State {
  kube::Client& client;
  WebhookOptions options;
  std::string system_namespace;
  ManufacturerTable manufacturers;
  std::unique_ptr<kube::Informer> instance_types, settings;
  std::unique_ptr<InstanceMetricsService> instance_metrics;  // before api: it outlives it
  std::unique_ptr<api::ApiServer> api;
  std::unique_ptr<https::Server> server;
  std::jthread keeper;
  bool api_registered = false;
  std::string registered_bundle;  // the caBundle of the APIService last applied
  std::atomic<bool> serving{false};
  std::mutex mutex;
  std::string served_cert;     // PEM now served
  std::string applied_bundle;  // caBundle last applied
  std::filesystem::file_time_type cert_mtime{};
  std::shared_ptr<spdlog::logger> log = Logger("webhooks");

  State(kube::Client& c, WebhookOptions o, std::string ns, ManufacturerTable m)
      : client(c),
        options(std::move(o)),
        system_namespace(std::move(ns)),
        manufacturers(std::move(m)) {}

  AdmissionView View() {
    AdmissionView view;
    view.manufacturers = manufacturers;
    view.nodes_pinned = options.nodes_pinned;
    std::vector<std::string> problems;
    ObjectPtr secret = settings->Get(system_namespace + "/" + kSettingsSecret);
    view.settings = SettingsFromSecret(secret.get(), &problems);
    view.instance_type_by_entrance =
        [this](const std::string& queue) -> std::shared_ptr<const Json> {
      auto found = instance_types->ByIndex(kEntranceIndex, queue);
      return found.empty() ? nullptr : found.front();
    };
    view.instance_type_by_name = [this](const std::string& name) -> std::shared_ptr<const Json> {
      return instance_types->Get(name);
    };
    view.accelerator_group_known = [this](const std::string& akey) {
      // The worker derives one InstanceType per pool from the nodes it manages.
      for (const ObjectPtr& t : instance_types->List()) {
        const Json labels = (*t)["metadata"].value("labels", Json::object());
        if (labels.value(kDerivedLabel, "") == "true" &&
            (*t)["spec"].value("acceleratorGroup", "") == akey)
          return true;
      }
      return false;
    };
    return view;
  }

  https::Response Handle(const std::string& body,
                         Verdict (*rule)(const AdmissionRequest&, const AdmissionView&)) {
    auto request = DecodeReview(body);
    if (!request) return {400, Json{{"error", request.error()}}.dump()};
    Verdict verdict;
    try {
      verdict = rule(*request, View());
    } catch (const std::exception& e) {
      // A bug of ours must not read as the user's fault: a 500 verdict, the failure policy
      // decides.
      verdict = Deny(500, std::string("the gpustack webhook failed: ") + e.what());
    }
    return {200, EncodeReview(request->uid, verdict)};
  }

  // The self-managed certificate: made once, shared by every replica through the Secret,
  // renewed well before it expires. Returns the CA (PEM) and the serving pair.
  Result<std::pair<std::string, KeyPair>> EnsureSelfManaged() {
    const auto [dns, ips] = ServingNames(options, system_namespace);
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto secret = client.Get(kube::resources::Secrets(), system_namespace, kWebhookTlsSecret);
      if (!secret && !kube::IsNotFound(secret.failure())) return Error{secret.error()};
      auto field = [&](const char* key) -> std::string {
        if (!secret) return {};
        const Json data = secret->value("data", Json::object());
        if (!data.contains(key) || !data[key].is_string()) return {};
        auto decoded = kube::DecodeBase64(data[key].get<std::string>(), key);
        return decoded ? *decoded : std::string();
      };
      std::string ca_cert = field("ca.crt"), ca_key = field("ca.key");
      KeyPair serving{field("tls.crt"), field("tls.key")};
      bool changed = false;
      std::string why;
      auto ca_facts = https::ReadCertificate(ca_cert);
      const auto now = std::chrono::system_clock::now();
      if (!ca_facts || ca_key.empty() || now > ca_facts->not_after - kCaRenewBefore) {
        auto ca = https::MakeCertificateAuthority("gpustack-operator-webhook-ca", kCaValidity);
        if (!ca) return Error{ca.error()};
        // The old CA stays in the bundle until the old serving certificate is gone.
        ca_cert = ca->cert_pem + (ca_facts && now < ca_facts->not_after ? ca_cert : "");
        ca_key = ca->key_pem;
        serving = {};
        changed = true;
        log->info("made a new webhook CA");
      }
      if (https::NeedsRenewal(serving, ca_cert, dns, ips, now, &why)) {
        auto made = https::MakeServingCertificate({ca_cert, ca_key},
                                                  options.service + "." + system_namespace + ".svc",
                                                  dns, ips, kServingValidity);
        if (!made) return Error{made.error()};
        serving = *made;
        changed = true;
        log->info("made a new webhook serving certificate: {}", why);
      }
      if (!changed) return std::make_pair(ca_cert, serving);
      Json object = {{"apiVersion", "v1"},
                     {"kind", "Secret"},
                     {"type", "kubernetes.io/tls"},
                     {"metadata",
                      {{"name", kWebhookTlsSecret},
                       {"namespace", system_namespace},
                       {"labels", {{kPartOfLabel, kPartOf}}}}},
                     {"data",
                      {{"ca.crt", kube::EncodeBase64(ca_cert)},
                       {"ca.key", kube::EncodeBase64(ca_key)},
                       {"tls.crt", kube::EncodeBase64(serving.cert_pem)},
                       {"tls.key", kube::EncodeBase64(serving.key_pem)}}}};
      Result<Json> written = Error{""};
      if (secret) {
        object["metadata"]["resourceVersion"] = (*secret)["metadata"].value("resourceVersion", "");
        written = client.Update(kube::resources::Secrets(), object);
      } else {
        written = client.Create(kube::resources::Secrets(), object);
      }
      if (written) return std::make_pair(ca_cert, serving);
      // Another replica wrote first: take what it wrote.
      if (kube::IsConflict(written.failure()) || kube::IsAlreadyExists(written.failure())) continue;
      return Error{"cannot store the webhook certificate in Secret " + system_namespace + "/" +
                   kWebhookTlsSecret + ": " + written.error()};
    }
    return Error{"the webhook certificate Secret keeps changing under us"};
  }

  // One round: the certificate served and the configurations the apiserver reads.
  Status Keep() {
    std::string cert, key, bundle;
    if (options.certificates == "self") {
      auto made = EnsureSelfManaged();
      if (!made) return Error{made.error()};
      bundle = made->first;
      cert = made->second.cert_pem;
      key = made->second.key_pem;
    } else {
      const auto cert_path = options.cert_dir / "tls.crt";
      std::error_code ec;
      const auto mtime = std::filesystem::last_write_time(cert_path, ec);
      if (ec)
        return Error{"cannot read the webhook certificate " + cert_path.string() + ": " +
                     ec.message()};
      if (mtime == cert_mtime && serving) return Ok{};
      auto pair = https::ReadCertificateDir(options.cert_dir);
      if (!pair) return pair.failure();
      cert = std::move(pair->cert_pem);
      key = std::move(pair->key_pem);
      cert_mtime = mtime;
    }
    if (cert != served_cert) {
      if (Status set = server->SetCertificate({cert, key}); !set) return set;
      served_cert = cert;
      log->info("serving the webhook certificate (expires {})", [&] {
        auto facts = https::ReadCertificate(cert);
        if (!facts) return std::string("?");
        const std::time_t t = std::chrono::system_clock::to_time_t(facts->not_after);
        char text[32];
        std::strftime(text, sizeof text, "%Y-%m-%d", std::gmtime(&t));
        return std::string(text);
      }());
    }
    if (options.apply_configurations && (bundle != applied_bundle || !serving)) {
      const auto configurations = RenderWebhookConfigurations(options, system_namespace, bundle);
      const kube::ResourceType types[] = {kube::resources::MutatingWebhookConfigurations(),
                                          kube::resources::ValidatingWebhookConfigurations()};
      for (size_t i = 0; i < configurations.size(); ++i) {
        auto applied = client.Apply(types[i], configurations[i],
                                    {.field_manager = kWebhooksManager, .force = true});
        if (!applied)
          return Error{"cannot apply " + configurations[i]["metadata"]["name"].get<std::string>() +
                       ": " + applied.error()};
      }
      applied_bundle = bundle;
    }
    if (serving && (!api_registered || bundle != registered_bundle)) {
      if (Status registered = RegisterApi(bundle); !registered) return registered;
    }
    return Ok{};
  }

  // The APIService of the v1 API (and, for a control plane outside the cluster, the Service and
  // Endpoints it names). Needs the bound port: called once the server listens.
  Status RegisterApi(const std::string& bundle) {
    if (!api || !options.apply_configurations) return Ok{};
    if (!options.url.empty() && options.api_address.empty()) {
      api_registered = true;  // served, not registered: nothing the aggregator could reach
      return Ok{};
    }
    const auto apply = [&](const kube::ResourceType& type, const Json& object) -> Status {
      auto applied = client.Apply(type, object, {.field_manager = kWebhooksManager, .force = true});
      if (!applied)
        return Error{"cannot apply " + object["kind"].get<std::string>() + " " +
                     object["metadata"]["name"].get<std::string>() + ": " + applied.error()};
      return Ok{};
    };
    if (!options.url.empty()) {
      const Json labels = {{kPartOfLabel, kPartOf}};
      const Json service = {
          {"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", options.service}, {"namespace", system_namespace}, {"labels", labels}}},
          {"spec",
           {{"ports", Json::array({{{"name", "https"},
                                    {"port", options.service_port},
                                    {"targetPort", server->port()}}})}}}};
      const Json endpoints = {
          {"apiVersion", "v1"},
          {"kind", "Endpoints"},
          {"metadata",
           {{"name", options.service}, {"namespace", system_namespace}, {"labels", labels}}},
          {"subsets", Json::array({{{"addresses", Json::array({{{"ip", options.api_address}}})},
                                    {"ports", Json::array({{{"name", "https"},
                                                            {"port", server->port()}}})}}})}};
      if (Status s = apply({"", "v1", "services", true}, service); !s) return s;
      if (Status s = apply({"", "v1", "endpoints", true}, endpoints); !s) return s;
    }
    for (const std::string& group : api->groups()) {
      const Json api_service = api::RenderApiService(
          group, system_namespace, options.service, options.service_port, bundle,
          options.certificates == "self" ? std::string() : options.certificate);
      if (Status s = apply({"apiregistration.k8s.io", "v1", "apiservices", false}, api_service);
          !s)
        return s;
      log->info("registered {}/{} with the aggregator", group, api::kServedVersion);
    }
    registered_bundle = bundle;
    api_registered = true;
    return Ok{};
  }
};

AdmissionWebhooks::AdmissionWebhooks(kube::Client& client, WebhookOptions options,
                                     std::string system_namespace, ManufacturerTable manufacturers)
    : state_(std::make_unique<State>(client, std::move(options), std::move(system_namespace),
                                     std::move(manufacturers))) {}

AdmissionWebhooks::~AdmissionWebhooks() { Stop(); }

Status AdmissionWebhooks::Start() {
  State& s = *state_;
  if (s.options.certificates != "self" && s.options.certificates != "cert-manager")
    return Error{
        "--webhook-certificates must be self or cert-manager, not " + s.options.certificates,
        Code::kInvalidArgument};
  if (s.options.certificates == "cert-manager" && s.options.cert_dir.empty())
    return Error{
        "--webhook-certificates cert-manager needs --webhook-cert-dir (the mounted Secret)",
        Code::kInvalidArgument};
  s.instance_types = std::make_unique<kube::Informer>(s.client, kube::resources::InstanceTypes());
  s.instance_types->AddIndexer(kEntranceIndex, [](const Json& it) -> std::vector<std::string> {
    const Json labels = it.value("metadata", Json::object()).value("labels", Json::object());
    auto entrance = labels.find(kEntranceLabel);
    if (entrance == labels.end() || !entrance->is_string()) return {};
    return {entrance->get<std::string>()};
  });
  kube::InformerOptions by_name;
  by_name.field_selector = std::string("metadata.name=") + kSettingsSecret;
  s.settings = std::make_unique<kube::Informer>(s.client, kube::resources::Secrets(),
                                                s.system_namespace, by_name);
  s.instance_types->Start();
  s.settings->Start();
  using Rule = Verdict (*)(const AdmissionRequest&, const AdmissionView&);
  std::vector<https::Route> routes;
  for (auto [path, rule] : {std::pair<const char*, Rule>{kMutatePodPath, &MutatePod},
                            {kValidatePodPath, &ValidatePod},
                            {kMutateWorkloadPath, &MutateWorkload},
                            {kMutateInstanceTypePath, &MutateInstanceType},
                            {kValidateInstanceTypePath, &ValidateInstanceType},
                            {kMutateInstancePath, &MutateInstance},
                            {kValidateInstancePath, &ValidateInstance}}) {
    routes.push_back({path, {"POST"}, [&s, rule](const https::Request& request) {
                        return s.Handle(request.body, rule);
                      }});
  }
  if (s.options.serve_api) {
    s.options.api.system_namespace = s.system_namespace;
    if (s.options.api.settings.empty()) {
      for (const SettingInfo& info : KnownSettings())
        s.options.api.settings.push_back({info.name, info.default_value, info.description,
                                          info.boolean ? "boolean" : "string", true,
                                          info.sensitive});
    }
    if (!s.options.api.instance_metrics) {
      s.instance_metrics = std::make_unique<InstanceMetricsService>(
          s.client, InstanceMetricsOptions{.system_namespace = s.system_namespace});
      s.options.api.instance_metrics = [&s](const Json& instance) {
        return s.instance_metrics->Get(instance);
      };
    }
    s.api = std::make_unique<api::ApiServer>(s.client, s.options.api);
    if (Status started = s.api->Start(); !started) return started;
    for (https::Route& r : s.api->Routes()) routes.push_back(std::move(r));
    // The aggregator proves itself with its front-proxy client certificate.
    s.options.server.request_client_certificate = true;
  }
  s.server = std::make_unique<https::Server>(s.options.server, std::move(routes));
  // The first certificate before listening: an apiserver call must never meet a bad one.
  Status kept = s.Keep();
  for (int attempt = 0; !kept && attempt < 3; ++attempt) {
    s.log->warn("webhook certificate: {} (retrying)", kept.error());
    std::this_thread::sleep_for(std::chrono::seconds(attempt + 1));
    kept = s.Keep();
  }
  if (!kept && s.served_cert.empty()) return kept;
  if (Status started = s.server->Start(); !started) return started;
  s.serving = true;
  if (!kept) s.log->warn("{}", kept.error());
  if (Status registered = s.RegisterApi(s.applied_bundle); !registered)
    s.log->warn("{} (retried with the certificate check)", registered.error());
  s.log->info("serving admission webhooks on https://{}:{} ({} certificates)",
              s.options.server.address, s.server->port(), s.options.certificates);
  s.keeper = std::jthread([&s](std::stop_token stop) {
    std::mutex m;
    std::condition_variable_any cv;
    // cert-manager's files are looked at often (they change under us); our own Secret rarely.
    const auto every = s.options.certificates == "self"
                           ? std::chrono::duration_cast<std::chrono::seconds>(kCheckEvery)
                           : std::chrono::seconds(30);
    while (!stop.stop_requested()) {
      std::unique_lock lock(m);
      cv.wait_for(lock, stop, every, [] { return false; });
      if (stop.stop_requested()) break;
      if (Status kept = s.Keep(); !kept) s.log->warn("webhook certificate: {}", kept.error());
    }
  });
  return Ok{};
}

void AdmissionWebhooks::Stop() {
  State& s = *state_;
  if (s.keeper.joinable()) {
    s.keeper.request_stop();
    s.keeper.join();
  }
  if (s.server) s.server->Stop();
  if (s.api) s.api->Stop();
  if (s.instance_types) s.instance_types->Stop();
  if (s.settings) s.settings->Stop();
  s.serving = false;
}

uint16_t AdmissionWebhooks::port() const { return state_->server ? state_->server->port() : 0; }

bool AdmissionWebhooks::ready() const {
  return state_->serving && state_->instance_types && state_->instance_types->HasSynced() &&
         (!state_->api || state_->api->ready());
}

std::string AdmissionWebhooks::RenderMetrics() const {
  // `serving` is set once the server exists: the health endpoint may ask before that.
  return state_->serving ? state_->server->RenderMetrics("gpustack_webhook") : std::string();
}

}  // namespace gpustack::op
