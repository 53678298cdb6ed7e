#include "host/runtime/node_runtime.h"

#include <unistd.h>

#include <gpustack/client/manifest.hpp>

#include <algorithm>
#include <ctime>
#include <mutex>
#include <set>

#include "host/common/file_trust.h"
#include "host/common/logging.h"
#include "host/common/process_stop.h"

namespace gpustack::runtime {
namespace {

std::string Rfc3339(int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string VendorList(const std::vector<uint16_t>& ids) {
  std::string out;
  for (uint16_t id : ids) out += (out.empty() ? "" : ", ") + client::FormatVendorId(id);
  return out;
}

// Whether the enable policy forces `name` on (as opposed to auto-enabling it).
bool ForcedOn(const NodeConfig& config, const std::string& name) {
  auto it = config.per_plugin.find(name);
  const SourcedSetting& s = it != config.per_plugin.end() ? it->second : config.default_setting;
  return s.setting == EnableSetting::kOn;
}

}  // namespace

std::string_view StateName(PluginState state) {
  switch (state) {
    case PluginState::kRefused:
      return "refused";
    case PluginState::kDisabled:
      return "disabled";
    case PluginState::kQuarantined:
      return "quarantined";
    case PluginState::kFailed:
      return "failed";
    case PluginState::kRunning:
      return "running";
    case PluginState::kHung:
      return "hung";
  }
  return "unknown";
}

bool NodeReport::ok() const {
  for (const SourceProblem& p : problems) {
    if (p.fatal) return false;
  }
  for (const PluginStatus& p : plugins) {
    if (p.state == PluginState::kRefused || (p.enabled && p.state != PluginState::kRunning)) {
      return false;
    }
    if (p.discovery_error || !p.faults.empty()) return false;
  }
  return spec.ok();
}

NodeRuntime::NodeRuntime(RuntimeOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<NodeRuntime>> NodeRuntime::Open(RuntimeOptions options,
                                                       std::unique_ptr<PluginSource> source) {
  auto inventory = pci::Scan(options.pci);
  if (!inventory) return std::move(inventory).failure();
  std::unique_ptr<NodeRuntime> runtime(new NodeRuntime(std::move(options)));
  runtime->source_ = std::move(source);
  NodeReport& report = runtime->report_;
  report.node_name = runtime->options_.node_name;
  if (report.node_name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) report.node_name = host;
  }
  report.pci_devices = std::move(*inventory);
  report.plugin_places = runtime->source_->Places();
  runtime->ledger_ = std::make_unique<ledger::NodeLedger>(report.node_name, ledger::DevicesSpec{});
  runtime->RecoverCrashes();
  std::vector<SourceProblem> problems;
  std::vector<PluginCandidate> candidates = runtime->source_->Find(&problems);
  report.problems.insert(report.problems.end(), problems.begin(), problems.end());
  runtime->Start(std::move(candidates));
  return runtime;
}

NodeRuntime::~NodeRuntime() {
  StopHealthLoop();
  for (Running& r : running_) {
    if (r.backend->hung()) continue;
    // On the way out, a plugin still waiting for driver events (up to the poll's timeout) is not
    // shut down under that wait: a library's shutdown would free what the wait uses, or wait for
    // it. The process ends instead (its driver handles close with it) and the wait is abandoned.
    if (StopRequested() && r.backend->polling()) {
      Logger("runtime")->info("{}: not shut down: its health poll is still waiting",
                              r.backend->identity().manufacturer);
      continue;
    }
    r.backend->Shutdown();
  }
  running_.clear();
  if (journal_ != nullptr) journal_->Close();  // an abandoned call may still hold its mapping
}

void NodeRuntime::RecoverCrashes() {
  const std::filesystem::path& dir = options_.state_dir;
  if (dir.empty()) {
    report_.crash_journal = "off (no state directory)";
    return;
  }
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    // Whoever can write here could forge a crash (and quarantine a plugin) or lift one.
    if (auto trusted = CheckTrusted(dir, options_.trusted_uid); !trusted) {
      report_.crash_journal = "off: state directory refused: " + trusted.error();
      report_.problems.push_back({report_.crash_journal, true});
      return;
    }
  }
  quarantine_.emplace(dir / "quarantine.json");
  if (auto loaded = quarantine_->Load(); !loaded) {
    report_.problems.push_back({loaded.error(), false});
  }
  std::vector<std::string> notes;
  bool changed = false;
  for (const CrashRecord& crash : CrashJournal::Collect(dir, &notes)) {
    if (!crash.attributed) {
      notes.push_back("the device manager (pid " + std::to_string(crash.pid) +
                      ") ended while plugin " + crash.plugin + " was in its " + crash.hook +
                      " hook, but not from that hook (killed, or a fault elsewhere); " +
                      crash.plugin + " is not quarantined");
      continue;
    }
    Logger("runtime")->error(
        "plugin {} crashed the device manager (pid {}) {}; quarantined until {} changes",
        crash.plugin, crash.pid, crash.during, crash.library);
    quarantine_->Put(
        {crash.plugin, crash.library, crash.library_identity, crash.hook,
         "it crashed the device manager (pid " + std::to_string(crash.pid) + ") " + crash.during,
         Rfc3339(crash.entered_unix_ns)});
    changed = true;
  }
  for (const std::string& note : notes) report_.problems.push_back({note, false});
  if (changed) {
    if (auto saved = quarantine_->Save(); !saved) report_.problems.push_back({saved.error(), true});
  }
  auto journal = CrashJournal::Open(dir);
  if (!journal) {
    report_.crash_journal = "off: " + journal.error();
    Logger("runtime")->info("crashes will not be attributed: {}", journal.error());
    return;
  }
  journal_ = std::move(*journal);
  report_.crash_journal = journal_->path().string();
}

void NodeRuntime::Start(std::vector<PluginCandidate> candidates) {
  std::vector<PluginStatus>& statuses = report_.plugins;
  // 1. What the enable policy says of each usable candidate.
  for (const PluginCandidate& c : candidates) {
    PluginStatus status;
    status.name = c.name;
    status.origin = c.origin;
    status.library_path = c.library_path;
    if (!c.usable) {
      status.state = PluginState::kRefused;
      status.error = c.usable.failure();
      status.decision = "not considered: " + c.usable.error();
    } else if (auto ids = VendorIdsOverride(c.name, options_.env); !ids) {
      status.state = PluginState::kRefused;
      status.error = ids.failure();
      status.decision = "not considered: " + ids.error();
    } else {
      // GPUSTACK_<MFR>_PCI_VENDOR_ID (the chart's global.manufacturers) replaces the manifest's.
      const EnableDecision d =
          Decide(options_.config, c.name, *ids ? **ids : c.pci_vendor_ids, report_.pci_devices);
      status.enabled = d.enabled;
      status.decision = d.reason;
    }
    statuses.push_back(std::move(status));
  }
  // 2. A plugin forced on that is not installed is an error, never a silently empty node.
  for (const auto& [name, setting] : options_.config.per_plugin) {
    if (setting.setting != EnableSetting::kOn) continue;
    const bool installed = std::any_of(candidates.begin(), candidates.end(),
                                       [&](const PluginCandidate& c) { return c.name == name; });
    if (!installed) {
      std::string places;
      for (const std::string& p : report_.plugin_places) places += (places.empty() ? "" : ", ") + p;
      report_.problems.push_back({"plugin " + name + " is forced on by " + setting.source +
                                      " but is not installed (searched: " + places + ")",
                                  true});
    }
  }
  // 3. One PCI vendor, one plugin: a plugin forced on wins over one enabled by auto; two of a kind
  //    are both refused, naming each other, rather than driving the same cards twice.
  for (size_t i = 0; i < candidates.size(); ++i) {
    for (size_t j = i + 1; j < candidates.size(); ++j) {
      PluginStatus& a = statuses[i];
      PluginStatus& b = statuses[j];
      if (!a.enabled || !b.enabled) continue;
      std::vector<uint16_t> shared;
      for (uint16_t id : candidates[i].pci_vendor_ids) {
        const auto& other = candidates[j].pci_vendor_ids;
        if (std::find(other.begin(), other.end(), id) != other.end()) shared.push_back(id);
      }
      if (shared.empty()) continue;
      const bool forced_a = ForcedOn(options_.config, a.name);
      const bool forced_b = ForcedOn(options_.config, b.name);
      if (forced_a != forced_b) {
        PluginStatus& loser = forced_a ? b : a;
        const PluginStatus& winner = forced_a ? a : b;
        loser.enabled = false;
        loser.decision = "off: PCI vendor " + VendorList(shared) + " is driven by " + winner.name +
                         ", which is forced on";
        continue;
      }
      for (PluginStatus* p : {&a, &b}) {
        const PluginStatus& other = p == &a ? b : a;
        p->enabled = false;
        p->state = PluginState::kRefused;
        // Neither runs: which of two drivers a card needs is the administrator's call.
        p->error =
            Error{"plugins " + a.name + " and " + b.name + " both claim PCI vendor " +
                      VendorList(shared) + ", so neither runs; keep one by turning " + other.name +
                      " off on this node: the node label " + std::string(kPluginLabelPrefix) +
                      other.name + "=off, the chart's plugins.nodes.<node>." + other.name +
                      ": \"off\", or --enable " + other.name + "=off",
                  Code::kFailedPrecondition};
      }
    }
  }
  // 4. Start what is enabled.
  for (size_t i = 0; i < candidates.size(); ++i) {
    PluginStatus& status = statuses[i];
    if (!status.enabled) continue;
    Logger("runtime")->info("plugin {}: enabled ({})", status.name, status.decision);
    if (auto started = StartOne(candidates[i], status); !started) {
      status.error = started.failure();
      Logger("runtime")->info("plugin {} not started: {}", status.name, started.error());
    }
  }
}

Status NodeRuntime::StartOne(const PluginCandidate& candidate, PluginStatus& status) {
  status.state = PluginState::kFailed;
  const std::string& name = candidate.name;
  const Result<FileIdentity> file = IdentifyFile(candidate.library_path);
  if (quarantine_) {
    if (const QuarantineEntry* q = quarantine_->Find(name)) {
      // Lifted only by a file seen to be different: one that cannot be read now (mid-upgrade,
      // a mount not there yet) keeps the plugin off, and its entry.
      if (!file || q->identity == *file) {
        status.state = PluginState::kQuarantined;
        return Error{q->reason + " at " + q->since + "; it stays off until " + q->library +
                         " changes (or its entry is removed from " + quarantine_->file().string() +
                         ")",
                     Code::kFailedPrecondition};
      }
      Logger("runtime")->warn("plugin {}: {} changed since it crashed; trying it again", name,
                              q->library);
      quarantine_->Remove(name);
      if (auto saved = quarantine_->Save(); !saved) {
        report_.problems.push_back({saved.error(), true});
      }
    }
  }
  // library_path: the one setting the host applies for every plugin, under the plugins' rules.
  ResolvedSettings resolved = SettingsFor(options_.config, name, options_.env);
  status.settings = resolved.settings;
  if (auto it = resolved.settings.find(kLibraryPathSetting); it != resolved.settings.end()) {
    const std::string& path = it->second;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return Error{
          "library_path " + path + " (from " + resolved.library_source + ") does not exist",
          Code::kNotFound, 0, kLibraryPathSetting};
    }
    if (auto trusted = CheckTrusted(path, options_.trusted_uid); !trusted) {
      return Error{"library_path " + path + " (from " + resolved.library_source +
                       ") refused: " + trusted.error(),
                   Code::kFailedPrecondition, 0, kLibraryPathSetting};
    }
  }
  const WatchdogOptions watchdog{options_.hook_deadline, journal_, candidate.library_path,
                                 file ? *file : FileIdentity{}};
  bool hung = false;
  auto loaded = GuardedLoad(
      name, watchdog, [source = source_, candidate] { return source->Load(candidate); }, &hung);
  if (hung) status.state = PluginState::kHung;
  if (!loaded) return std::move(loaded).failure();
  status.identity = (*loaded)->identity();
  if (auto overridden = ApplyIdentityOverrides(*status.identity, options_.env); !overridden) {
    return overridden.failure();
  }
  auto guarded = std::make_unique<GuardedBackend>(std::move(*loaded), watchdog);
  if (auto init = guarded->Init(resolved.settings, report_.pci_devices); !init) {
    if (guarded->hung()) status.state = PluginState::kHung;
    return init.failure();
  }
  status.state = PluginState::kRunning;
  running_.push_back({static_cast<size_t>(&status - report_.plugins.data()), std::move(guarded)});
  return Ok{};
}

