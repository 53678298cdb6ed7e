#include "host/api/api_server.h"

#include <algorithm>
#include <map>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "host/api/authn.h"
#include "host/api/authz.h"
#include "host/api/catalog.h"
#include "host/api/documents.h"
#include "host/api/helper_kinds.h"
#include "host/api/selectors.h"
#include "host/common/base64.h"
#include "host/common/logging.h"

namespace gpustack::api {
namespace {

using https::Request;
using https::Response;

std::string Forbidden(const UserInfo& user, const RequestInfo& info, const std::string& path,
                      const std::string& reason) {
  std::string message;
  if (info.resource_request) {
    message = info.resource + "." + info.group +
              (info.name.empty() ? "" : " \"" + info.name + "\"") + " is forbidden: User \"" +
              user.name + "\" cannot " + info.verb + " resource \"" + info.resource +
              (info.subresource.empty() ? "" : "/" + info.subresource) + "\" in API group \"" +
              info.group + "\"" +
              (info.ns.empty() ? " at the cluster scope" : " in the namespace \"" + info.ns + "\"");
  } else {
    message =
        "forbidden: User \"" + user.name + "\" cannot " + info.verb + " path \"" + path + "\"";
  }
  return reason.empty() ? message : message + ": " + reason;
}

// The continue token: where the next page starts (base64 JSON, opaque to clients).
std::string ContinueToken(uint64_t version, const std::string& after) {
  return EncodeBase64(Json{{"v", version}, {"after", after}}.dump());
}

Result<std::string> ContinueFrom(const std::string& token) {
  auto text = DecodeBase64(token, "continue");
  Json parsed = text ? Json::parse(*text, nullptr, false) : Json();
  if (!parsed.is_object() || !parsed.contains("after") || !parsed["after"].is_string())
    return Error{"invalid continue token", Code::kInvalidArgument};
  return parsed["after"].get<std::string>();
}

Result<long long> Number(const Query& query, const std::string& name) {
  const std::string text = query.Get(name);
  if (text.empty()) return 0LL;
  try {
    size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value >= 0) return value;
  } catch (const std::exception&) {
  }
  return Error{name + " must be a non-negative number, not \"" + text + "\""};
}

}  // namespace

struct ApiServer::State {
  kube::Client& client;
  ApiOptions options;
  std::shared_ptr<spdlog::logger> log = Logger("api");
  Authorizer authorizer;
  std::vector<Kind> kinds;  // in the backends' order
  std::vector<std::unique_ptr<Backend>> backends;
  std::map<std::string, std::string> documents;  // discovery and OpenAPI, by path
  std::map<std::string, std::string> discovery;  // the aggregated document, by version

  mutable std::mutex auth_mutex;
  std::optional<RequestHeaderConfig> request_header;
  std::string request_header_problem = "not read yet";

  std::jthread ticker;
  std::atomic<bool> started{false};

  State(kube::Client& c, ApiOptions o) : client(c), options(std::move(o)), authorizer(c) {}

  Backend* Find(const std::string& group, const std::string& resource) {
    for (auto& b : backends)
      if (b->kind().group == group && b->kind().resource == resource) return b.get();
    return nullptr;
  }

  void RefreshAuthentication() {
    auto map = client.Get(kube::resources::ConfigMaps(), "kube-system", kAuthenticationConfigMap);
    std::lock_guard lock(auth_mutex);
    if (!map) {
      request_header_problem = "cannot read kube-system/" + std::string(kAuthenticationConfigMap) +
                               ": " + map.error();
      log->warn("{}", request_header_problem);
      return;
    }
    auto config = RequestHeaderConfigFrom(*map);
    if (!config) {
      request_header_problem = config.error();
      log->warn("{}", request_header_problem);
      return;
    }
    request_header = std::move(*config);
  }

  Result<UserInfo> Authenticate(const Request& r) {
    std::lock_guard lock(auth_mutex);
    if (!request_header) {
      Error e{"Unauthorized: the front-proxy configuration is not available (" +
                  request_header_problem + ")",
              Code::kUnauthenticated};
      e.http_status = 401;
      return e;
    }
    return api::Authenticate(*request_header, r);
  }

  bool Ready() const {
    for (const auto& b : backends)
      if (b->RequiredForReadiness() && !b->cache().synced()) return false;
    return true;
  }

