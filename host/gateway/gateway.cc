#include "host/gateway/gateway.h"

#include <algorithm>
#include <sstream>

#include "host/api/request.h"
#include "host/common/files.h"
#include "host/common/json_path.h"
#include "host/common/logging.h"
#include "host/common/process_stop.h"

namespace gpustack::gateway {
namespace {

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

https::Response Answer(const Json& body, int status = 200) {
  return {status, body.dump(), "application/json"};
}

https::Response Refusal(int status, const std::string& message) {
  return Answer({{"error", message}}, status);
}

// The member config and the kubeconfigs are bounded regular files: a FIFO or a device planted at
// the path must not hang or flood the config thread.
constexpr size_t kMaxConfigBytes = 1 << 20;

Result<std::string> ReadConfigFile(const std::filesystem::path& path, const char* what) {
  return ReadSmallFile(path, kMaxConfigBytes, what);
}

}  // namespace

Gateway::Gateway(GatewayOptions options) : options_(std::move(options)) {}

Gateway::~Gateway() { Stop(); }

Status Gateway::Start() {
  auto shape = InstanceTypeStatusShape();
  if (!shape) return shape.failure();
  shape_ = std::move(*shape);
  auto text = ReadConfigFile(options_.config, "the member config");
  if (!text) return text.failure();
  auto parsed = ParseMembersConfig(*text, options_.config.parent_path(), options_.connection.mode);
  if (!parsed) return parsed.failure().WithContext(options_.config.string() + ": ");
  ApplyConfig(*text);
  notifier_ = std::jthread([this](std::stop_token stop) {
    NameThisThread("gateway-watch");
    NotifyWatchers(stop);
  });
  config_thread_ = std::jthread([this](std::stop_token stop) {
    NameThisThread("gateway-config");
    FollowConfig(stop);
  });
  return Ok{};
}

void Gateway::Stop() {
  if (config_thread_.joinable()) {
    config_thread_.request_stop();
    config_thread_.join();
  }
  if (notifier_.joinable()) {
    notifier_.request_stop();
    notifier_.join();
  }
  {
    std::lock_guard lock(watch_mutex_);
    for (const auto& w : watchers_) w->stream->Close();
    watchers_.clear();
  }
  std::map<std::string, std::shared_ptr<Member>> members;
  std::vector<std::shared_ptr<Member>> retired;
  {
    std::lock_guard lock(mutex_);
    members.swap(members_);
    retired.swap(retired_);
  }
  // Every member asked first, then waited for: the slowest sets the time, not their sum.
  for (auto& [name, member] : members) member->RequestStop();
  members.clear();  // outside the lock
  retired.clear();
}

void Gateway::FollowConfig(std::stop_token stop) {
  // Read again every period and compared whole, the members' kubeconfigs too: a Secret mounted
  // in a Pod changes by a symlink swap that no timestamp of the file's own shows.
  while (SleepUntil(std::chrono::steady_clock::now() + options_.config_check_every, stop)) {
    BuryRetired();
    auto text = ReadConfigFile(options_.config, "the member config");
    bool same = false;
    {
      std::lock_guard lock(mutex_);
      if (!text) {
        if (config_error_ != text.error())
          Logger("gateway")->warn("{}; keeping the members", text.error());
        config_error_ = text.error();
        config_unreadable_ = true;
        continue;
      }
      same = *text == config_text_;
      // Readable again and unchanged: what was served all along is what the file says.
      if (same && config_unreadable_) config_error_.clear();
      config_unreadable_ = false;
    }
    if (!same || KubeconfigsChanged()) ApplyConfig(*text);
  }
}

bool Gateway::KubeconfigsChanged() const {
  std::vector<MemberSpec> specs;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, member] : members_) specs.push_back(member->spec());
  }
  for (const MemberSpec& spec : specs) {
    if (spec.kubeconfig.empty()) continue;
    auto now = ReadConfigFile(spec.kubeconfig, "the kubeconfig");
    if ((now ? *now : std::string()) != spec.kubeconfig_text) return true;
  }
  return false;
}

