#include "host/operator/worker.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "host/common/json_path.h"
#include "host/common/logging.h"
#include "host/kube/config.h"
#include "host/kube/informer.h"
#include "host/kube/leader_election.h"
#include "host/kube/workqueue.h"
#include "host/loader/dlopen_source.h"
#include "host/operator/bound_pod.h"
#include "host/operator/instance_controller.h"
#include "host/operator/pool_metrics.h"
#include "host/operator/reconciler.h"
#include "host/runtime/node_config.h"

namespace gpustack::op {
namespace {

using kube::ObjectPtr;
using PodPtr = std::shared_ptr<const BoundPod>;
using DevicesPtr = std::shared_ptr<const DevicesRecord>;
using kube::ResourceType;

const ResourceType kSecrets = kube::resources::Secrets();

struct Counters {
  std::mutex mutex;
  uint64_t passes = 0;
  uint64_t failed_passes = 0;
  std::map<std::string, uint64_t> writes;  // by kind
  uint64_t write_failures = 0;
  double last_pass_seconds = 0;
  bool leading = false;
  bool synced = false;
  Json snapshot = Json::object();
  std::string pool_metrics;  // the InstanceTypes' views at the latest pass (pool_metrics.h)
  std::vector<std::string> problems;
  // The leader's gpustack-node-devices check, while it leads.
  NodeDevicesCheck* node_check = nullptr;
  NodeCheckCounters last_check;
  // The leader's re-queueing of Pods the node refused, while it leads.
  PodRequeuer* requeuer = nullptr;
  RequeueCounters last_requeue;
  // The leader's Instance controller, while it leads.
  InstanceController* instances = nullptr;
  InstanceCounters last_instances;
};

// Everything in the settings that node facts, labels and counting keys depend on.
std::string SettingsKey(const Settings& s) {
  return std::string(s.node_management_manual ? "m" : "-") + (s.mixed_on_node ? "x" : "-");
}

// The leader's loop for one leadership term: informers, a work queue and the reconcilers it runs,
// all dropped when the term ends, so a later term starts from fresh caches.
class ReconcileLoop {
 public:
  ReconcileLoop(kube::Client& client, const WorkerOptions& options, Counters& counters)
      : client_(client),
        options_(options),
        counters_(counters),
        log_(Logger("worker")),
        reconcilers_(MakeReconcilers(client)) {}

  void Run(std::stop_token stop) {
    if (!WaitForKueue(stop)) return;
    StartCaches();
    for (kube::InformerBase* i : informers_) {
      while (!stop.stop_requested() && !i->WaitForSync(std::chrono::seconds(1))) {
      }
    }
    SetSynced(true);
    log_->info("caches synced: {} nodes, {} Devices, {} InstanceTypes", nodes_->Size(),
               devices_->Size(), instance_types_->Size());
    queue_.Add("sync");
    std::jthread checking, requeueing, instancing;
    if (instances_) {
      instancing = std::jthread([this](std::stop_token own) { instances_->Run(own); });
      std::lock_guard lock(counters_.mutex);
      counters_.instances = instances_.get();
    }
    if (node_check_) {
      checking = std::jthread([this](std::stop_token own) { node_check_->Run(own); });
      if (requeuer_)
        requeueing = std::jthread([this](std::stop_token own) { requeuer_->Run(own); });
      std::lock_guard lock(counters_.mutex);
      counters_.node_check = node_check_.get();
      counters_.requeuer = requeuer_.get();
    }
    std::stop_callback on_stop(stop, [this] { queue_.ShutDown(); });
    Loop();
    if (instancing.joinable()) {
      instancing.request_stop();
      instancing.join();
      std::lock_guard lock(counters_.mutex);
      counters_.last_instances = instances_->Counters();
      counters_.instances = nullptr;
    }
    if (checking.joinable()) {
      checking.request_stop();
      checking.join();
      if (requeueing.joinable()) {
        requeueing.request_stop();
        requeueing.join();
      }
      std::lock_guard lock(counters_.mutex);
      counters_.last_check = node_check_->Counters();
      counters_.node_check = nullptr;
      if (requeuer_) counters_.last_requeue = requeuer_->Counters();
      counters_.requeuer = nullptr;
    }
    for (kube::InformerBase* i : informers_) i->Stop();
    SetSynced(false);
  }

