#include "host/gateway/members.h"

#include <set>

#include "host/common/json_path.h"
#include "host/common/logging.h"
#include "host/common/process_stop.h"
#include "host/common/yaml.h"
#include "host/kube/resource.h"

namespace gpustack::gateway {
namespace {

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

std::string Now() { return kube::FormatTime(std::chrono::system_clock::now()); }

}  // namespace

Result<MembersConfig> ParseMembersConfig(const std::string& text,
                                         const std::filesystem::path& base_dir, ConnMode mode) {
  auto documents = FromYaml(text);
  if (!documents) return documents.failure().WithContext("the member config: ");
  if (documents->size() != 1 || !documents->front().is_object())
    return Error{"the member config must be one YAML object with a `clusters` list"};
  const Json& clusters = documents->front().value("clusters", Json());
  if (!clusters.is_array()) return Error{"the member config has no `clusters` list"};
  MembersConfig config;
  std::set<std::string> seen;
  for (size_t i = 0; i < clusters.size(); ++i) {
    const Json& entry = clusters[i];
    const std::string label = entry.is_object() && entry.value("name", Json()).is_string()
                                  ? entry["name"].get<std::string>()
                                  : "#" + std::to_string(i);
    auto invalid = [&](const std::string& why) { config.invalid[label] = why; };
    if (!entry.is_object()) {
      invalid("an entry must be an object with a name");
      continue;
    }
    MemberSpec spec;
    spec.name = StringAt(entry, {"name"});
    if (!IsDnsLabel(spec.name)) {
      invalid("the name must be a DNS label (lower-case letters, digits and '-', at most 63)");
      continue;
    }
    if (!seen.insert(spec.name).second) {
      config.invalid[spec.name + "#" + std::to_string(i)] =
          "the name " + spec.name + " is used by an earlier entry, which is the one served";
      continue;
    }
    spec.context = StringAt(entry, {"context"});
    spec.token = StringAt(entry, {"token"});
    const std::string kubeconfig = StringAt(entry, {"kubeconfig"});
    if (!kubeconfig.empty()) {
      spec.kubeconfig = std::filesystem::path(kubeconfig).is_absolute()
                            ? std::filesystem::path(kubeconfig)
                            : base_dir / kubeconfig;
    }
    if (mode == ConnMode::kLoopback && spec.kubeconfig.empty()) {
      invalid("loopback mode needs a `kubeconfig` for each cluster");
      continue;
    }
    if (mode == ConnMode::kGpustackApi && spec.token.empty()) {
      invalid("gpustack-api mode needs a `token` for each cluster");
      continue;
    }
    config.members.push_back(std::move(spec));
  }
  return config;
}

Result<kube::ClientConfig> MemberClientConfig(const MemberSpec& spec,
                                              const Connection& connection) {
  if (connection.mode == ConnMode::kLoopback) {
    auto loaded = kube::LoadKubeconfig({spec.kubeconfig}, spec.context);
    if (!loaded)
      return loaded.failure().WithContext("kubeconfig " + spec.kubeconfig.string() + ": ");
    return loaded;
  }
  kube::ClientConfig config;
  const std::string url = "https://" + connection.gpustack_api_host + ":" +
                          std::to_string(connection.gpustack_api_port) + "/v2/clusters/" +
                          spec.name + "/proxy";
  if (Status parsed = kube::ParseServerUrl(url, config); !parsed) return parsed.failure();
  config.token = spec.token;
  config.source = "gpustack-api " + url;
  return config;
}

const std::vector<MemberKind>& MemberKinds() {
  static const std::vector<MemberKind> kinds = {
      {"instancetypes", "InstanceType", false},
      {"instances", "Instance", true},
      {"instancepersistentvolumes", "InstancePersistentVolume", true},
      {"instancepersistentvolumetypes", "InstancePersistentVolumeType", false},
      {"instanceimagepullsecrets", "InstanceImagePullSecret", true},
      {"instancesshpublickeys", "InstanceSSHPublicKey", true}};
  return kinds;
}

Json MemberState::ToJson() const {
  Json counts = Json::object();
  for (const auto& [resource, n] : objects) counts[resource] = n;
  return {
      {"name", name}, {"state", state}, {"since", since}, {"reason", reason}, {"objects", counts}};
}

Member::Member(MemberSpec spec, Connection connection, std::function<void()> on_change)
    : spec_(std::move(spec)),
      connection_(connection),
      on_change_(std::move(on_change)),
      since_(Now()) {
  thread_ = std::jthread([this](std::stop_token stop) {
    NameThisThread("member-" + spec_.name.substr(0, 8));
    Run(stop);
  });
}

void Member::RequestStop() {
  thread_.request_stop();
  wake_.notify_all();
  std::lock_guard lock(mutex_);
  for (auto& [resource, informer] : informers_) informer->RequestStop();
}

Member::~Member() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
  for (auto& [resource, informer] : informers_) informer->Stop();
}