void Gateway::BuryRetired() {
  std::vector<std::shared_ptr<Member>> done;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(retired_, [&](std::shared_ptr<Member>& m) {
      if (m.use_count() > 1) return false;  // a request or a watch pass still reads it
      done.push_back(std::move(m));
      return true;
    });
  }
  done.clear();  // outside the lock: waits for the members' threads
}

void Gateway::ApplyConfig(const std::string& text) {
  auto log = Logger("gateway");
  auto parsed = ParseMembersConfig(text, options_.config.parent_path(), options_.connection.mode);
  {
    std::lock_guard lock(mutex_);
    config_text_ = text;
    ++config_loads_;
    if (!parsed) {
      // The file as a whole is unusable (a half-written edit): what is served stays.
      config_error_ = parsed.error();
      log->warn("{}: {}; keeping the members", options_.config.string(), parsed.error());
      return;
    }
    config_error_.clear();
    invalid_ = parsed->invalid;
    for (const auto& [entry, why] : invalid_)
      log->warn("{}: cluster {} is left out: {}", options_.config.string(), entry, why);
    std::map<std::string, std::shared_ptr<Member>> next;
    for (MemberSpec& spec : parsed->members) {
      if (!spec.kubeconfig.empty()) {
        auto kubeconfig = ReadConfigFile(spec.kubeconfig, "the kubeconfig");
        spec.kubeconfig_text = kubeconfig ? *kubeconfig : std::string();
      }
      auto it = members_.find(spec.name);
      if (it != members_.end() && it->second->spec() == spec) {
        next[spec.name] = it->second;
        continue;
      }
      log->info("cluster {}: {}", spec.name, it == members_.end() ? "added" : "changed");
      next[spec.name] = std::make_shared<Member>(spec, options_.connection, [this] { Changed(); });
    }
    for (auto& [name, member] : members_) {
      auto kept = next.find(name);
      if (kept == next.end() || kept->second != member) {
        if (kept == next.end()) log->info("cluster {}: removed", name);
        member->RequestStop();
        retired_.push_back(member);
      }
    }
    members_.swap(next);
  }
  Changed();
}

void Gateway::Changed() {
  {
    // Under the notifier's mutex: a change between its look at the counter and its wait would
    // otherwise be missed until the next one.
    std::lock_guard lock(watch_mutex_);
    ++changes_;
  }
  watch_wake_.notify_all();
}

void Gateway::Watch(std::shared_ptr<Watcher> watcher) {
  {
    std::lock_guard lock(watch_mutex_);
    watchers_.push_back(std::move(watcher));
    watchers_added_ = true;
  }
  watch_wake_.notify_all();
}

// One thread tells every watch what changed: after a member's event (a burst is taken as one,
// 20 ms later) each query's list is made once and compared with what each of its watches was
// sent. A new watch alone gets its first items without the others being looked at.
void Gateway::NotifyWatchers(std::stop_token stop) {
  uint64_t seen = 0;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lock(watch_mutex_);
      watch_wake_.wait(lock, stop, [&] { return watchers_added_ || changes_ != seen; });
      if (stop.stop_requested()) return;
    }
    if (!SleepUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(20), stop)) return;
    std::vector<std::shared_ptr<Watcher>> watchers;
    bool changed;
    {
      std::lock_guard lock(watch_mutex_);
      changed = changes_ != seen;
      seen = changes_;
      watchers_added_ = false;
      std::erase_if(watchers_, [](const auto& w) { return w->stream->Done(); });
      watchers = watchers_;
    }
    std::map<std::string, Result<Json>> lists;  // by query, made once a pass
    for (const auto& w : watchers) {
      if (!changed && w->started) continue;
      auto cached = lists.find(w->query);
      if (cached == lists.end()) cached = lists.emplace(w->query, w->list()).first;
      if (!cached->second) continue;
      w->started = true;
      std::map<std::string, std::string> now;
      for (const Json& item : (*cached->second)["items"]) {
        std::string text = item.dump();
        const std::string key = w->key(item);
        auto before = w->sent.find(key);
        if (before == w->sent.end() || before->second != text) {
          const char* type = before == w->sent.end() ? "ADDED" : "MODIFIED";
          w->stream->Push("{\"type\":\"" + std::string(type) + "\",\"object\":" + text + "}\n");
          ++watch_events_;
        }
        now.emplace(key, std::move(text));
      }
      for (const auto& [key, text] : w->sent) {
        if (now.contains(key)) continue;
        w->stream->Push("{\"type\":\"DELETED\",\"object\":" + text + "}\n");
        ++watch_events_;
      }
      w->sent = std::move(now);
    }
  }
}