void NodeRuntime::CheckAgainstInventory(PluginStatus& status,
                                        const std::vector<sdk::AcceleratorGroup>& groups,
                                        bool* refuse) const {
  std::vector<std::string>& warnings = status.warnings;
  *refuse = false;
  if (!status.identity) return;
  const std::vector<uint16_t>& ids = status.identity->pci_vendor_ids;
  size_t functions = 0;
  for (const pci::PciDevice& d : report_.pci_devices) {
    functions += std::find(ids.begin(), ids.end(), d.vendor_id) != ids.end();
  }
  const size_t cards = CardCount(groups);
  if (cards > functions) {
    const std::string what = status.name + " reports " + std::to_string(cards) +
                             " card(s) but the PCI inventory holds " + std::to_string(functions) +
                             " function(s) of vendor " + VendorList(ids);
    // Enabled because the inventory holds its devices: more cards than devices is a library
    // answering for hardware this node does not have. Forced on: the administrator's call.
    *refuse = !ForcedOn(options_.config, status.name);
    warnings.push_back(*refuse ? what : what + " (kept: the plugin is forced on)");
    return;
  }
  // Fewer: a card the library could not read (or one without a driver) is named by its PCI
  // address, so one bad card shows up instead of vanishing. Only display and processing-
  // accelerator functions count: a vendor's network cards share its vendor id.
  std::set<std::string> reported;
  for (const sdk::AcceleratorGroup& g : groups) {
    for (const sdk::Accelerator& c : g.accelerators) reported.insert(c.pci_bus_id);
  }
  std::string missing;
  size_t count = 0, accelerators = 0;
  for (const pci::PciDevice& d : report_.pci_devices) {
    const uint32_t base_class = d.class_code >> 16;
    if (std::find(ids.begin(), ids.end(), d.vendor_id) == ids.end() ||
        (base_class != 0x03 && base_class != 0x12)) {
      continue;
    }
    ++accelerators;
    if (reported.count(d.bus_id) > 0) continue;
    ++count;
    missing += (missing.empty() ? "" : ", ") + d.bus_id;
  }
  if (count == 0 || reported.count("") > 0) return;
  const std::string what = std::to_string(count) +
                           " accelerator(s) in the PCI inventory have no card in " + status.name +
                           "'s report (unreadable, or no driver bound): " + missing;
  if (cards == 0 && count == accelerators) {
    status.faults.push_back("none of " + status.name + "'s " + std::to_string(count) +
                            " accelerator(s) could be read (every card lost, or no driver "
                            "bound): " +
                            missing);
  } else {
    warnings.push_back(what);
  }
}