  Response Serve(const Request& r) {
    if (r.path == "/healthz" || r.path == "/livez" || r.path == "/readyz") {
      if (r.path == "/readyz" && !Ready())
        return {503, "the API's caches are not synced yet\n", "text/plain"};
      return {200, "ok", "text/plain"};
    }
    const Query query = Query::Parse(r.query);
    auto info = ParseRequestInfo(r.method, r.path, query);
    if (!info) return StatusResponse(400, "BadRequest", info.error());
    auto user = Authenticate(r);
    if (!user) return StatusResponse(401, "Unauthorized", user.error());
    auto decision = authorizer.Authorize(*user, *info, r.path);
    if (!decision) return StatusResponse(500, "InternalError", decision.error());
    if (!decision->allowed)
      return StatusResponse(
          403, "Forbidden", Forbidden(*user, *info, r.path, decision->reason),
          Json{{"group", info->group}, {"kind", info->resource}, {"name", info->name}});
    if (!info->resource_request) return ServeDocument(r);
    const auto not_found = [] {
      return StatusResponse(404, "NotFound", "the server could not find the requested resource");
    };
    if (info->version != kServedVersion) return not_found();
    Backend* backend = Find(info->group, info->resource);
    if (!backend) return not_found();
    const Kind& kind = backend->kind();
    if (!kind.namespaced && !info->ns.empty()) return not_found();
    const Call call{r, *info, query};
    if (!info->subresource.empty()) {
      if (std::find(kind.subresources.begin(), kind.subresources.end(), info->subresource) ==
          kind.subresources.end())
        return not_found();
      return backend->Write(call);  // status and metrics: the backend's
    }
    if (!kind.Allows(info->verb))
      return StatusResponse(405, "MethodNotAllowed",
                            kind.resource + "." + kind.group + " does not allow " + info->verb);
    const bool read = info->verb == "get" || info->verb == "list" || info->verb == "watch";
    if (read && !backend->cache().synced())
      return StatusResponse(503, "ServiceUnavailable",
                            "the cache of " + kind.resource + " is not synced yet");
    if (info->verb == "get") return Get(*backend, call);
    if (info->verb == "list") return List(*backend, call);
    if (info->verb == "watch") return Watch(*backend, call);
    return backend->Write(call);
  }

  // The kinds never change while serving: every document is built once, at Start, by path.
  void BuildDocuments() {
    documents["/apis"] = GroupList(kinds).dump();
    for (const char* v : {"v2", "v2beta1"})
      discovery[v] = AggregatedDiscovery(kinds, std::string("apidiscovery.k8s.io/") + v).dump();
    std::map<std::string, std::string> hashes;
    for (const std::string& group : Groups(kinds)) {
      const std::string base = "/apis/" + group;
      documents[base] = Group(group).dump();
      documents[base + "/" + kServedVersion] = ResourceList(kinds, group).dump();
      const std::string v3 = OpenApiV3(kinds, group).dump();
      hashes[group] = std::to_string(std::hash<std::string>{}(v3));
      documents["/openapi/v3" + base + "/" + kServedVersion] = v3;
    }
    documents["/openapi/v2"] = OpenApiV2(kinds).dump();
    documents["/openapi/v3"] =
        OpenApiV3Index(kinds, [&](const std::string& group) { return hashes[group]; }).dump();
  }

  Response ServeDocument(const Request& r) {
    const std::string path = r.path == "/apis/" ? "/apis" : r.path;
    if (path == "/apis") {
      const std::string v = DiscoveryVersion(r);
      if (!v.empty()) {
        return {200, discovery.at(v),
                "application/json;g=apidiscovery.k8s.io;v=" + v + ";as=APIGroupDiscoveryList"};
      }
    }
    auto found = documents.find(path);
    if (found == documents.end())
      return StatusResponse(404, "NotFound", "the server could not find the requested resource");
    Response out{200, found->second};
    if (path.rfind("/openapi/v3/", 0) == 0)
      out.headers.emplace_back("Cache-Control", "no-cache, private");
    return out;
  }

  // The namespace and selectors of a list or watch, as one predicate.
  static Result<std::function<bool(const ServedObject&)>> Filter(const RequestInfo& info,
                                                                 const Query& query) {
    auto labels = Selector::ParseLabels(query.Get("labelSelector"));
    if (!labels) return labels.failure();
    auto fields = Selector::ParseFields(query.Get("fieldSelector"));
    if (!fields) return fields.failure();
    return std::function<bool(const ServedObject&)>([ns = info.ns, name = info.name,
                                                     labels = *labels,
                                                     fields = *fields](const ServedObject& o) {
      if (!ns.empty() && o.selectable.ns != ns) return false;
      // A watch on one object (kubectl get -w NAME, kubectl wait) names it in the path.
      if (!name.empty() && o.selectable.name != name) return false;
      return labels.Matches(o.selectable) && fields.Matches(o.selectable);
    });
  }

  Response Get(Backend& b, const Call& call) {
    const std::string key = KeyOf(call.info.ns, call.info.name);
    ServedPtr object = b.Recent(key, b.cache().Get(key));
    if (!object) return b.Miss(call);
    if (!WantsTable(call.request)) return {200, object->text.Text()};
    return JsonResponse(TableOf(b.kind(), {object->Parse()}, call.query.Get("includeObject"),
                                std::to_string(object->resource_version), "",
                                std::chrono::system_clock::now()));
  }