std::string Gateway::UnknownClusters(const std::vector<std::string>& clusters) const {
  std::string unknown;
  std::lock_guard lock(mutex_);
  for (const std::string& c : clusters)
    if (!members_.contains(c) && !invalid_.contains(c))
      unknown += (unknown.empty() ? "" : ", ") + c;
  return unknown;
}

std::vector<std::shared_ptr<Member>> Gateway::Selected(
    const std::vector<std::string>& clusters) const {
  std::vector<std::shared_ptr<Member>> out;
  std::lock_guard lock(mutex_);
  for (const auto& [name, member] : members_)
    if (clusters.empty() || std::find(clusters.begin(), clusters.end(), name) != clusters.end())
      out.push_back(member);
  return out;
}

Json Gateway::Clusters() const {
  Json items = Json::array();
  std::map<std::string, std::string> invalid;
  std::string config_error;
  for (const auto& member : Selected({})) items.push_back(member->state().ToJson());
  {
    std::lock_guard lock(mutex_);
    invalid = invalid_;
    config_error = config_error_;
  }
  for (const auto& [entry, why] : invalid)
    items.push_back({{"name", entry}, {"state", "Invalid"}, {"reason", why}});
  Json out = {{"items", items}};
  if (!config_error.empty()) out["configError"] = config_error;
  return out;
}

Json Gateway::AggregatedInstanceTypes(const std::vector<std::string>& clusters) const {
  std::vector<Candidate> candidates;
  for (const auto& member : Selected(clusters)) {
    const Freshness freshness = member->freshness();
    for (const kube::ObjectPtr& type : member->Objects("instancetypes"))
      candidates.push_back({member->spec().name, type, freshness});
  }
  Json items = Json::array();
  for (Json& item : AggregateInstanceTypes(candidates, shape_)) items.push_back(std::move(item));
  return {{"items", items}};
}

Result<Json> Gateway::ClusterList(const std::string& resource,
                                  const std::vector<std::string>& clusters,
                                  const std::string& ns) const {
  const MemberKind* kind = nullptr;
  for (const MemberKind& k : MemberKinds())
    if (k.resource == resource) kind = &k;
  if (!kind) return Error{"no such list: " + resource};
  Json items = Json::array();
  for (const auto& member : Selected(clusters)) {
    auto objects = member->Objects(resource);
    std::sort(objects.begin(), objects.end(), [](const auto& a, const auto& b) {
      return std::pair(StringAt(*a, {"metadata", "namespace"}),
                       StringAt(*a, {"metadata", "name"})) <
             std::pair(StringAt(*b, {"metadata", "namespace"}), StringAt(*b, {"metadata", "name"}));
    });
    for (const kube::ObjectPtr& object : objects) {
      if (!ns.empty() && StringAt(*object, {"metadata", "namespace"}) != ns) continue;
      Json wrapped = *object;
      wrapped["cluster"] = member->spec().name;
      items.push_back(std::move(wrapped));
    }
  }
  return Json{{"kind", "Cluster" + kind->kind + "List"}, {"items", std::move(items)}};
}

