#include "host/node/daemon.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <condition_variable>
#include <mutex>
#include <set>

#include "host/common/logging.h"
#include "host/kube/informer.h"
#include "host/node/metrics.h"
#include "host/node/pod_directory.h"
#include "host/node/publisher.h"

namespace gpustack::node {
namespace {

// Sleeps up to `duration`, waking early on stop.
void Nap(std::chrono::milliseconds duration, const std::atomic<bool>& stop) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (!stop && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

Result<int> LockNode(const std::filesystem::path& path) {
  std::error_code ignored;
  std::filesystem::create_directories(path.parent_path(), ignored);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Error{"cannot open " + path.string() + ": " + std::strerror(errno)};
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
    close(fd);
    std::string holder(pid, n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return Error{"another device-manager serve" + (holder.empty() ? "" : " (pid " + holder + ")") +
                     " runs on this node: it holds " + path.string(),
                 Code::kAlreadyExists};
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    Logger("daemon")->warn("cannot write the pid to {}", path.string());
  }
  return fd;
}

Result<int> LockDirectory(const std::filesystem::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error{"cannot open " + path.string() + ": " + std::strerror(errno)};
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return Error{"another device-manager serve already serves the kubelet through " + path.string(),
                 Code::kAlreadyExists};
  }
  return fd;
}

std::map<std::string, std::string> PluginLabelsOf(const Json& node) {
  std::map<std::string, std::string> out;
  if (!node.contains("metadata") || !node["metadata"].contains("labels")) return out;
  for (const auto& [key, value] : node["metadata"]["labels"].items()) {
    if (key.starts_with(runtime::kPluginLabelPrefix) && value.is_string()) {
      out[key] = value.get<std::string>();
    }
  }
  return out;
}

Result<std::map<std::string, std::string>> PluginLabelsOf(kube::Client& client,
                                                          const std::string& node_name) {
  auto node = client.Get(kube::resources::Nodes(), "", node_name);
  if (!node) return node.failure();
  return PluginLabelsOf(*node);
}

int RunDaemon(runtime::NodeRuntime& runtime, kube::Client& client, const DaemonOptions& options,
              const std::atomic<bool>& stop) {
  auto log = Logger("daemon");
  runtime.Discover();
  std::vector<ServedResource> resources;
  for (const runtime::PluginIdentity& id : runtime.RunningIdentities()) {
    for (ServedResource& r : ResourcesOf(id, options.families)) resources.push_back(std::move(r));
  }
  if (resources.empty()) log->warn("no plugin runs on this node: nothing to serve to the kubelet");

  KubePodDirectory pods(client, options.node_name, options.pod_resources_socket);
  Allocator allocator(runtime, pods, options.allocator);
  TokenBoard board(runtime, resources);
  Publisher publisher(client, options.node_name);
  std::atomic<bool> dirty{true};

  // The ledger comes from the Pods' records, never from memory: no Allocate is answered before
  // it is rebuilt, so a restart cannot hand out a card a running Pod holds.
  for (int attempt = 0; !stop; ++attempt) {
    const auto listed_at = std::chrono::steady_clock::now();
    auto listed = pods.PodsOnNode();
    if (listed) {
      const size_t restored = allocator.Restore(*listed);
      allocator.Reconcile(*listed, listed_at);
      log->info("ledger rebuilt from {} pod(s): {} allocation(s) restored", listed->size(),
                restored);
      break;
    }
    log->warn("cannot list the pods on node {} (retrying): {}", options.node_name, listed.error());
    Nap(std::chrono::milliseconds(std::min(5000, 200 << std::min(attempt, 5))), stop);
  }
  if (stop) return 0;
  board.Refresh();

  // Pod changes arrive by watch: a deletion releases at once, a finished Pod gives back what it
  // may; a fresh list on the reconcile period catches anything a watch could have missed.
  std::mutex wake_mutex;
  std::condition_variable wake;
  std::set<std::string> deleted;
  std::atomic<bool> pods_changed{false};
  auto poke = [&] {
    std::lock_guard lock(wake_mutex);
    wake.notify_all();
  };
  kube::InformerOptions informer_options;
  informer_options.field_selector = "spec.nodeName=" + options.node_name;
  kube::Informer informer(client, kube::resources::Pods(), "", informer_options);
  informer.AddEventHandler({.on_add = {},
                            .on_update =
                                [&](const kube::ObjectPtr&, const kube::ObjectPtr&) {
                                  pods_changed = true;
                                  poke();
                                },
                            .on_delete =
                                [&](const kube::ObjectPtr& pod) {
                                  {
                                    std::lock_guard lock(wake_mutex);
                                    deleted.insert((*pod)["metadata"].value("uid", ""));
                                  }
                                  poke();
                                }});
  informer.Start();
  pods.set_informer(&informer);
  // The Node itself, for its plugin labels.
  std::atomic<bool> labels_changed{false};
  kube::InformerOptions node_options;
  node_options.field_selector = "metadata.name=" + options.node_name;
  kube::Informer node_informer(client, kube::resources::Nodes(), "", node_options);
  auto look_at_node = [&](const kube::ObjectPtr& node) {
    if (PluginLabelsOf(*node) == options.plugin_labels) return;
    labels_changed = true;
    poke();
  };
  node_informer.AddEventHandler(
      {.on_add = look_at_node,
       .on_update = [&](const kube::ObjectPtr&,
                        const kube::ObjectPtr& node) { look_at_node(node); },
       .on_delete = {}});
  node_informer.Start();
  allocator.set_on_change([&] {
    board.Refresh();  // cross-mode tokens go Unhealthy at reserve time, not a pass later
    dirty = true;
    poke();
  });

  KubeletFrontEnd front(board, allocator, options.kubelet);

  // The latest sampling round, read by the exporter's thread.
  std::mutex metrics_mutex;
  MetricsInput latest{options.node_name, false, {}, {}};
  auto holders = [&] {
    std::map<std::string, std::pair<std::string, std::string>> names;  // uid -> namespace, name
    for (const kube::ObjectPtr& pod : informer.List()) {
      const Json& m = (*pod)["metadata"];
      names[m.value("uid", "")] = {m.value("namespace", ""), m.value("name", "")};
    }
    std::vector<Holder> out;
    runtime.WithLedger([&](ledger::NodeLedger& ledger) {
      for (const auto& [owner, allocation] : ledger.allocations()) {
        auto name = names.find(owner.pod_uid);
        if (name == names.end()) continue;
        for (const ledger::Charge& c : allocation.charges) {
          out.push_back(
              {name->second.first, name->second.second, owner.pod_uid, c.accelerator_id, c.mode});
        }
      }
    });
    return out;
  };
  Exporter exporter(options.exporter, {[&] {
                                         std::lock_guard lock(metrics_mutex);
                                         return RenderMetrics(latest);
                                       },
                                       [&] {
                                         std::lock_guard lock(metrics_mutex);
                                         return SnapshotJson(latest).dump();
                                       },
                                       [&] { return front.registered_generations() > 0; }});
  if (options.serve_https) {
    // Bad input (a certificate that does not load, a port in use) stops the daemon before it
    // registers anything: a node without its metrics would look healthy and not be.
    if (Status started = exporter.Start(); !started) {
      log->error("{}", started.error());
      node_informer.Stop();
      informer.Stop();
      return 2;
    }
    log->info("serving /metrics and /monitor/snapshot on https://{}:{}", options.exporter.address,
              exporter.port());
  }
  front.Start();
  runtime.StartHealthLoop(options.health_poll, [&] {
    dirty = true;
    poke();
  });
  int status = 0;

  auto next_discovery = std::chrono::steady_clock::now() + options.discover_period;
  auto next_reconcile = std::chrono::steady_clock::now() + options.reconcile_period;
  auto next_sample = std::chrono::steady_clock::now();
  while (!stop) {
    std::set<std::string> gone;
    {
      std::unique_lock lock(wake_mutex);
      // A signal cannot notify a condition variable: stop is looked at once a second.
      const auto until = std::min({next_discovery, next_reconcile, next_sample,
                                   std::chrono::steady_clock::now() + std::chrono::seconds(1)});
      wake.wait_until(lock, until, [&] {
        return stop || dirty || pods_changed || labels_changed || !deleted.empty();
      });
      gone.swap(deleted);
    }
    if (stop) break;
    if (labels_changed) {
      log->warn(
          "the plugins.gpustack.ai/ labels of node {} changed: stopping, to start again "
          "with them (allocations are rebuilt from the Pods' records)",
          options.node_name);
      status = kPluginLabelsChanged;
      break;
    }
    allocator.ReleaseDeleted(gone);
    if (pods_changed.exchange(false)) {
      std::vector<Json> cached;
      for (const kube::ObjectPtr& pod : informer.List()) cached.push_back(*pod);
      allocator.Reconcile(cached, std::nullopt);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_discovery) {
      runtime.Discover();
      dirty = true;
      next_discovery = now + options.discover_period;
    }
    if (now >= next_reconcile) {
      const auto listed_at = std::chrono::steady_clock::now();
      if (auto listed = pods.PodsOnNode()) {
        allocator.Reconcile(*listed, listed_at);
      } else {
        log->warn("cannot list the pods on node {}: {}", options.node_name, listed.error());
      }
      next_reconcile = now + options.reconcile_period;
    }
    if (now >= next_sample) {
      // A failed round publishes only its verdict; a previous round is never carried forward.
      MetricsInput input{options.node_name, true, runtime.Sample(false), holders()};
      std::lock_guard lock(metrics_mutex);
      latest = std::move(input);
      next_sample = now + options.monitor_period;
    }
    if (dirty.exchange(false)) {
      board.Refresh();
      const runtime::NodeReport report = runtime.Report();
      const ledger::DevicesStatus status =
          runtime.WithLedger([](ledger::NodeLedger& l) { return l.ToStatus(); });
      if (Status published = publisher.Publish(report, status); !published) {
        log->warn("{} (retrying in a second)", published.error());
        // Retried on the next wake, at most a second away.
        next_reconcile = std::min(next_reconcile, now + std::chrono::seconds(1));
        dirty = true;
        std::unique_lock lock(wake_mutex);
        wake.wait_for(lock, std::chrono::seconds(1), [&] { return bool(stop); });
      }
    }
  }
  pods.set_informer(nullptr);
  node_informer.Stop();
  informer.Stop();
  exporter.Stop();
  log->info("stopping: unregistering from the kubelet");
  runtime.StopHealthLoop();
  board.Close();
  front.Stop();
  return status;
}

}  // namespace gpustack::node
