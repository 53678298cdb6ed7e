// The worker-gateway (docs/behaviour.md §11): the member clusters named by a config file, each
// watched through its worker's v1 API (members.h), and fleet-wide views of them served over
// HTTP: the aggregated InstanceTypes (aggregate.h) and Cluster<Kind> lists that name each
// object's cluster. The config file is re-read when it changes: members come and go without a
// restart. A member that is down or slow is marked stale and left out of availability; it never
// holds an answer.
#ifndef GPUSTACK_HOST_GATEWAY_GATEWAY_H_
#define GPUSTACK_HOST_GATEWAY_GATEWAY_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "host/gateway/aggregate.h"
#include "host/gateway/members.h"
#include "host/https/server.h"

namespace gpustack::gateway {

struct GatewayOptions {
  std::filesystem::path config;  // the member config file
  Connection connection{};
  std::chrono::milliseconds config_check_every{1000};
  // PEM CA bundle: when set, /apis/... answers only clients whose certificate it signed (HTTPS;
  // the views hold every member's Instances and SSH keys). The unix socket's mode guards it
  // otherwise.
  std::string client_ca{};
};

class Gateway {
 public:
  explicit Gateway(GatewayOptions options);
  ~Gateway();

  // Reads the config file once (an error when it cannot be used at all), then follows it.
  Status Start();
  void Stop();

  // GET /apis/clusters, /apis/instancetypes[?aggregated=true], /apis/instances,
  // /apis/instancepersistentvolumes, /apis/instancepersistentvolumetypes,
  // /apis/instanceimagepullsecrets, /apis/instancesshpublickeys; `cluster=a,b` narrows a list
  // to those members, `namespace=` a namespaced one; `watch=true` streams the list's changes
  // (one JSON event a line: ADDED for what is there, then ADDED, MODIFIED, DELETED). Plus
  // /livez, /readyz and /metrics.
  std::vector<https::Route> Routes();

  // What the handlers answer (the tests call them directly too).
  Json Clusters() const;
  Json AggregatedInstanceTypes(const std::vector<std::string>& clusters) const;
  Result<Json> ClusterList(const std::string& resource, const std::vector<std::string>& clusters,
                           const std::string& ns) const;
  std::string Metrics() const;

  // A list followed by a watch: what it lists (`query` names it: watches of one query share
  // each pass's list), and how its items are told apart.
  struct Watcher {
    std::shared_ptr<https::ChunkStream> stream;
    std::string query;
    std::function<Result<Json>()> list;
    std::function<std::string(const Json&)> key;
    bool started = false;                       // its first items were sent
    std::map<std::string, std::string> sent{};  // key -> the item as last sent
  };
  // Starts following `list` for `stream`; the first events are its current items.
  void Watch(std::shared_ptr<Watcher> watcher);

 private:
  void FollowConfig(std::stop_token stop);
  bool KubeconfigsChanged() const;
  void BuryRetired();
  void Changed();
  void NotifyWatchers(std::stop_token stop);
  void ApplyConfig(const std::string& text);
  std::vector<std::shared_ptr<Member>> Selected(const std::vector<std::string>& clusters) const;
  // The names in `clusters` the config does not name, comma-separated; empty when none.
  std::string UnknownClusters(const std::vector<std::string>& clusters) const;

  GatewayOptions options_;
  StatusShape shape_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Member>> members_;  // by name
  // Members taken out of the config, stopping: destroyed on the config thread once no request
  // holds them (never on a server or watch thread: a member's end waits for its threads).
  std::vector<std::shared_ptr<Member>> retired_;
  std::map<std::string, std::string> invalid_;              // entry -> why
  std::string config_error_;
  bool config_unreadable_ = false;  // config_error_ is a failed read, not a bad text
  std::string config_text_;
  std::atomic<uint64_t> changes_{0};
  std::atomic<uint64_t> config_loads_{0};
  std::jthread config_thread_;

  std::mutex watch_mutex_;
  std::condition_variable_any watch_wake_;
  std::vector<std::shared_ptr<Watcher>> watchers_;
  bool watchers_added_ = false;
  std::atomic<uint64_t> watch_events_{0};
  std::jthread notifier_;
};

}  // namespace gpustack::gateway

#endif  // GPUSTACK_HOST_GATEWAY_GATEWAY_H_