std::string Gateway::Metrics() const {
  std::string out =
      "# HELP gpustack_gateway_member_ready Whether a member cluster's figures count (1) or it "
      "is stale, connecting or invalid (0).\n# TYPE gpustack_gateway_member_ready gauge\n";
  for (const auto& member : Selected({})) {
    const MemberState s = member->state();
    out += "gpustack_gateway_member_ready{cluster=\"" + s.name + "\",state=\"" + s.state + "\"} " +
           (s.state == "Ready" ? "1" : "0") + "\n";
  }
  out +=
      "# HELP gpustack_gateway_changes_total Member events and state changes seen.\n"
      "# TYPE gpustack_gateway_changes_total counter\ngpustack_gateway_changes_total " +
      std::to_string(changes_.load()) + "\n";
  out +=
      "# HELP gpustack_gateway_watch_events_total Events sent to the gateway's watchers.\n"
      "# TYPE gpustack_gateway_watch_events_total counter\ngpustack_gateway_watch_events_total " +
      std::to_string(watch_events_.load()) + "\n";
  out +=
      "# HELP gpustack_gateway_config_loads_total Times the member config was read anew.\n"
      "# TYPE gpustack_gateway_config_loads_total counter\ngpustack_gateway_config_loads_total " +
      std::to_string(config_loads_.load()) + "\n";
  return out;
}

std::vector<https::Route> Gateway::Routes() {
  const std::vector<std::string> get = {"GET"};
  std::vector<https::Route> routes =
      https::HealthRoutes({.metrics = [this] { return Metrics(); },
                           .ready =
                               [this] {
                                 std::lock_guard lock(mutex_);
                                 return config_loads_ > 0;
                               },
                           .not_ready = "the member config was not read yet"});
  routes.push_back(
      {"/apis/clusters", get, [this](const https::Request&) { return Answer(Clusters()); }});
  for (const MemberKind& k : MemberKinds()) {
    routes.push_back({"/apis/" + k.resource, get, [this, k](const https::Request& request) {
                        const api::Query query = api::Query::Parse(request.query);
                        const std::vector<std::string> clusters = SplitCommas(query.Get("cluster"));
                        if (!k.namespaced && query.Has("namespace"))
                          return Refusal(400, k.resource + " are not namespaced");
                        if (query.Has("aggregated") && k.resource != "instancetypes")
                          return Refusal(400, "only instancetypes are aggregated");
                        if (std::string unknown = UnknownClusters(clusters); !unknown.empty())
                          return Refusal(404, "no such member cluster: " + unknown);
                        const bool aggregate =
                            k.resource == "instancetypes" && query.IsTrue("aggregated");
                        const std::string ns = query.Get("namespace");
                        std::function<Result<Json>()> list = [this, aggregate, k, clusters, ns] {
                          if (aggregate) return Result<Json>(AggregatedInstanceTypes(clusters));
                          return ClusterList(k.resource, clusters, ns);
                        };
                        if (!query.IsTrue("watch")) {
                          auto answer = list();
                          return answer ? Answer(*answer) : Refusal(404, answer.error());
                        }
                        auto watcher = std::make_shared<Watcher>(
                            Watcher{std::make_shared<https::ChunkStream>(),
                                    k.resource + (aggregate ? "?aggregated" : "") +
                                        "&cluster=" + query.Get("cluster") + "&namespace=" + ns,
                                    std::move(list), [aggregate](const Json& item) {
                                      if (aggregate) return item.value("name", "");
                                      return item.value("cluster", "") + "/" +
                                             StringAt(item, {"metadata", "namespace"}) + "/" +
                                             StringAt(item, {"metadata", "name"});
                                    }});
                        https::Response response;
                        response.stream = watcher->stream;
                        Watch(std::move(watcher));
                        return response;
                      }});
  }
  // Everything under /apis is for authenticated clients only when a client CA is set.
  if (!options_.client_ca.empty()) {
    for (https::Route& route : routes) {
      if (route.path.rfind("/apis/", 0) != 0) continue;
      route.handler = [ca = options_.client_ca,
                       inner = std::move(route.handler)](const https::Request& request) {
        auto who = https::VerifyClientCertificate(request.peer_certificates, ca);
        if (!who)
          return Refusal(
              401, "a client certificate signed by --client-ca-file is required: " + who.error());
        return inner(request);
      };
    }
  }
  return routes;
}

}  // namespace gpustack::gateway
