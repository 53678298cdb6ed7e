#include "host/node/daemon.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stop_token>

#include "host/common/files.h"
#include "host/common/json_path.h"
#include "host/common/logging.h"
#include "host/common/own_code.h"
#include "host/common/process_stop.h"
#include "host/dra/slices.h"
#include "host/kube/informer.h"
#include "host/node/metrics.h"
#include "host/node/pod_directory.h"
#include "host/node/publisher.h"
#include "host/usage/cgroup.h"

namespace gpustack::node {
namespace {

// The Pod a host process runs in, from <proc_root>/<pid>/cgroup.
Result<std::string> PodOfPid(const std::filesystem::path& proc_root, uint32_t pid) {
  auto text = ReadSmallFile(proc_root / std::to_string(pid) / "cgroup", 64 << 10, "cgroup file");
  if (!text) {
    Error gone = text.failure();
    if (gone.code == Code::kNotFound) gone.reason = usage::kExited;
    return gone;
  }
  auto ref = usage::ContainerOfCgroup(*text);
  if (!ref) return ref.failure();
  return ref->pod_uid;
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

namespace {

// How long the watches, the DRA driver and the loop (its first sample) wait for the device
// plugin's registration before they start anyway (a kubelet that is not up yet).
constexpr auto kRegistrationHeadStart = std::chrono::seconds(1);

// The daemon's jobs around one loop: it rebuilds the ledger from the Pods' records, watches its
// Pods and Node, serves the kubelet and the exporter, and each turn of the loop releases what
// deleted or finished Pods held, re-discovers, samples and publishes what changed.
class Daemon {
 public:
  Daemon(runtime::NodeRuntime& runtime, kube::Client& client, const DaemonOptions& options,
         std::stop_token stop)
      : runtime_(runtime),
        client_(client),
        options_(options),
        stop_(stop),
        log_(Logger("daemon")),
        pods_(client, options.node_name, options.pod_resources_socket),
        enforcement_(options.enforcement),
        injector_(options.injection, options.engine),
        allocator_(runtime, pods_, options.allocator),
        board_(runtime, ServedResources()),
        publisher_(client, options.node_name) {}

  ~Daemon() {
    StopWatches();
    if (exporter_) exporter_->Stop();
  }

  int Run() {
    allocator_.set_enforcement(&enforcement_);
    allocator_.set_injector(&injector_);
    enforcement_.Prepare(runtime_.Report().plugins);
    if (!RebuildLedger()) return 0;
    std::unique_ptr<DraFrontEnd> dra;
    if (options_.dra) {
      dra = std::make_unique<DraFrontEnd>(
          runtime_, allocator_,
          [this](const std::string& ns, const std::string& name) {
            return client_.Get(kube::resources::ResourceClaims(), ns, name);
          },
          options_.node_name, options_.dra_options);
      // Before either front end serves: a claim's card must not go to a Pod meanwhile.
      auto restored = dra->Restore();
      if (!restored) {
        log_->error("{}", restored.error());
        StopWatches();
        return 2;
      }
      log_->info("{} prepared ResourceClaim(s) restored", *restored);
    }
    board_.Refresh();
    allocator_.set_on_change([this] {
      board_.Refresh();  // cross-mode tokens go Unhealthy at reserve time, not a pass later
      dirty_ = true;
      Poke();
    });
    KubeletFrontEnd front(board_, allocator_, options_.kubelet);
    front_ = &front;
    if (Status started = StartExporter(); !started) {
      log_->error("{}", started.error());
      StopWatches();
      return 2;
    }
    front.Start();
    // What registration does not need waits for it (or for a kubelet that is late): on a small
    // node the watches' first lists and the first sample took the CPU the kubelet's dial-backs
    // needed, and doubled exec → registered (docs/footprint.md). The Pod watch starting later
    // loses nothing: the ledger is rebuilt already, and Allocate lists the Pods itself until the
    // watch has synced.
    front.WaitUntilRegistered(std::chrono::steady_clock::now() + kRegistrationHeadStart, stop_);
    WatchPods();
    WatchNode();
    if (dra) {
      if (Status started = dra->Start(); !started) {
        log_->error("{}", started.error());
        StopWatches();
        return 2;
      }
      dra_ = dra.get();
    }
    runtime_.StartHealthLoop(options_.health_poll, [this] {
      dirty_ = true;
      Poke();
    });
    ReleaseStartupCode();
    const int status = Loop();
    StopWatches();
    if (exporter_) exporter_->Stop();
    front_ = nullptr;
    dra_ = nullptr;
    log_->info("stopping: unregistering from the kubelet");
    if (dra) dra->Stop();
    runtime_.StopHealthLoop();
    front.Stop();
    return status;
  }

 private:
  std::vector<ServedResource> ServedResources() {
    std::vector<ServedResource> resources;
    for (const runtime::PluginIdentity& id : runtime_.RunningIdentities()) {
      for (ServedResource& r : ResourcesOf(id, options_.modes)) resources.push_back(std::move(r));
    }
    if (resources.empty())
      log_->warn("no plugin runs on this node: nothing to serve to the kubelet");
    return resources;
  }

  // The ledger comes from the Pods' records, never from memory: no Allocate is answered before
  // it is rebuilt, so a restart cannot hand out a card a running Pod holds. False when stopped
  // first.
  bool RebuildLedger() {
    for (int attempt = 0; !stop_.stop_requested(); ++attempt) {
      const auto listed_at = std::chrono::steady_clock::now();
      auto listed = pods_.PodsOnNode();
      if (listed) {
        const size_t restored = allocator_.Restore(*listed);
        allocator_.Reconcile(*listed, listed_at);
        ReclaimWorkdirs(*listed);
        SyncMps();
        log_->info("ledger rebuilt from {} pod(s): {} allocation(s) restored", listed->size(),
                   restored);
        return true;
      }
      log_->warn("cannot list the pods on node {} (retrying): {}", options_.node_name,
                 listed.error());
      SleepUntil(std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(std::min(5000, 200 << std::min(attempt, 5))),
                 stop_);
    }
    return false;
  }

  void Poke() {
    std::lock_guard lock(wake_mutex_);
    wake_.notify_all();
  }

  // Pod changes arrive by watch: a deletion releases at once, a finished Pod gives back what it
  // may; a fresh list on the reconcile period catches anything a watch could have missed.
  void WatchPods() {
    kube::InformerOptions on_node;
    on_node.field_selector = "spec.nodeName=" + options_.node_name;
    pod_informer_ = std::make_unique<kube::Informer>(client_, kube::resources::Pods(), "", on_node);
    pod_informer_->AddEventHandler({.on_add = {},
                                    .on_update =
                                        [this](const kube::ObjectPtr&, const kube::ObjectPtr&) {
                                          pods_changed_ = true;
                                          Poke();
                                        },
                                    .on_delete =
                                        [this](const kube::ObjectPtr& pod) {
                                          {
                                            std::lock_guard lock(wake_mutex_);
                                            deleted_.insert(StringAt(*pod, {"metadata", "uid"}));
                                          }
                                          Poke();
                                        }});
    pod_informer_->Start();
    pods_.set_informer(pod_informer_.get());
  }

  // The Node itself, for its plugin labels: a change stops the daemon, to start with them.
  void WatchNode() {
    kube::InformerOptions named;
    named.field_selector = "metadata.name=" + options_.node_name;
    node_informer_ = std::make_unique<kube::Informer>(client_, kube::resources::Nodes(), "", named);
    auto look = [this](const kube::ObjectPtr& node) {
      if (PluginLabelsOf(*node) == options_.plugin_labels) return;
      labels_changed_ = true;
      Poke();
    };
    node_informer_->AddEventHandler(
        {.on_add = look,
         .on_update = [look](const kube::ObjectPtr&, const kube::ObjectPtr& node) { look(node); },
         .on_delete = {}});
    node_informer_->Start();
  }

  void StopWatches() {
    pods_.set_informer(nullptr);
    if (node_informer_) node_informer_->Stop();
    if (pod_informer_) pod_informer_->Stop();
  }

  // /metrics, /monitor/snapshot, /livez and /readyz. Bad input (a certificate that does not load,
  // a port in use) stops the daemon before it registers anything: a node without its metrics
  // would look healthy and not be.
  Status StartExporter() {
    if (!options_.serve_https) return Ok{};
    auto started = https::StartEndpoint(
        options_.exporter,
        https::HealthRoutes({.metrics =
                                 [this] {
                                   // Rendered once per round: a scrape copies it.
                                   std::lock_guard lock(metrics_mutex_);
                                   return latest_text_;
                                 },
                             .ready = [this] { return front_->registered_generations() > 0; },
                             .not_ready = "the kubelet has not registered every resource",
                             .snapshot =
                                 [this] {
                                   std::lock_guard lock(metrics_mutex_);
                                   return SnapshotJson(latest_).dump();
                                 }}));
    if (!started) return started.failure();
    exporter_ = std::move(*started);
    log_->info("serving /metrics and /monitor/snapshot on https://{}:{}",
               options_.exporter.server.address, exporter_->port());
    return Ok{};
  }

  // Start-up is over: its code need not stay resident (host/common/own_code.h).
  void ReleaseStartupCode() {
    const long before = ProcStatusField("self", "VmRSS");
    auto advised = PageOutOwnCode();
    if (!advised) {
      log_->debug("start-up code kept resident: {}", advised.error());
      return;
    }
    log_->info("start-up done: its code paged out, resident {:.1f} → {:.1f} MB", before / 1024.0,
               ProcStatusField("self", "VmRSS") / 1024.0);
  }

  // On the loop, as discovery is: a thread of its own would wait 15 s for every round. A slow
  // round (the kubelet's summary may take up to its timeout) delays the loop's releases by as
  // much: a release that waits keeps its card counted as held, so nothing is over-admitted, and
  // an Allocate that finds no room settles releases itself from a fresh list of the Pods.
  void Sample() {
    // A failed round publishes only its verdict; a previous round is never carried forward.
    MetricsInput input = SampleRound();
    std::string text = RenderMetrics(input);
    std::lock_guard lock(metrics_mutex_);
    latest_ = std::move(input);
    latest_text_ = std::move(text);
  }

  // One metrics round: every plugin's cards and processes, each Pod's holds on them, and the
  // Pod-level figures of the Pods that hold a card or are an Instance's.
  MetricsInput SampleRound() {
    MetricsInput input;
    input.node = options_.node_name;
    input.period = options_.monitor_period;
    input.round = runtime_.Sample(/*include_processes=*/true);
    input.sampled = true;
    input.sampled_at = std::chrono::system_clock::now();

    std::map<std::string, kube::ObjectPtr> pods;  // by uid
    for (const kube::ObjectPtr& pod : pod_informer_->List())
      pods[StringAt(*pod, {"metadata", "uid"})] = pod;
    std::map<std::string, const Json*> objects;
    for (const auto& [uid, pod] : pods) objects[uid] = pod.get();
    const std::vector<usage::Hold> holds =
        runtime_.WithLedger([&](ledger::NodeLedger& ledger) { return HoldsOf(ledger, objects); });
    std::set<std::string> reported;  // the Pods the Pod-level families cover
    for (const usage::Hold& h : holds) reported.insert(h.pod_uid);
    std::set<std::string> node_pods;
    for (const auto& [uid, pod] : pods) {
      node_pods.insert(uid);
      // An Instance's Pod (its subject is the Instance, not itself), with or without a card.
      if (usage::SubjectOf(*pod).uid != uid) reported.insert(uid);
    }
    input.attribution =
        usage::Attribute(ReadingsOf(input.round), holds, node_pods,
                         [this](uint32_t pid) { return PodOfPid(options_.proc_root, pid); });
    LogWhileItLasts(input.attribution.unplaced, unplaced_, [this](const std::string& line) {
      log_->warn("a process on card {} (its card's per-Pod figures are left out this round)", line);
    });
    LogWhileItLasts(input.attribution.unlisted, unlisted_, [this](const std::string& line) {
      log_->warn("the processes on card {} could not be listed: its per-Pod figures are left out",
                 line);
    });
    if (!reported.empty()) AddPodFigures(input, pods, reported);
    return input;
  }

  // The kubelet's view of the Pods' use, beside their limits.
  void AddPodFigures(MetricsInput& input, const std::map<std::string, kube::ObjectPtr>& pods,
                     const std::set<std::string>& reported) {
    const auto began = std::chrono::steady_clock::now();
    auto summary =
        client_.Request("GET", "/api/v1/nodes/" + options_.node_name + "/proxy/stats/summary",
                        nullptr, "application/json", false, options_.kubelet_stats_timeout);
    input.kubelet_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    Result<std::map<std::string, usage::PodUse>> use =
        summary ? usage::UseFromSummary(*summary)
                : Result<std::map<std::string, usage::PodUse>>(summary.failure());
    input.kubelet_ok = use.ok();
    if (!use && !kubelet_failing_)
      log_->warn("cannot read the kubelet's stats summary: {}", use.error());
    if (use && kubelet_failing_) log_->info("the kubelet's stats summary reads again");
    kubelet_failing_ = !use;
    for (const std::string& uid : reported) {
      const Json& pod = *pods.at(uid);
      const usage::Subject subject = usage::SubjectOf(pod);
      PodFigures figures{.ns = StringAt(pod, {"metadata", "namespace"}),
                         .pod = StringAt(pod, {"metadata", "name"}),
                         .pod_uid = uid,
                         .instance_name = subject.name,
                         .instance_uid = subject.uid,
                         .totals = usage::TotalsOf(pod),
                         .use = {}};
      if (use) {
        if (auto it = use->find(uid); it != use->end()) figures.use = it->second;
      }
      input.pods.push_back(std::move(figures));
    }
  }

  // Logs each line the previous round did not have (a process row no Pod could be found for, a
  // card whose processes could not be listed): said once, while it lasts. `seen` becomes this
  // round's lines.
  template <class Log>
  static void LogWhileItLasts(const std::vector<std::string>& lines, std::set<std::string>& seen,
                              Log log) {
    std::set<std::string> now(lines.begin(), lines.end());
    for (const std::string& line : now)
      if (!seen.contains(line)) log(line);
    seen = std::move(now);
  }

  // Until stopped, or until the Node's plugin labels change (kPluginLabelsChanged).
  int Loop() {
    next_discovery_ = std::chrono::steady_clock::now() + options_.discover_period;
    next_reconcile_ = std::chrono::steady_clock::now() + options_.reconcile_period;
    next_sample_ = std::chrono::steady_clock::now();  // the first round at once
    while (!stop_.stop_requested()) {
      // No thread waits for a health poll: a poll that overran is found here, at its deadline.
      next_health_check_ =
          runtime_.CheckHealthPolls().value_or(std::chrono::steady_clock::time_point::max());
      std::set<std::string> gone = WaitForWork();
      if (stop_.stop_requested()) break;
      if (labels_changed_) {
        log_->warn(
            "the plugins.gpustack.ai/ labels of node {} changed: stopping, to start again with "
            "them (allocations are rebuilt from the Pods' records)",
            options_.node_name);
        return kPluginLabelsChanged;
      }
      const bool released = allocator_.ReleaseDeleted(gone);
      enforcement_.Forget(gone);
      if (pods_changed_.exchange(false)) {
        std::vector<Json> cached;
        for (const kube::ObjectPtr& pod : pod_informer_->List()) cached.push_back(*pod);
        if (allocator_.Reconcile(cached, std::nullopt) || released) SyncMps();
      } else if (released) {
        SyncMps();
      }
      RunDueWork(std::chrono::steady_clock::now());
      if (dirty_.exchange(false)) Publish();
    }
    return 0;
  }

  // Waits for an event or the next periodic job; the Pods deleted meanwhile.
  std::set<std::string> WaitForWork() {
    std::set<std::string> gone;
    std::unique_lock lock(wake_mutex_);
    wake_.wait_until(
        lock, stop_, std::min({next_discovery_, next_reconcile_, next_sample_, next_health_check_}),
        [this] { return dirty_ || pods_changed_ || labels_changed_ || !deleted_.empty(); });
    gone.swap(deleted_);
    return gone;
  }

  // The periodic jobs that are due: discovery, a fresh list of the node's Pods.
  void RunDueWork(std::chrono::steady_clock::time_point now) {
    if (now >= next_discovery_) {
      runtime_.Discover();
      enforcement_.Prepare(runtime_.Report().plugins);
      dirty_ = true;
      next_discovery_ = now + options_.discover_period;
    }
    if (now >= next_reconcile_) {
      const auto listed_at = std::chrono::steady_clock::now();
      if (auto listed = pods_.PodsOnNode()) {
        allocator_.Reconcile(*listed, listed_at);
        ReclaimWorkdirs(*listed);
        SyncMps();
      } else {
        log_->warn("cannot list the pods on node {}: {}", options_.node_name, listed.error());
      }
      next_reconcile_ = now + options_.reconcile_period;
    }
    if (now >= next_sample_) {
      Sample();
      next_sample_ = std::chrono::steady_clock::now() + options_.monitor_period;
    }
    // A partition still in use when its Pod went (from a watch's delete or a list) is retried
    // sooner than the long resync.
    if (allocator_.HasPendingDestroys())
      next_reconcile_ = std::min(next_reconcile_, now + options_.destroy_retry_period);
  }

  // MPS control daemons on exactly the cards that hold slices (where MPS binds them).
  void SyncMps() {
    enforcement_.SyncMps([this] {
      return runtime_.WithLedger([](ledger::NodeLedger& ledger) {
        std::map<std::string, std::set<std::string>> cards;
        for (const auto& [owner, allocation] : ledger.allocations()) {
          for (const ledger::Charge& charge : allocation.charges) {
            if (charge.mode != ledger::Mode::kSliced) continue;
            for (const ledger::Group& group : ledger.spec().groups) {
              for (const ledger::Accelerator& card : group.accelerators) {
                if (card.id == charge.accelerator_id)
                  cards[group.manufacturer].insert(charge.accelerator_id);
              }
            }
          }
        }
        return cards;
      });
    });
  }

  // Removes the enforcers' working directories of Pods that are gone: neither in `listed` (a fresh
  // list) nor holding an allocation (a Pod newer than the list holds one from its Allocate on).
  void ReclaimWorkdirs(const std::vector<Json>& listed) {
    std::set<std::string> live;
    for (const Json& pod : listed) live.insert(StringAt(pod, {"metadata", "uid"}));
    enforcement_.Reclaim([&](const std::string& uid) {
      if (live.count(uid) != 0) return true;
      return runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
        for (const auto& [owner, allocation] : ledger.allocations()) {
          if (owner.pod_uid == uid) return true;
        }
        return false;
      });
    });
  }

  // The node's Devices object and labels; a failure is retried within a second.
  void Publish() {
    board_.Refresh();
    const runtime::NodeReport report = runtime_.Report();
    std::vector<ledger::Allocation> claims;
    const ledger::DevicesStatus status = runtime_.WithLedger([&](ledger::NodeLedger& l) {
      for (const auto& [owner, allocation] : l.allocations())
        if (dra::IsClaimOwner(owner)) claims.push_back(allocation);
      return l.ToStatus();
    });
    Status published = publisher_.Publish(report, status, enforcement_.States(), claims);
    if (published && dra_ != nullptr) {
      // The ledger's own spec, so the cards offered and the cards held are of one moment.
      std::vector<Json> slices = runtime_.WithLedger([&](ledger::NodeLedger& ledger) {
        return dra::ResourceSlices(options_.node_name, ledger.spec(), dra::HeldByPodsOf(ledger), 0,
                                   publisher_.partitions_served());
      });
      published = publisher_.PublishResourceSlices(std::move(slices));
    }
    if (!published) {
      log_->warn("{} (retrying in a second)", published.error());
      next_reconcile_ =
          std::min(next_reconcile_, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      dirty_ = true;
      std::unique_lock lock(wake_mutex_);
      wake_.wait_for(lock, stop_, std::chrono::seconds(1), [] { return false; });
    }
  }

  runtime::NodeRuntime& runtime_;
  kube::Client& client_;
  const DaemonOptions& options_;
  std::stop_token stop_;
  std::shared_ptr<spdlog::logger> log_;
  KubePodDirectory pods_;
  enforcement::SliceEnforcement enforcement_;
  cdi::Injector injector_;
  Allocator allocator_;
  TokenBoard board_;
  Publisher publisher_;
  std::mutex wake_mutex_;             // guards deleted_, and is the wake-up's
  std::condition_variable_any wake_;  // waited for with stop_
  std::set<std::string> deleted_;     // uids
  std::atomic<bool> dirty_{true}, pods_changed_{false}, labels_changed_{false};
  std::chrono::steady_clock::time_point next_discovery_, next_reconcile_, next_sample_,
      next_health_check_;

  std::mutex metrics_mutex_;  // the latest sampling round, read by the exporter's thread
  MetricsInput latest_ = [this] {
    MetricsInput none;
    none.node = options_.node_name;
    return none;
  }();
  std::string latest_text_ = RenderMetrics(latest_);  // its exposition
  // The loop's own, for Sample().
  std::set<std::string> unplaced_;  // the latest round's process rows no Pod was found for
  std::set<std::string> unlisted_;  // the latest round's cards whose processes were not listed
  bool kubelet_failing_ = false;

  // Last, so that they are stopped before what their callbacks use goes.
  KubeletFrontEnd* front_ = nullptr;  // Run()'s, while it runs
  DraFrontEnd* dra_ = nullptr;        // Run()'s, while it serves
  std::unique_ptr<kube::Informer> pod_informer_, node_informer_;
  std::unique_ptr<https::Server> exporter_;
};

}  // namespace

int RunDaemon(runtime::NodeRuntime& runtime, kube::Client& client, const DaemonOptions& options,
              std::stop_token stop) {
  runtime.Discover();  // before the allocator and the tokens read what the plugins serve
  return Daemon(runtime, client, options, stop).Run();
}

}  // namespace gpustack::node