void NodeRuntime::Discover() {
  struct Pass {
    size_t status;
    GuardedBackend* backend;
    Result<std::vector<sdk::AcceleratorGroup>> result = Error{"not run"};
  };
  std::vector<Pass> passes;
  for (Running& r : running_) {
    if (!r.backend->hung() && r.backend->Provides(Hook::kDiscover)) {
      passes.push_back({r.status, r.backend.get()});
    }
  }
  for (Pass& pass : passes) pass.result = pass.backend->Discover();  // outside the lock

  std::lock_guard lock(mutex_);
  for (Pass& pass : passes) {
    PluginStatus& status = report_.plugins[pass.status];
    if (pass.backend->hung()) {
      status.state = PluginState::kHung;
      status.error = Error{pass.backend->hung_reason(), Code::kDeadlineExceeded};
    }
    status.warnings.clear();
    status.faults.clear();
    if (pass.result) {
      bool refuse = false;
      CheckAgainstInventory(status, *pass.result, &refuse);
      if (refuse) {
        pass.result = Error{status.name + ": discovery refused: " + status.warnings.back(),
                            Code::kFailedPrecondition};
      }
    }
    const LastGoodDiscovery::Entry& entry = last_good_.Update(status.name, pass.result);
    status.discovery_ran = true;
    status.discovery_error = pass.result ? std::nullopt : std::optional(pass.result.failure());
    status.groups = entry.groups;
    status.stale = entry.stale;
  }
  RebuildSpecLocked();
}