  Response List(Backend& b, const Call& call) {
    auto filter = Filter(call.info, call.query);
    if (!filter) return StatusResponse(400, "BadRequest", filter.error());
    std::string after;
    if (call.query.Has("continue")) {
      auto from = ContinueFrom(call.query.Get("continue"));
      if (!from) return StatusResponse(400, "BadRequest", from.error());
      after = *from;
    }
    auto limit = Number(call.query, "limit");
    if (!limit) return StatusResponse(400, "BadRequest", limit.error());
    const ServedCache::Snapshot snapshot = b.cache().List();
    std::vector<const ServedObject*> chosen;
    std::string next;
    for (const ServedPtr& object : snapshot.objects) {
      if (!after.empty() && object->key() <= after) continue;
      if (!(*filter)(*object)) continue;
      if (*limit > 0 && static_cast<long long>(chosen.size()) == *limit) {
        next = ContinueToken(snapshot.resource_version, chosen.back()->key());
        break;
      }
      chosen.push_back(object.get());
    }
    const std::string version = std::to_string(snapshot.resource_version);
    if (WantsTable(call.request)) {
      std::vector<Json> items;
      for (const ServedObject* object : chosen) items.push_back(object->Parse());
      return JsonResponse(TableOf(b.kind(), items, call.query.Get("includeObject"), version, next,
                                  std::chrono::system_clock::now()));
    }
    // Each object was serialized once when it came in: a list is their concatenation.
    Json metadata = {{"resourceVersion", version}};
    if (!next.empty()) metadata["continue"] = next;
    size_t size = 128;
    for (const ServedObject* object : chosen) size += object->text.size() + 1;
    std::string body;
    body.reserve(size);
    body += Json{{"apiVersion", b.kind().ApiVersion()},
                 {"kind", b.kind().list_kind},
                 {"metadata", metadata}}
                .dump();
    body.pop_back();  // the closing brace
    body += ",\"items\":[";
    for (size_t n = 0; n < chosen.size(); ++n) {
      if (n) body += ',';
      chosen[n]->text.AppendTo(body);
    }
    body += "]}";
    return {200, std::move(body)};
  }

  Response Watch(Backend& b, const Call& call) {
    auto filter = Filter(call.info, call.query);
    if (!filter) return StatusResponse(400, "BadRequest", filter.error());
    const std::string rv = call.query.Get("resourceVersion");
    uint64_t from = 0;
    if (!rv.empty() && rv != "0") {
      from = std::strtoull(rv.c_str(), nullptr, 10);
      if (from == 0 || rv.find_first_not_of("0123456789") != std::string::npos)
        return StatusResponse(400, "BadRequest", "resourceVersion must be a number: " + rv);
    }
    auto timeout_seconds = Number(call.query, "timeoutSeconds");
    if (!timeout_seconds) return StatusResponse(400, "BadRequest", timeout_seconds.error());
    std::chrono::seconds timeout = options.max_watch;
    if (*timeout_seconds > 0) timeout = std::min(timeout, std::chrono::seconds(*timeout_seconds));
    auto stream = std::make_shared<https::ChunkStream>();
    const bool bookmarks = call.query.IsTrue("allowWatchBookmarks");
    const bool table = WantsTable(call.request);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const Kind* kind = &b.kind();
    const std::string include = call.query.Get("includeObject");
    Watcher watcher;
    watcher.wants = *filter;
    watcher.deliver = [stream, bookmarks, table, deadline, kind, include](const WatchEvent& e) {
      if (stream->Done()) return false;
      if (std::chrono::steady_clock::now() > deadline) {
        stream->Close();
        return false;
      }
      if (e.type == "BOOKMARK") {
        if (!bookmarks && !e.initial_events_end) return true;
        Json object = {{"apiVersion", kind->ApiVersion()},
                       {"kind", kind->kind},
                       {"metadata", {{"resourceVersion", std::to_string(e.resource_version)}}}};
        if (e.initial_events_end)
          object["metadata"]["annotations"] = {{"k8s.io/initial-events-end", "true"}};
        stream->Push(Json{{"type", e.type}, {"object", object}}.dump() + "\n");
      } else if (table) {
        Json object =
            TableOf(*kind, {e.object->Parse()}, include, std::to_string(e.resource_version), "",
                    std::chrono::system_clock::now());
        stream->Push(Json{{"type", e.type}, {"object", object}}.dump() + "\n");
      } else {
        // The object's text as it is, without parsing it again.
        std::string line = "{\"object\":";
        e.object->text.AppendTo(line);
        line += ",\"type\":\"" + e.type + "\"}\n";
        stream->Push(std::move(line));
      }
      return true;
    };
    // client-go's watch-list: the state as ADDED events, then a bookmark that says so.
    const bool initial_events = call.query.IsTrue("sendInitialEvents");
    if (initial_events) from = 0;
    auto id = b.cache().Watch(from, std::move(watcher), initial_events);
    if (!id) {
      // As the apiserver does: the watch starts, and its one event says the version is gone.
      stream->Push(
          Json{{"type", "ERROR"}, {"object", StatusOf(410, "Expired", id.error())}}.dump() + "\n");
      stream->Close();
    }
    Response out;
    out.content_type = "application/json";
    out.stream = stream;
    return out;
  }
};

