#include "host/api/api_server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "host/api/authn.h"
#include "host/api/authz.h"
#include "host/api/cache.h"
#include "host/api/documents.h"
#include "host/api/request.h"
#include "host/api/selectors.h"
#include "host/common/logging.h"
#include "host/common/yaml.h"
#include "host/common/base64.h"
#include "host/kube/informer.h"

namespace gpustack::api {
namespace {

using https::Request;
using https::Response;

Response StatusResponse(int code, const std::string& reason, const std::string& message,
                        const Json& details = Json()) {
  return {code, StatusOf(code, reason, message, details).dump()};
}

Response JsonResponse(const Json& body, int code = 200) { return {code, body.dump()}; }

// What the client accepts: a Table (kubectl get), the aggregated discovery document, or JSON.
bool WantsTable(const Request& r) {
  return r.Header("accept").find("as=Table") != std::string::npos;
}

std::string DiscoveryVersion(const Request& r) {
  // The first apidiscovery type the client lists (kubectl and the aggregator prefer v2).
  const std::string accept = r.Header("accept");
  for (size_t at = 0; at < accept.size();) {
    const size_t comma = accept.find(',', at);
    const std::string type =
        accept.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (type.find("as=APIGroupDiscoveryList") != std::string::npos) {
      if (type.find("v=v2beta1") != std::string::npos) return "v2beta1";
      if (type.find("v=v2") != std::string::npos) return "v2";
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return {};
}

std::string Forbidden(const UserInfo& user, const RequestInfo& info, const std::string& path,
                      const std::string& reason) {
  std::string message;
  if (info.resource_request) {
    message = info.resource + "." + info.group + (info.name.empty() ? "" : " \"" + info.name + "\"") +
              " is forbidden: User \"" + user.name + "\" cannot " + info.verb + " resource \"" +
              info.resource + (info.subresource.empty() ? "" : "/" + info.subresource) +
              "\" in API group \"" + info.group + "\"" +
              (info.ns.empty() ? " at the cluster scope" : " in the namespace \"" + info.ns + "\"");
  } else {
    message = "forbidden: User \"" + user.name + "\" cannot " + info.verb + " path \"" + path + "\"";
  }
  return reason.empty() ? message : message + ": " + reason;
}

// The continue token: where the next page starts, at which version (base64 JSON, opaque).
std::string ContinueToken(uint64_t version, const std::string& after) {
  return EncodeBase64(Json{{"v", version}, {"after", after}}.dump());
}

Result<std::string> ContinueFrom(const std::string& token) {
  auto text = DecodeBase64(token, "continue");
  if (!text) return Error{"invalid continue token", Code::kInvalidArgument};
  Json parsed = Json::parse(*text, nullptr, false);
  if (!parsed.is_object() || !parsed.contains("after") || !parsed["after"].is_string())
    return Error{"invalid continue token", Code::kInvalidArgument};
  return parsed["after"].get<std::string>();
}

}  // namespace

struct ApiServer::State : std::enable_shared_from_this<ApiServer::State> {
  kube::Client& client;
  std::vector<Kind> kinds;
  ApiOptions options;
  std::shared_ptr<spdlog::logger> log = Logger("api");
  Authorizer authorizer;

  struct Served {
    const Kind* kind;
    std::unique_ptr<kube::Informer> informer;
    ServedCache cache;
    std::mutex recent_mutex;
    std::map<std::string, ObjectPtr> recent;  // written through us, maybe not cached yet
    explicit Served(const Kind* k, size_t kept) : kind(k), cache(kept) {}
  };
  std::vector<std::unique_ptr<Served>> served;

  mutable std::mutex auth_mutex;
  std::optional<RequestHeaderConfig> request_header;
  std::string request_header_problem = "not read yet";

  std::jthread ticker;
  std::atomic<bool> started{false};

  State(kube::Client& c, std::vector<Kind> k, ApiOptions o)
      : client(c), kinds(std::move(k)), options(o), authorizer(c) {}

  Served* Find(const std::string& resource) {
    for (auto& s : served)
      if (s->kind->resource == resource) return s.get();
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

  Response Serve(const Request& r) {
    if (r.path == "/healthz" || r.path == "/livez" || r.path == "/readyz") {
      if (r.path == "/readyz" && !Ready()) return {503, "the v1 caches are not synced\n", "text/plain"};
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
      return StatusResponse(403, "Forbidden", Forbidden(*user, *info, r.path, decision->reason),
                            Json{{"group", info->group}, {"kind", info->resource}, {"name", info->name}});
    if (!info->resource_request) return ServeDocument(r);
    if (info->group != kGroup || info->version != kServedVersion)
      return StatusResponse(404, "NotFound", "the server could not find the requested resource");
    Served* s = Find(info->resource);
    if (!s || info->resource == "namespaces")
      return StatusResponse(404, "NotFound", "the server could not find the requested resource");
    const Kind& kind = *s->kind;
    if (!kind.namespaced && !info->ns.empty())
      return StatusResponse(404, "NotFound", kind.resource + " are cluster-scoped");
    if (!info->subresource.empty()) {
      if (std::find(kind.subresources.begin(), kind.subresources.end(), info->subresource) ==
          kind.subresources.end())
        return StatusResponse(404, "NotFound", "the server could not find the requested resource");
      if (info->subresource == "metrics") {
        if (info->verb != "get")
          return StatusResponse(405, "MethodNotAllowed", "metrics can only be read (get)");
        return StatusResponse(503, "ServiceUnavailable", "metrics are not served yet");
      }
      if (info->verb == "get") return Forward(*s, r, *info, query);
      if (info->verb != "update" && info->verb != "patch")
        return StatusResponse(405, "MethodNotAllowed",
                              info->subresource + " takes only get, update and patch");
      return Forward(*s, r, *info, query);
    }
    if (std::find(kind.verbs.begin(), kind.verbs.end(), info->verb) == kind.verbs.end())
      return StatusResponse(405, "MethodNotAllowed",
                            kind.resource + " (" + kGroup + "/" + kServedVersion + ") cannot be " +
                                info->verb + "d here; they are read-only in this API");
    if (info->verb == "get") return Get(*s, r, *info, query);
    if (info->verb == "list") return List(*s, r, *info, query);
    if (info->verb == "watch") return Watch(*s, r, *info, query);
    return Forward(*s, r, *info, query);
  }

  Response ServeDocument(const Request& r) {
    const std::string group_path = std::string("/apis/") + kGroup;
    if (r.path == "/apis" || r.path == "/apis/") {
      const std::string v = DiscoveryVersion(r);
      if (!v.empty()) {
        Response out = JsonResponse(AggregatedDiscovery(kinds, "apidiscovery.k8s.io/" + v));
        out.content_type = "application/json;g=apidiscovery.k8s.io;v=" + v + ";as=APIGroupDiscoveryList";
        return out;
      }
      return JsonResponse(GroupList(kinds));
    }
    if (r.path == group_path) return JsonResponse(Group());
    if (r.path == group_path + "/" + kServedVersion) return JsonResponse(ResourceList(kinds));
    if (r.path == "/openapi/v2") return JsonResponse(OpenApiV2(kinds));
    const Json v3 = OpenApiV3(kinds);
    if (r.path == "/openapi/v3") {
      return JsonResponse(OpenApiV3Index(std::to_string(std::hash<std::string>{}(v3.dump()))));
    }
    if (r.path == "/openapi/v3/apis/" + std::string(kGroup) + "/" + kServedVersion) {
      Response out = JsonResponse(v3);
      out.headers.emplace_back("Cache-Control", "no-cache, private");
      return out;
    }
    return StatusResponse(404, "NotFound", "the server could not find the requested resource");
  }

  // The namespace and selectors of a list or watch, as one predicate.
  Result<std::function<bool(const Json&)>> Filter(const RequestInfo& info, const Query& query) {
    auto labels = Selector::ParseLabels(query.Get("labelSelector"));
    if (!labels) return labels.failure();
    auto fields = Selector::ParseFields(query.Get("fieldSelector"));
    if (!fields) return fields.failure();
    return std::function<bool(const Json&)>(
        [ns = info.ns, labels = *labels, fields = *fields](const Json& object) {
          if (!ns.empty() && StringAtNs(object) != ns) return false;
          return labels.Matches(object) && fields.Matches(object);
        });
  }

  static std::string StringAtNs(const Json& object) {
    auto m = object.find("metadata");
    if (m == object.end() || !m->is_object()) return {};
    return m->value("namespace", "");
  }

  Response Get(Served& s, const Request& r, const RequestInfo& info, const Query& query) {
    const std::string key = info.ns.empty() ? info.name : info.ns + "/" + info.name;
    ObjectPtr object = s.cache.Get(key);
    {
      std::lock_guard lock(s.recent_mutex);
      auto written = s.recent.find(key);
      if (written != s.recent.end()) {
        if (object && VersionOf(*object) >= VersionOf(*written->second)) {
          s.recent.erase(written);  // the cache caught up
        } else {
          object = written->second;
        }
      }
    }
    if (!object) return Forward(s, r, info, query);  // not cached yet, or absent: ask the storage
    if (WantsTable(r)) {
      return JsonResponse(TableOf(*s.kind, {*object}, query.Get("includeObject"),
                                  std::to_string(VersionOf(*object)), "",
                                  std::chrono::system_clock::now()));
    }
    return JsonResponse(*object);
  }

  Response List(Served& s, const Request& r, const RequestInfo& info, const Query& query) {
    auto filter = Filter(info, query);
    if (!filter) return StatusResponse(400, "BadRequest", filter.error());
    std::string after;
    if (query.Has("continue")) {
      auto from = ContinueFrom(query.Get("continue"));
      if (!from) return StatusResponse(400, "BadRequest", from.error());
      after = *from;
    }
    long long limit = 0;
    if (query.Has("limit")) {
      try {
        limit = std::stoll(query.Get("limit"));
      } catch (const std::exception&) {
        return StatusResponse(400, "BadRequest", "limit must be a number");
      }
    }
    const ServedCache::Snapshot snapshot = s.cache.List();
    std::vector<Json> items;
    std::string next;
    for (const ObjectPtr& object : snapshot.objects) {
      if (!after.empty() && KeyOf(*object) <= after) continue;
      if (!(*filter)(*object)) continue;
      if (limit > 0 && static_cast<long long>(items.size()) == limit) {
        next = ContinueToken(snapshot.resource_version, KeyOf(items.back()));
        break;
      }
      items.push_back(*object);
    }
    const std::string version = std::to_string(snapshot.resource_version);
    if (WantsTable(r)) {
      return JsonResponse(TableOf(*s.kind, items, query.Get("includeObject"), version, next,
                                  std::chrono::system_clock::now()));
    }
    Json metadata = {{"resourceVersion", version}};
    if (!next.empty()) metadata["continue"] = next;
    return JsonResponse({{"apiVersion", std::string(kGroup) + "/" + kServedVersion},
                         {"kind", s.kind->list_kind},
                         {"metadata", metadata},
                         {"items", std::move(items)}});
  }

  Response Watch(Served& s, const Request& r, const RequestInfo& info, const Query& query) {
    auto filter = Filter(info, query);
    if (!filter) return StatusResponse(400, "BadRequest", filter.error());
    if (!info.name.empty()) {
      // A watch on one object (kubectl get -w NAME, kubectl wait) is a field selector.
      auto base = *filter;
      const std::string name = info.name;
      *filter = [base, name](const Json& o) {
        return base(o) && o.value("metadata", Json::object()).value("name", "") == name;
      };
    }
    uint64_t from = 0;
    const std::string rv = query.Get("resourceVersion");
    if (!rv.empty()) {
      try {
        from = std::stoull(rv);
      } catch (const std::exception&) {
        return StatusResponse(400, "BadRequest", "resourceVersion must be a number: " + rv);
      }
    }
    std::chrono::seconds timeout = options.max_watch;
    if (query.Has("timeoutSeconds")) {
      try {
        timeout = std::min(timeout, std::chrono::seconds(std::stoll(query.Get("timeoutSeconds"))));
      } catch (const std::exception&) {
        return StatusResponse(400, "BadRequest", "timeoutSeconds must be a number");
      }
    }
    auto stream = std::make_shared<https::ChunkStream>();
    const bool bookmarks = query.IsTrue("allowWatchBookmarks");
    const bool table = WantsTable(r);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const Kind* kind = s.kind;
    const std::string include = query.Get("includeObject");
    Watcher watcher;
    watcher.wants = *filter;
    watcher.deliver = [stream, bookmarks, table, deadline, kind, include](const WatchEvent& e) {
      if (stream->Done()) return false;
      if (std::chrono::steady_clock::now() > deadline) {
        stream->Close();
        return false;
      }
      Json object;
      if (e.type == "BOOKMARK") {
        if (!bookmarks) return true;
        object = {{"apiVersion", std::string(kGroup) + "/" + kServedVersion},
                  {"kind", kind->kind},
                  {"metadata", {{"resourceVersion", std::to_string(e.resource_version)}}}};
      } else if (table) {
        object = TableOf(*kind, {*e.object}, include, std::to_string(e.resource_version), "",
                         std::chrono::system_clock::now());
      } else {
        object = *e.object;
      }
      stream->Push(Json{{"type", e.type}, {"object", object}}.dump() + "\n");
      return true;
    };
    auto id = s.cache.Watch(from, std::move(watcher));
    if (!id) {
      // As the apiserver does: the watch starts, and its first event says the version is gone.
      stream->Push(Json{{"type", "ERROR"},
                        {"object", StatusOf(410, "Expired", id.error())}}.dump() + "\n");
      stream->Close();
    }
    Response out;
    out.content_type = "application/json";
    out.headers.emplace_back("Transfer-Encoding", "chunked");
    out.stream = stream;
    return out;
  }

  // A request the storage answers: writes, and reads of what is not cached.
  Response Forward(Served& s, const Request& r, const RequestInfo& info, const Query& query) {
    kube::HttpRequest out;
    out.method = r.method;
    out.target = info.name.empty() ? kube::CollectionPath(s.kind->storage, info.ns)
                                   : kube::ObjectPath(s.kind->storage, info.ns, info.name,
                                                      info.subresource);
    if (!r.query.empty()) out.target += "?" + r.query;
    const std::string content_type = r.Header("content-type");
    out.content_type = content_type;
    if (!r.body.empty()) {
      auto body = StorageBody(r.method, content_type, r.body);
      if (!body) return StatusResponse(body.failure().http_status ? body.failure().http_status : 400,
                                       body.failure().reason.empty() ? "BadRequest" : body.failure().reason,
                                       body.error());
      out.body = std::move(*body);
      if (content_type.find("apply-patch") != std::string::npos)
        out.content_type = "application/apply-patch+yaml";
    }
    auto answer = client.Send(out);
    if (!answer)
      return StatusResponse(503, "ServiceUnavailable",
                            "the storage of " + s.kind->resource + " did not answer: " + answer.error());
    Json parsed = Json::parse(answer->body, nullptr, false);
    if (parsed.is_discarded()) return {answer->status, answer->body, "application/json"};
    Json served = ToServed(std::move(parsed));
    if (served.value("kind", "") == "Status" && served.contains("message") &&
        served["message"].is_string()) {
      // The storage names its own version ("conflict with kubectl using .../v1alpha1").
      std::string message = served["message"];
      const std::string from = std::string(kGroup) + "/" + kStorageVersion;
      const std::string to = std::string(kGroup) + "/" + kServedVersion;
      for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at))
        message.replace(at, from.size(), to);
      served["message"] = message;
    }
    const bool wrote = r.method != "GET" && answer->status / 100 == 2 &&
                       query.Get("dryRun").empty() && served.value("kind", "") == s.kind->kind;
    if (wrote) {
      std::lock_guard lock(s.recent_mutex);
      s.recent[KeyOf(served)] = std::make_shared<const Json>(served);
      if (s.recent.size() > 10000) s.recent.clear();
    }
    if (answer->status == 200 && r.method == "GET" && WantsTable(r) && served.contains("metadata"))
      return JsonResponse(TableOf(*s.kind, {served}, query.Get("includeObject"),
                                  std::to_string(VersionOf(served)), "",
                                  std::chrono::system_clock::now()));
    return {answer->status, served.dump()};
  }

  // The body in the storage's version. Merge and apply patches and whole objects name their
  // apiVersion; a JSON patch is a list of operations and passes as it is.
  Result<std::string> StorageBody(const std::string& method, const std::string& content_type,
                                  const std::string& body) {
    if (content_type.find("strategic-merge-patch") != std::string::npos) {
      Error e{"strategic merge patch is not supported for " + std::string(kGroup) +
                  " resources: use --type merge or --type json",
              Code::kInvalidArgument};
      e.http_status = 415;
      e.reason = "UnsupportedMediaType";
      return e;
    }
    if (content_type.find("json-patch") != std::string::npos) return body;
    Json parsed;
    if (content_type.find("yaml") != std::string::npos) {
      auto documents = FromYaml(body);
      if (!documents || documents->size() != 1)
        return Error{"the body is not one YAML document" +
                     (documents ? std::string() : ": " + documents.error())};
      parsed = documents->front();
    } else {
      parsed = Json::parse(body, nullptr, false);
      if (parsed.is_discarded()) return Error{"the body is not JSON"};
    }
    if (method != "PATCH" && parsed.is_object()) {
      const std::string v = parsed.value("apiVersion", "");
      const std::string want = std::string(kGroup) + "/" + kServedVersion;
      if (parsed.contains("apiVersion") && v != want && parsed.value("kind", "") != "DeleteOptions")
        return Error{"the object's apiVersion is " + v + ", not " + want};
    }
    return ToStorage(std::move(parsed)).dump();
  }

  bool Ready() const {
    for (const auto& s : served)
      if (!s->cache.synced()) return false;
    return true;
  }
};

ApiServer::ApiServer(kube::Client& client, std::vector<Kind> kinds, ApiOptions options)
    : state_(std::make_shared<State>(client, std::move(kinds), options)) {}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Start() {
  State& s = *state_;
  for (const Kind& kind : s.kinds) {
    auto served = std::make_unique<State::Served>(&kind, s.options.events_kept);
    served->informer = std::make_unique<kube::Informer>(s.client, kind.storage);
    ServedCache* cache = &served->cache;
    served->informer->AddEventHandler(
        {.on_add = [cache](const kube::ObjectPtr& o) {
           cache->Upsert(std::make_shared<const Json>(ToServed(*o)));
         },
         .on_update = [cache](const kube::ObjectPtr&, const kube::ObjectPtr& o) {
           cache->Upsert(std::make_shared<const Json>(ToServed(*o)));
         },
         .on_delete = [cache](const kube::ObjectPtr& o) {
           cache->Remove(std::make_shared<const Json>(ToServed(*o)));
         }});
    s.served.push_back(std::move(served));
  }
  for (auto& served : s.served) served->informer->Start();
  s.RefreshAuthentication();
  s.ticker = std::jthread([state = state_](std::stop_token stop) {
    std::mutex m;
    std::condition_variable_any cv;
    auto last_refresh = std::chrono::steady_clock::now();
    while (!stop.stop_requested()) {
      for (auto& served : state->served) {
        if (!served->cache.synced() && served->informer->HasSynced()) {
          const std::string rv = served->informer->Stats().resource_version;
          served->cache.MarkSynced(std::strtoull(rv.c_str(), nullptr, 10));
        }
        if (served->cache.synced()) {
          const std::string rv = served->informer->Stats().resource_version;
          served->cache.Advance(std::strtoull(rv.c_str(), nullptr, 10));
          served->cache.Bookmark();
        }
      }
      if (std::chrono::steady_clock::now() - last_refresh > state->options.authentication_refresh) {
        state->RefreshAuthentication();
        last_refresh = std::chrono::steady_clock::now();
      }
      std::unique_lock lock(m);
      // Quickly until synced, then at the bookmark period.
      cv.wait_for(lock, stop,
                  state->Ready() ? state->options.bookmark_every : std::chrono::milliseconds(100),
                  [] { return false; });
    }
  });
  s.started = true;
  s.log->info("serving {}/{}: {} kinds", kGroup, kServedVersion, s.kinds.size());
  return Ok{};
}

void ApiServer::Stop() {
  State& s = *state_;
  if (s.ticker.joinable()) {
    s.ticker.request_stop();
    s.ticker.join();
  }
  for (auto& served : s.served) served->informer->Stop();
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

Json RenderApiService(const std::string& service_namespace, const std::string& service, int port,
                      const std::string& ca_bundle, const std::string& certificate) {
  Json spec = {{"group", kGroup},
               {"version", kServedVersion},
               {"groupPriorityMinimum", 100},
               {"versionPriority", 100},
               {"service", {{"namespace", service_namespace}, {"name", service}, {"port", port}}}};
  Json metadata = {{"name", std::string(kServedVersion) + "." + kGroup},
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