void NodeRuntime::RebuildSpecLocked() {
  std::vector<Discovered> discovered;
  for (const PluginStatus& status : report_.plugins) {
    auto entry = last_good_.entries().find(status.name);
    if (!status.discovery_ran || entry == last_good_.entries().end() || !entry->second.discovered) {
      continue;
    }
    discovered.push_back({status.name, entry->second.groups});
  }
  report_.spec = BuildDevicesSpec(discovered, options_.spec);
  if (!report_.spec) return;  // the ledger keeps the last spec that could be formed
  auto next = std::make_unique<ledger::NodeLedger>(report_.node_name, *report_.spec);
  for (const auto& [owner, allocation] : ledger_->allocations()) {
    // Never over-admit: an allocation the new spec cannot hold is refused, loudly.
    if (auto restored = next->Restore(allocation); !restored) {
      Logger("runtime")->error("allocation of pod {} container {} no longer fits: {}",
                               owner.pod_uid, owner.container, restored.error());
    }
  }
  ledger_ = std::move(next);
}

NodeReport NodeRuntime::Report() const {
  std::lock_guard lock(mutex_);
  return report_;
}

SampleRound NodeRuntime::Sample(bool include_processes) {
  struct Target {
    std::string name;
    std::vector<sdk::AcceleratorGroup> groups;
    GuardedBackend* backend;
    bool processes;
  };
  std::vector<Target> targets;
  SampleRound round;
  {
    std::lock_guard lock(mutex_);
    for (const PluginStatus& status : report_.plugins) {
      if (!status.enabled) continue;
      if (status.state != PluginState::kRunning) {
        round.errors.push_back(status.name +
                               ": not sampled: " + std::string(StateName(status.state)) +
                               (status.error ? ": " + status.error->message : ""));
        continue;
      }
      if (status.discovery_error && status.groups.empty()) {
        round.errors.push_back(status.name + ": not sampled: " + status.discovery_error->message);
        continue;
      }
      auto r = std::find_if(running_.begin(), running_.end(), [&](const Running& run) {
        return &report_.plugins[run.status] == &status;
      });
      if (r == running_.end() || status.groups.empty()) continue;
      if (!r->backend->Provides(Hook::kSampleMetrics)) continue;
      targets.push_back({status.name, status.groups, r->backend.get(),
                         include_processes && status.identity &&
                             status.identity->Has(GPUSTACK_CAP_PROCESS_METRICS)});
    }
  }
  for (const Target& t : targets) {
    auto samples =
        t.backend->SampleMetrics({.accelerator_ids = {}, .include_processes = t.processes});
    if (!samples) {
      round.errors.push_back(samples.error());
      continue;
    }
    round.warnings.insert(round.warnings.end(), samples->warnings.begin(), samples->warnings.end());
    for (const sdk::AcceleratorGroup& group : t.groups) {
      for (const sdk::Accelerator& card : group.accelerators) {
        auto s =
            std::find_if(samples->devices.begin(), samples->devices.end(),
                         [&](const sdk::DeviceSample& d) { return d.accelerator_id == card.id; });
        if (s == samples->devices.end()) {
          round.errors.push_back(t.name + ": no sample for card " + card.id);
          continue;
        }
        const bool listed = t.processes && s->process_listing == GPUSTACK_PROCESS_LISTING_COMPLETE;
        CardSample sample{t.name, group.product, card.index, *s, listed, {}};
        for (const sdk::ProcessSample& p : samples->processes) {
          // A partial list would read the missing processes' Pods as idle: none is used.
          if (listed && p.accelerator_id == card.id) sample.processes.push_back(p);
        }
        round.cards.push_back(std::move(sample));
      }
    }
  }
  return round;
}