ApiServer::ApiServer(kube::Client& client, ApiOptions options)
    : state_(std::make_shared<State>(client, std::move(options))) {}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Start() {
  State& s = *state_;
  auto proxied = ServedKinds();
  if (!proxied) return proxied.failure();
  const size_t kept = s.options.events_kept;
  for (Kind& kind : *proxied) {
    MetricsHandler metrics = kind.kind == "Instance" ? s.options.instance_metrics : nullptr;
    s.backends.push_back(MakeProxyBackend(s.client, kind, kept, std::move(metrics)));
  }
  s.backends.push_back(FlavorCatalog(s.client, s.options.system_namespace, kept));
  s.backends.push_back(SettingsBackend(s.client, s.options.system_namespace, s.options.settings,
                                       kept));
  if (s.options.helpers) {
    for (auto& b : HelperBackends(s.client, kept)) s.backends.push_back(std::move(b));
  }
  for (auto& b : s.backends) s.kinds.push_back(b->kind());
  s.BuildDocuments();
  for (auto& b : s.backends) b->Start();
  s.RefreshAuthentication();
  s.ticker = std::jthread([state = state_](std::stop_token stop) {
    std::mutex m;
    std::condition_variable_any cv;
    auto last_refresh = std::chrono::steady_clock::now();
    auto last_bookmark = last_refresh;
    while (!stop.stop_requested()) {
      const auto now = std::chrono::steady_clock::now();
      const bool bookmark = now - last_bookmark >= state->options.bookmark_every;
      for (auto& b : state->backends) {
        b->Tick();
        if (bookmark && b->cache().synced()) b->cache().Bookmark();
      }
      if (bookmark) last_bookmark = now;
      if (now - last_refresh > state->options.authentication_refresh) {
        state->RefreshAuthentication();
        last_refresh = now;
      }
      std::unique_lock lock(m);
      cv.wait_for(lock, stop, std::chrono::milliseconds(100), [] { return false; });
    }
  });
  s.started = true;
  s.log->info("serving {} kinds in {}", s.kinds.size(), [&] {
    std::string out;
    for (const std::string& g : Groups(s.kinds)) out += (out.empty() ? "" : ", ") + g + "/v1";
    return out;
  }());
  return Ok{};
}

void ApiServer::Stop() {
  State& s = *state_;
  if (s.ticker.joinable()) {
    s.ticker.request_stop();
    s.ticker.join();
  }
  for (auto& b : s.backends) b->Stop();
}

std::vector<https::Route> ApiServer::Routes() {
  auto serve = [state = state_](const Request& r) { return state->Serve(r); };
  const std::vector<std::string> all = {"GET", "POST", "PUT", "PATCH", "DELETE"};
  return {{"/apis", all, serve, true},
          {"/openapi", {"GET"}, serve, true},
          {"/healthz", {"GET"}, serve},
          {"/livez", {"GET"}, serve},
          {"/readyz", {"GET"}, serve}};
}

bool ApiServer::ready() const { return state_->started && state_->Ready(); }

std::vector<std::string> ApiServer::groups() const { return Groups(state_->kinds); }

Json RenderApiService(const std::string& group, const std::string& service_namespace,
                      const std::string& service, int port, const std::string& ca_bundle,
                      const std::string& certificate) {
  Json spec = {{"group", group},
               {"version", kServedVersion},
               {"groupPriorityMinimum", 100},
               {"versionPriority", 100},
               {"service", {{"namespace", service_namespace}, {"name", service}, {"port", port}}}};
  Json metadata = {{"name", std::string(kServedVersion) + "." + group},
                   {"labels", {{"app.kubernetes.io/part-of", "gpustack-operator"}}}};
  if (!ca_bundle.empty()) {
    spec["caBundle"] = EncodeBase64(ca_bundle);
  } else if (!certificate.empty()) {
    metadata["annotations"] = {
        {"cert-manager.io/inject-ca-from", service_namespace + "/" + certificate}};
  }
  return {{"apiVersion", "apiregistration.k8s.io/v1"},
          {"kind", "APIService"},
          {"metadata", metadata},
          {"spec", spec}};
}

}  // namespace gpustack::api