 private:
  // Kueue's kinds must be served before its objects can be written: wait, loudly. False when
  // the term ended first.
  bool WaitForKueue(std::stop_token stop) {
    for (int attempt = 0; !stop.stop_requested(); ++attempt) {
      auto served = client_.IsServed(kube::resources::ClusterQueues());
      if (served && *served) return true;
      if (attempt % 6 == 0)
        log_->warn("waiting for Kueue: {} is not served yet ({})", "clusterqueues.kueue.x-k8s.io",
                   served ? "not installed" : served.error());
      for (int i = 0; i < 50 && !stop.stop_requested(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // An informer whose changes start a pass, unless they change nothing a pass reads (a node's
  // heartbeat, Kueue's counters).
  std::unique_ptr<kube::Informer> Watched(ResourceType type, std::string ns,
                                          kube::InformerOptions options = {}) {
    options.transform = &TrimForWorkerCache;
    auto informer = std::make_unique<kube::Informer>(client_, type, std::move(ns), options);
    informer->AddEventHandler(
        {.on_add = [this](const ObjectPtr&) { queue_.Add("sync"); },
         .on_update =
             [this, plural = type.plural](const ObjectPtr& before, const ObjectPtr& after) {
               if (SameForPass(plural, *before, *after)) return;
               log_->trace("changed: {} {}", plural, kube::ObjectKey(*after));
               queue_.Add("sync");
             },
         .on_delete = [this](const ObjectPtr&) { queue_.Add("sync"); }});
    informers_.push_back(informer.get());
    return informer;
  }

  // An informer of records (cluster-wide) whose changes start a pass, unless the record's digest
  // of what a pass reads stayed the same.
  template <typename Record, size_t Record::*digest>
  std::unique_ptr<kube::BasicInformer<Record>> WatchedRecords(ResourceType type,
                                                              kube::InformerOptions options,
                                                              Record (*project)(const Json&)) {
    using Ptr = std::shared_ptr<const Record>;
    auto informer = std::make_unique<kube::BasicInformer<Record>>(client_, type, "",
                                                                  std::move(options), project);
    informer->AddEventHandler(
        {.on_add = [this](const Ptr&) { queue_.Add("sync"); },
         .on_update =
             [this, plural = type.plural](const Ptr& before, const Ptr& after) {
               if ((*before).*digest == (*after).*digest) return;
               log_->trace("changed: {} {}", plural, after->name);
               queue_.Add("sync");
             },
         .on_delete = [this](const Ptr&) { queue_.Add("sync"); }});
    informers_.push_back(informer.get());
    return informer;
  }

  void StartCaches() {
    // Each Node trimmed and packed, with what every pass reads beside it (node_record.h).
    kube::InformerOptions trimmed;
    trimmed.transform = &TrimNodeForWorkerCache;
    nodes_ = WatchedRecords<NodeRecord, &NodeRecord::pass_digest>(kube::resources::Nodes(), trimmed,
                                                                  &NodeRecordOf);
    // Each node's Devices object as its ledger, built once as it comes in (devices_record.h).
    devices_ = WatchedRecords<DevicesRecord, &DevicesRecord::digest>(kube::resources::Devices(), {},
                                                                     &DevicesRecordOf);
    instance_types_ = Watched(kube::resources::InstanceTypes(), "");
    namespaces_ = Watched(kube::resources::Namespaces(), "");
    auto labelled = [](const char* type) {
      kube::InformerOptions o;
      o.label_selector = std::string(kTypeLabel) + "=" + type;
      return o;
    };
    auto named = [](const std::string& name) {
      kube::InformerOptions o;
      o.field_selector = "metadata.name=" + name;
      return o;
    };
    flavors_ = Watched(kube::resources::ResourceFlavors(), "", labelled("nodes"));
    queues_ = Watched(kube::resources::ClusterQueues(), "", labelled("instancetypes"));
    entrances_ = Watched(kube::resources::LocalQueues(), "", labelled("entrances"));
    checks_ = Watched(kube::resources::AdmissionChecks(), "", named(kNodeDevicesCheck));
    settings_ = Watched(kSecrets, options_.system_namespace, named(kSettingsSecret));
    // Every bound Pod: those that run for the CPU view, those holding cards for the check.
    kube::InformerOptions bound;
    bound.field_selector = "spec.nodeName!=";
    bound.transform = TrimPodForWorkerCache;
    pods_ = std::make_unique<kube::BasicInformer<BoundPod>>(client_, kube::resources::Pods(), "",
                                                            bound, &BoundPodOf);
    informers_.push_back(pods_.get());
    // With gate 3's promise comes the re-queue of a Pod the node still refused (D20).
    if (options_.node_check) {
      node_check_ = std::make_unique<NodeDevicesCheck>(client_, options_.node_check_options,
                                                       *nodes_, *instance_types_);
      if (options_.requeue_refused_pods)
        requeuer_ = std::make_unique<PodRequeuer>(client_, options_.requeue);
    }
    if (options_.instance_controller) {
      instances_ = std::make_unique<InstanceController>(
          client_, InstanceControllerInputs{.nodes = nodes_.get(),
                                            .instance_types = instance_types_.get(),
                                            .queues = queues_.get(),
                                            .settings =
                                                [this] {
                                                  std::vector<std::string> ignored;
                                                  return ReadSettings(&ignored);
                                                },
                                            .manufacturers = &options_.manufacturers});
      for (kube::Informer* i : instances_->informers()) informers_.push_back(i);
    }
    pods_->AddEventHandler(
        {.on_add = [this](const PodPtr& pod) { OnPod(nullptr, pod); },
         .on_update = [this](const PodPtr& before, const PodPtr& after) { OnPod(before, after); },
         .on_delete = [this](const PodPtr& pod) { OnPod(pod, nullptr); }});
    caches_ = {nodes_.get(),  instance_types_.get(), namespaces_.get(), flavors_.get(),
               queues_.get(), entrances_.get(),      checks_.get()};
    for (kube::InformerBase* i : informers_) i->Start();
  }

  // Passes until the queue shuts down; a failed pass is retried with backoff.
  void Loop() {
    while (auto key = queue_.Get()) {
      if (*key == kTrimKey) {
        TrimWhenQuiet();
        queue_.Done(*key);
        continue;
      }
      const auto started = std::chrono::steady_clock::now();
      std::string error;
      const bool ok = Pass(&error);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      {
        std::lock_guard lock(counters_.mutex);
        ++counters_.passes;
        if (!ok) ++counters_.failed_passes;
        counters_.last_pass_seconds = seconds;
      }
      last_pass_ = std::chrono::steady_clock::now();
      if (!trim_armed_) {
        trim_armed_ = true;
        queue_.AddAfter(kTrimKey, kTrimQuiet);
      }
      if (ok) {
        queue_.Forget(*key);
      } else {
        log_->warn("pass failed, retrying: {}", error);
        queue_.AddRateLimited(*key);
      }
      queue_.Done(*key);
    }
  }

  // A burst of passes and list pages leaves freed pages inside the heap, which glibc keeps
  // (it returns only the heap's top): once the passes have been quiet for kTrimQuiet, they go
  // back to the system, about 2 MB at 1,000 nodes (docs/footprint.md). Never during a burst.
  void TrimWhenQuiet() {
    const auto quiet = std::chrono::steady_clock::now() - last_pass_;
    if (quiet < kTrimQuiet) {
      queue_.AddAfter(kTrimKey, kTrimQuiet - quiet);
      return;
    }
    trim_armed_ = false;
    malloc_trim(0);
  }

  void SetSynced(bool synced) {
    std::lock_guard lock(counters_.mutex);
    counters_.synced = synced;
  }

  // The CPU that bound, running Pods request, per node, kept from the Pod events: a pass reads
  // one entry per node instead of every Pod, and starts only when a node's sum changed.
  void OnPod(const PodPtr& before, const PodPtr& after) {
    if (node_check_) node_check_->OnPod(before, after);
    if (requeuer_) {
      const PodPtr& pod = after != nullptr ? after : before;
      requeuer_->OnPod(std::string(pod->key()), after != nullptr ? after->failed().get() : nullptr);
    }
    bool changed = false;
    {
      std::lock_guard lock(cpu_mutex_);
      auto add = [&](const BoundPod& pod, int sign) {
        if (pod.Finished() || pod.cpu_millicores() == 0) return;
        const std::string node(pod.node());
        const int64_t total = node_cpu_[node] += sign * pod.cpu_millicores();
        if (total == 0) node_cpu_.erase(node);
        changed = true;
      };
      if (before) add(*before, -1);
      if (after) add(*after, +1);
      if (changed && before != nullptr && after != nullptr &&
          before->cpu_millicores() == after->cpu_millicores() && before->phase() == after->phase())
        changed = false;  // the same request counted out and in again
    }
    if (changed) queue_.Add("sync");
  }

  Settings ReadSettings(std::vector<std::string>* problems) {
    ObjectPtr secret = settings_->Get(options_.system_namespace + "/" + kSettingsSecret);
    return SettingsFromSecret(secret.get(), problems);
  }

  // Every node's facts, read again only where the Node, its Devices object or the settings
  // changed since the last pass.
  std::vector<NodePtr> ReadNodes(const Settings& settings, const std::string& settings_key,
                                 std::vector<std::string>* problems) {
    std::vector<NodePtr> out;
    std::set<std::string> seen;
    for (const NodeRecordPtr& node : nodes_->List()) {
      const std::string& name = node->name;
      seen.insert(name);
      DevicesPtr devices = devices_->Get(name);
      const std::string& node_rv = node->resource_version;
      const std::string devices_rv = devices ? devices->resource_version : "";
      Cached& cached = facts_[name];
      if (!cached.facts || cached.node_rv != node_rv || cached.devices_rv != devices_rv ||
          cached.settings_key != settings_key) {
        NodeFacts facts = NodeFactsOf(node->Parse(), devices.get());
        DecideManagement(facts, settings);
        cached = Cached{node_rv, devices_rv, settings_key,
                        std::make_shared<const NodeFacts>(std::move(facts))};
      }
      if (!cached.facts->devices_problem.empty())
        problems->push_back(cached.facts->devices_problem);
      out.push_back(cached.facts);
    }
    std::erase_if(facts_, [&](const auto& entry) { return !seen.count(entry.first); });
    return out;
  }

  // What every reconciler of this pass reads: the check's state and the pass's InstanceTypes
  // (the cached ones, and the derived ones that do not exist yet).
  PassView ViewOf(const Fleet& fleet) {
    PassView view{fleet, caches_, options_.system_namespace, false, {}, {}};
    ObjectPtr check = checks_->Get(kNodeDevicesCheck);
    view.check_active = check && kube::ConditionIsTrue(*check, "Active");
    view.instance_types = instance_types_->List();
    std::set<std::string> names;
    for (const ObjectPtr& t : view.instance_types) names.insert(StringAt(*t, {"metadata", "name"}));
    for (const PoolIdentity& id : fleet.DerivedPools()) {
      const std::string name = PoolName(id);
      if (names.count(name)) continue;
      view.instance_types.push_back(
          std::make_shared<const Json>(fleet.RenderDerivedInstanceType(id)));
      view.created.insert(name);
    }
    return view;
  }

  // What the worker's flavors inject into admitted Pods, for the requeuer to take out again.
  void SetFlavorInjections() {
    Labels labels;
    std::vector<Json> tolerations;
    for (const ObjectPtr& flavor : flavors_->List()) {
      const Json& node_labels = JsonAt(*flavor, {"spec", "nodeLabels"});
      if (node_labels.is_object()) {
        for (const auto& [key, value] : node_labels.items())
          if (value.is_string()) labels.emplace(key, value.get<std::string>());
      }
      const Json& flavor_tolerations = JsonAt(*flavor, {"spec", "tolerations"});
      if (!flavor_tolerations.is_array()) continue;
      for (const Json& t : flavor_tolerations)
        if (std::find(tolerations.begin(), tolerations.end(), t) == tolerations.end())
          tolerations.push_back(t);
    }
    requeuer_->SetFlavorInjections(std::move(labels), std::move(tolerations));
  }

  // One pass: the fleet model, every reconciler's writes, applied phase by phase.
  bool Pass(std::string* error) {
    std::vector<std::string> problems;
    const Settings settings = ReadSettings(&problems);
    auto fleet = std::make_shared<Fleet>(ReadNodes(settings, SettingsKey(settings), &problems),
                                         settings, options_.manufacturers);
    {
      std::lock_guard lock(cpu_mutex_);
      fleet->SetCpuRequests(node_cpu_);
    }
    if (node_check_) node_check_->SetFleet(fleet);
    if (requeuer_) SetFlavorInjections();
    const PassView view = ViewOf(*fleet);
    std::vector<Write> writes;
    for (const auto& reconciler : reconcilers_) {
      for (Write& w : reconciler->Reconcile(view)) writes.push_back(std::move(w));
    }
    for (const Write& w : writes) log_->debug("{}", w.what);
    const std::vector<std::string> errors =
        RunWrites(writes, options_.write_threads, [this](const Write& w, bool ok) {
          std::lock_guard lock(counters_.mutex);
          if (ok) {
            ++counters_.writes[w.kind];
          } else {
            ++counters_.write_failures;
          }
        });
    for (const std::string& e : errors) log_->warn("{}", e);
    Record(*fleet, problems);
    if (!errors.empty()) {
      *error = std::to_string(errors.size()) + " of " + std::to_string(writes.size()) +
               " write(s) failed, first: " + errors.front();
      return false;
    }
    return true;
  }

  // The pass's problems (logged when they change) and the snapshot /monitor/snapshot serves.
  void Record(const Fleet& fleet, const std::vector<std::string>& problems) {
    std::lock_guard lock(counters_.mutex);
    if (problems != counters_.problems)
      for (const std::string& p : problems) log_->warn("{}", p);
    counters_.problems = problems;
    size_t managed = 0;
    for (const NodePtr& n : fleet.nodes()) managed += n->managed ? 1 : 0;
    Json snapshot = {{"nodes", fleet.nodes().size()},
                     {"managedNodes", managed},
                     {"manufacturers", fleet.manufacturers().size()},
                     {"problems", problems}};
    for (const auto& reconciler : reconcilers_) reconciler->Describe(snapshot);
    counters_.snapshot = std::move(snapshot);
    std::vector<Json> instance_types;
    for (const ObjectPtr& t : instance_types_->List()) instance_types.push_back(*t);
    counters_.pool_metrics = RenderPoolMetrics(instance_types);
  }

  // A node's facts at the versions and settings they were read from.
  struct Cached {
    std::string node_rv, devices_rv, settings_key;
    NodePtr facts;
  };

  kube::Client& client_;
  const WorkerOptions& options_;
  Counters& counters_;
  std::shared_ptr<spdlog::logger> log_;
  std::vector<std::unique_ptr<Reconciler>> reconcilers_;
  kube::WorkQueue queue_{kube::WorkQueueOptions{.base_delay = std::chrono::milliseconds(200),
                                                .max_delay = std::chrono::milliseconds(30'000)}};
  std::unique_ptr<NodeInformer> nodes_;
  std::unique_ptr<kube::Informer> instance_types_, namespaces_, flavors_, queues_, entrances_,
      checks_, settings_;
  std::unique_ptr<kube::BasicInformer<DevicesRecord>> devices_;
  std::unique_ptr<kube::BasicInformer<BoundPod>> pods_;
  std::vector<kube::InformerBase*> informers_;
  Caches caches_;
  std::unique_ptr<NodeDevicesCheck> node_check_;
  std::unique_ptr<PodRequeuer> requeuer_;
  std::unique_ptr<InstanceController> instances_;
  std::map<std::string, Cached> facts_;
  // The heap's trim (TrimWhenQuiet), on the passes' thread.
  static constexpr const char* kTrimKey = "trim-heap";
  static constexpr std::chrono::seconds kTrimQuiet{10};
  std::chrono::steady_clock::time_point last_pass_{};
  bool trim_armed_ = false;
  std::mutex cpu_mutex_;
  std::map<std::string, int64_t> node_cpu_;  // millicores
};

// Every replica, before the election: the system namespace and the settings Secret exist, and the
// Secret holds every known setting (the environment seeds the missing ones, never overwrites).
Status Prepare(kube::Client& client, const WorkerOptions& options) {
  auto seeds = SeedValues(options.getenv ? options.getenv
                                         : [](const std::string&) { return std::string(); });
  if (!seeds) return seeds.failure();
  Json ns = {{"apiVersion", "v1"},
             {"kind", "Namespace"},
             {"metadata", {{"name", options.system_namespace}}}};
  if (auto made = client.Create(kube::resources::Namespaces(), ns);
      !made && !kube::IsAlreadyExists(made.failure()) && made.failure().http_status != 403)
    return Status(
        made.failure().WithContext("cannot create namespace " + options.system_namespace + ": "));
  auto secret = client.Get(kSecrets, options.system_namespace, kSettingsSecret);
  if (!secret && kube::IsNotFound(secret.failure())) {
    Json object = {{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"metadata",
                    {{"name", kSettingsSecret},
                     {"namespace", options.system_namespace},
                     {"labels", {{kPartOfLabel, kPartOf}}}}},
                   {"type", "Opaque"},
                   {"stringData", *seeds}};
    auto made = client.Create(kSecrets, object);
    if (made || kube::IsAlreadyExists(made.failure())) return Ok{};
    return Status(made.failure().WithContext("cannot create the settings Secret: "));
  }
  if (!secret) return Status(secret.failure().WithContext("cannot read the settings Secret: "));
  Json missing = Json::object();
  const Json data = secret->value("data", Json::object());
  for (const auto& [name, value] : *seeds)
    if (!data.contains(name)) missing[name] = value;
  if (missing.empty()) return Ok{};
  auto patched = client.Patch(kSecrets, options.system_namespace, kSettingsSecret,
                              kube::PatchType::kMerge, {{"stringData", missing}});
  if (!patched) return Status(patched.failure().WithContext("cannot add settings: "));
  return Ok{};
}

// A summary family: the 0.5, 0.9 and 0.99 quantiles of `values`, and their count.
void Quantiles(std::string& out, const std::string& name, const std::string& help,
               std::vector<double> values) {
  std::sort(values.begin(), values.end());
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " summary\n";
  for (double q : {0.5, 0.9, 0.99}) {
    const double v =
        values.empty()
            ? 0
            : values[std::min(values.size() - 1,
                              static_cast<size_t>(q * static_cast<double>(values.size())))];
    out +=
        name + "{quantile=\"" + std::to_string(q).substr(0, 4) + "\"} " + std::to_string(v) + "\n";
  }
  out += name + "_count " + std::to_string(values.size()) + "\n";
}

std::string RenderMetrics(Counters& c) {
  std::lock_guard lock(c.mutex);
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto sample = [&](const std::string& name, const std::string& value) {
    out += name + " " + value + "\n";
  };
  family("gpustack_worker_leader", "gauge", "Whether this replica leads (1) or waits (0).");
  sample("gpustack_worker_leader", c.leading ? "1" : "0");
  family("gpustack_worker_passes_total", "counter", "Reconcile passes.");
  sample("gpustack_worker_passes_total", std::to_string(c.passes));
  family("gpustack_worker_failed_passes_total", "counter", "Reconcile passes with a failed write.");
  sample("gpustack_worker_failed_passes_total", std::to_string(c.failed_passes));
  family("gpustack_worker_writes_total", "counter",
         "Writes sent to the apiserver, by object kind.");
  for (const auto& [kind, n] : c.writes)
    sample("gpustack_worker_writes_total{kind=\"" + kind + "\"}", std::to_string(n));
  family("gpustack_worker_write_failures_total", "counter",
         "Writes the apiserver refused or lost.");
  sample("gpustack_worker_write_failures_total", std::to_string(c.write_failures));
  family("gpustack_worker_last_pass_seconds", "gauge", "Duration of the latest reconcile pass.");
  sample("gpustack_worker_last_pass_seconds", std::to_string(c.last_pass_seconds));
  const RequeueCounters requeue = c.requeuer ? c.requeuer->Counters() : c.last_requeue;
  family("gpustack_requeued_pods_total", "counter",
         "Pods the node refused after gate 3 said Ready: replaced, or left Failed once the "
         "replacements allowed were spent.");
  sample("gpustack_requeued_pods_total{outcome=\"replaced\"}", std::to_string(requeue.replaced));
  sample("gpustack_requeued_pods_total{outcome=\"given_up\"}", std::to_string(requeue.given_up));
  family("gpustack_requeue_failures_total", "counter",
         "Replacements or deletions the apiserver refused (retried).");
  sample("gpustack_requeue_failures_total", std::to_string(requeue.failures));
  const NodeCheckCounters check = c.node_check ? c.node_check->Counters() : c.last_check;
  family("gpustack_node_devices_verdicts_total", "counter",
         "gpustack-node-devices verdicts written, by state.");
  sample("gpustack_node_devices_verdicts_total{state=\"Ready\"}", std::to_string(check.ready));
  sample("gpustack_node_devices_verdicts_total{state=\"Retry\"}", std::to_string(check.retry));
  family("gpustack_node_devices_write_failures_total", "counter",
         "Verdicts the apiserver refused (retried).");
  sample("gpustack_node_devices_write_failures_total", std::to_string(check.write_failures));
  Quantiles(out, "gpustack_node_devices_decision_seconds",
            "Time to judge one Workload (the most recent 4096).", check.decision_seconds);
  const InstanceCounters instances = c.instances ? c.instances->Counters() : c.last_instances;
  family("gpustack_instance_reconciles_total", "counter",
         "Instance reconciles, by outcome (a failure is retried with backoff).");
  sample("gpustack_instance_reconciles_total{outcome=\"ok\"}",
         std::to_string(instances.reconciles - instances.failures));
  sample("gpustack_instance_reconciles_total{outcome=\"failed\"}",
         std::to_string(instances.failures));
  family("gpustack_instance_pods_total", "counter", "Instance Pods made and deleted.");
  sample("gpustack_instance_pods_total{action=\"created\"}",
         std::to_string(instances.pods_created));
  sample("gpustack_instance_pods_total{action=\"deleted\"}",
         std::to_string(instances.pods_deleted));
  family("gpustack_instance_forced_stops_total", "counter",
         "Instances stopped because their queue was drained or their InstanceType went.");
  sample("gpustack_instance_forced_stops_total", std::to_string(instances.stops_forced));
  Quantiles(out, "gpustack_instance_reconcile_seconds",
            "Time to reconcile one Instance (the most recent 4096).", instances.reconcile_seconds);
  if (c.leading) out += c.pool_metrics;  // a standby's would be stale
  return out;
}

// Serves /metrics, /livez and /readyz (and the pass snapshot) for this replica.
Result<std::unique_ptr<https::Server>> StartHealth(const WorkerOptions& options, Counters& counters,
                                                   std::unique_ptr<AdmissionWebhooks>& webhooks) {
  return https::StartEndpoint(
      options.health,
      https::HealthRoutes({.metrics =
                               [&] {
                                 std::string out = RenderMetrics(counters);
                                 if (webhooks) out += webhooks->RenderMetrics();
                                 return out;
                               },
                           .ready =
                               [&] {
                                 std::lock_guard lock(counters.mutex);
                                 // A standby is ready (it waits for the Lease and serves
                                 // webhooks), a leader once its caches are synced.
                                 if (webhooks && !webhooks->ready()) return false;
                                 return counters.leading ? counters.synced
                                                         : options.leader_election;
                               },
                           .not_ready = "the caches or the webhooks are not ready yet",
                           .snapshot =
                               [&] {
                                 std::lock_guard lock(counters.mutex);
                                 return counters.snapshot.dump();
                               }}));
}

// Prepare, retried: the apiserver may not be up yet when the Pod starts. Bad input is final.
Status PrepareWithRetry(kube::Client& client, const WorkerOptions& options,
                        const std::atomic<bool>& stop) {
  for (int attempt = 0; !stop; ++attempt) {
    Status prepared = Prepare(client, options);
    if (prepared || prepared.failure().code == Code::kInvalidArgument) return prepared;
    Logger("worker")->warn("preparing: {} (retrying)", prepared.error());
    std::this_thread::sleep_for(std::chrono::seconds(std::min(attempt + 1, 5)));
  }
  return Ok{};
}

// Leads (reconciles) while this replica holds the Lease, or always without election, until
// `stopping`; an error when the election itself cannot run.
Status LeadWhileElected(kube::Client& client, const WorkerOptions& options, Counters& counters,
                        std::stop_source& stopping) {
  auto log = Logger("worker");
  auto lead = [&](std::stop_token term_stop) {
    {
      std::lock_guard lock(counters.mutex);
      counters.leading = true;
    }
    log->info("leading: reconciling");
    ReconcileLoop term(client, options, counters);
    term.Run(term_stop);
    std::lock_guard lock(counters.mutex);
    counters.leading = false;
  };
  if (!options.leader_election) {
    lead(stopping.get_token());
    return Ok{};
  }
  kube::LeaderElectionConfig config = options.election;
  config.lease_namespace = options.system_namespace;
  kube::LeaderElector elector(client, config);
  while (!stopping.stop_requested()) {
    Status ran = elector.Run(stopping.get_token(), {.on_started_leading = lead,
                                                    .on_stopped_leading =
                                                        [&] {
                                                          if (!stopping.stop_requested())
                                                            log->warn("stopped leading");
                                                        },
                                                    .on_new_leader =
                                                        [&](const std::string& who) {
                                                          if (who != options.election.identity)
                                                            log->info("leader is {}", who);
                                                        }});
    if (!ran) return ran;
  }
  return Ok{};
}

}  // namespace

Result<ManufacturerTable> LoadManufacturers(
    const std::vector<std::filesystem::path>& dirs,
    const std::vector<std::filesystem::path>& required,
    const std::function<std::string(const std::string&)>& getenv,
    std::vector<std::string>* problems) {
  ManufacturerTable table;
  loader::DlopenPluginSource source(dirs, required);
  std::vector<runtime::SourceProblem> source_problems;
  for (const runtime::PluginCandidate& candidate : source.Find(&source_problems)) {
    if (!candidate.usable) {
      problems->push_back(candidate.origin + ": " + candidate.usable.error());
      continue;
    }
    auto plugin = source.Load(candidate);
    if (!plugin) {
      problems->push_back(candidate.origin + ": " + plugin.error());
      continue;
    }
    runtime::PluginIdentity id = (*plugin)->identity();
    // The same deploy-time overrides the node daemons apply (the chart gives both the same env).
    if (auto overridden = runtime::ApplyIdentityOverrides(id, getenv); !overridden) {
      return Error{overridden.error(), Code::kInvalidArgument};
    }
    table[id.manufacturer] = {
        id.manufacturer,  id.base_resource_name,       id.partition_kind,
        candidate.origin, id.one_card_per_container(), id.min_slice_memory_percentage,
        id.runtime_class};
  }
  for (const runtime::SourceProblem& p : source_problems)
    if (p.fatal) return Error{p.message, Code::kInvalidArgument};
  return table;
}

int RunWorker(kube::Client& client, const WorkerOptions& options, const std::atomic<bool>& stop) {
  auto log = Logger("worker");
  Counters counters;
  // Made before the health endpoint reads it, started (certificates, caches, server) later.
  std::unique_ptr<AdmissionWebhooks> webhooks;
  if (options.webhooks.enabled) {
    webhooks = std::make_unique<AdmissionWebhooks>(client, options.webhooks,
                                                   options.system_namespace, options.manufacturers);
  }
  std::unique_ptr<https::Server> health;
  if (options.serve_https) {
    auto started = StartHealth(options, counters, webhooks);
    if (!started) {
      log->error("{}", started.error());
      return 2;
    }
    health = std::move(*started);
    log->info("serving /metrics, /livez and /readyz on https://{}:{}",
              options.health.server.address, health->port());
  }
  for (const auto& [key, m] : options.manufacturers)
    log->info("manufacturer {}: {} (partition kind '{}') from {}", key, m.base, m.partition_kind,
              m.origin);
  if (Status prepared = PrepareWithRetry(client, options, stop); !prepared) {
    log->error("{}", prepared.error());
    return 2;
  }
  if (webhooks) {
    if (Status started = webhooks->Start(); !started) {
      log->error("admission webhooks: {}", started.error());
      return started.failure().code == Code::kInvalidArgument ? 2 : 1;
    }
  }
  // A signal cannot wake a stop_token: the flag is looked at every 100 ms.
  std::stop_source stopping;
  std::jthread watcher([&](std::stop_token own) {
    while (!own.stop_requested() && !stop)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stopping.request_stop();
  });
  const Status led = LeadWhileElected(client, options, counters, stopping);
  watcher.request_stop();
  if (webhooks) webhooks->Stop();
  if (health) health->Stop();
  if (!led) {
    log->error("leader election: {}", led.error());
    return 2;
  }
  log->info("stopped");
  return 0;
}

}  // namespace gpustack::op