Result<PluginBackend*> NodeRuntime::BackendFor(const std::string& manufacturer) {
  std::lock_guard lock(mutex_);
  for (Running& r : running_) {
    const PluginStatus& status = report_.plugins[r.status];
    if (!status.identity || status.identity->manufacturer != manufacturer) continue;
    if (r.backend->hung()) {
      return Error{manufacturer + ": the plugin is hung: " + r.backend->hung_reason(),
                   Code::kFailedPrecondition};
    }
    return static_cast<PluginBackend*>(r.backend.get());
  }
  return Error{manufacturer + ": no running plugin serves it", Code::kFailedPrecondition};
}

std::vector<PluginIdentity> NodeRuntime::RunningIdentities() const {
  std::lock_guard lock(mutex_);
  std::vector<PluginIdentity> identities;
  for (const Running& r : running_) {
    const PluginStatus& status = report_.plugins[r.status];
    if (status.identity && status.state == PluginState::kRunning)
      identities.push_back(*status.identity);
  }
  return identities;
}

Result<std::vector<sdk::DeviceNode>> NodeRuntime::DeviceNodes(const std::string& plugin) {
  GuardedBackend* backend = nullptr;
  {
    std::lock_guard lock(mutex_);
    for (Running& r : running_) {
      if (report_.plugins[r.status].name == plugin) backend = r.backend.get();
    }
  }
  if (backend == nullptr) {
    return Error{plugin + ": not running", Code::kFailedPrecondition};
  }
  if (!backend->Provides(Hook::kListDeviceNodes)) {
    return Error{plugin + ": the plugin does not list its device nodes", Code::kUnimplemented};
  }
  return backend->ListDeviceNodes({});
}