void Member::SetState(std::string state, std::string reason) {
  bool changed = false;
  {
    std::lock_guard lock(mutex_);
    if (state != state_) {
      state_ = std::move(state);
      since_ = Now();
      changed = true;
      Logger("gateway")->info("cluster {}: {}{}", spec_.name, state_,
                              reason.empty() ? "" : " (" + reason + ")");
    }
    reason_ = std::move(reason);
  }
  if (changed) on_change_();
}

void Member::Run(std::stop_token stop) {
  auto config = MemberClientConfig(spec_, connection_);
  if (!config) return SetState("Invalid", config.error());
  auto client = kube::Client::Create(*config, {.qps = 50,
                                               .burst = 100,
                                               .timeout = connection_.request_timeout,
                                               .user_agent = "gpustack-operator-worker-gateway"});
  if (!client) return SetState("Invalid", client.error());
  client_ = std::move(*client);
  for (const MemberKind& k : MemberKinds()) {
    if (stop.stop_requested()) return;
    kube::InformerOptions options;
    options.max_backoff = std::chrono::milliseconds(5000);  // back soon after an outage
    options.transform = [](Json& object) {
      if (auto metadata = object.find("metadata");
          metadata != object.end() && metadata->is_object())
        metadata->erase("managedFields");
    };
    auto informer = std::make_unique<kube::Informer>(
        *client_, kube::ResourceType{"worker.gpustack.ai", "v1", k.resource, k.namespaced}, "",
        options);
    auto changed = [this](const kube::ObjectPtr&) { on_change_(); };
    informer->AddEventHandler(
        {.on_add = changed,
         .on_update = [this](const kube::ObjectPtr&, const kube::ObjectPtr&) { on_change_(); },
         .on_delete = changed});
    informer->Start();
    std::lock_guard lock(mutex_);
    informers_[k.resource] = std::move(informer);
  }
  // The member's v1 API answers (through its apiserver's aggregator) within the readiness
  // timeout, or its figures stop counting.
  while (!stop.stop_requested()) {
    auto probe = client_->Request("GET", "/apis/worker.gpustack.ai/v1", nullptr, "application/json",
                                  /*retry=*/false, connection_.readiness_timeout);
    bool synced = true;
    for (const auto& [resource, informer] : informers_) synced = synced && informer->HasSynced();
    std::string state;
    {
      std::lock_guard lock(mutex_);
      state = state_;
    }
    if (!probe) {
      SetState(state == "Ready" || state == "Stale" ? "Stale" : "Connecting", probe.error());
    } else if (!synced) {
      SetState(state == "Stale" ? "Stale" : "Connecting", "waiting for the first lists");
    } else {
      SetState("Ready", "");
    }
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, stop, connection_.probe_every, [] { return false; });
  }
}

std::vector<kube::ObjectPtr> Member::Objects(const std::string& resource) const {
  std::lock_guard lock(mutex_);
  auto it = informers_.find(resource);
  return it == informers_.end() ? std::vector<kube::ObjectPtr>{} : it->second->List();
}

Freshness Member::freshness() const {
  std::lock_guard lock(mutex_);
  if (state_ == "Ready") return {};
  return {true, since_, state_ + (reason_.empty() ? "" : ": " + reason_)};
}

MemberState Member::state() const {
  MemberState s;
  std::lock_guard lock(mutex_);
  s.name = spec_.name;
  s.state = state_;
  s.since = since_;
  s.reason = reason_;
  for (const auto& [resource, informer] : informers_) s.objects[resource] = informer->Size();
  return s;
}

}  // namespace gpustack::gateway