void NodeRuntime::StartHealthLoop(std::chrono::milliseconds poll_timeout,
                                  std::function<void()> on_change) {
  for (size_t i = 0; i < running_.size(); ++i) {
    Running& r = running_[i];
    const PluginStatus& status = report_.plugins[r.status];
    if (!status.identity || !status.identity->Has(GPUSTACK_CAP_HEALTH_EVENTS) ||
        !r.backend->Provides(Hook::kPollHealthEvents) || r.backend->hung()) {
      continue;
    }
    GuardedBackend* backend = r.backend.get();
    const size_t index = r.status;
    backend->StartHealthPolls(poll_timeout, [this, index, on_change](
                                                Result<std::vector<sdk::HealthEvent>> events) {
      if (!events) {
        if (!StopRequested()) Logger("runtime")->warn("health poll failed: {}", events.error());
        return;
      }
      {
        std::lock_guard lock(mutex_);
        PluginStatus& status = report_.plugins[index];
        for (const sdk::HealthEvent& e : *events) {
          if (!last_good_.SetHealth(e.accelerator_id, e.health, e.reason)) continue;
          Logger("runtime")->warn("{}: card {} is now {}{}", status.name, e.accelerator_id,
                                  HealthName(e.health), e.reason.empty() ? "" : ": " + e.reason);
        }
        if (auto entry = last_good_.entries().find(status.name);
            entry != last_good_.entries().end()) {
          status.groups = entry->second.groups;
        }
        RebuildSpecLocked();
      }
      if (on_change) on_change();
    });
    health_polled_.push_back(i);
  }
}

std::optional<std::chrono::steady_clock::time_point> NodeRuntime::CheckHealthPolls() {
  const auto now = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> next;
  for (const size_t i : health_polled_) {
    const Running& r = running_[i];
    if (auto due = r.backend->CheckHealthPolls(now)) {
      if (!next || *due < *next) next = due;
    } else if (r.backend->hung()) {
      std::lock_guard lock(mutex_);
      report_.plugins[r.status].state = PluginState::kHung;
      report_.plugins[r.status].error = Error{r.backend->hung_reason(), Code::kDeadlineExceeded};
    }
  }
  return next;
}

void NodeRuntime::StopHealthLoop() {
  for (const size_t i : health_polled_) running_[i].backend->StopHealthPolls();
  health_polled_.clear();
}

}  // namespace gpustack::runtime
