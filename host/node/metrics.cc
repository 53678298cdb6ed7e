#include "host/node/metrics.h"

#include <functional>
#include <map>
#include <sstream>

#include "host/common/json_path.h"
#include "host/common/text.h"
#include "host/kube/resource.h"

namespace gpustack::node {
namespace {

std::string Number(double value) {
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

using Labels = std::vector<std::pair<std::string, std::string>>;

// The capability gauge's reason for a plugin's failed process listing (docs/behaviour.md §8.2).
std::string UnlistedReason(gpustack_process_listing listing) {
  switch (listing) {
    case GPUSTACK_PROCESS_LISTING_COMPLETE:
      return "";
    case GPUSTACK_PROCESS_LISTING_UNSUPPORTED:
      return "unsupported";
    case GPUSTACK_PROCESS_LISTING_PERMISSION:
      return "permission";
    case GPUSTACK_PROCESS_LISTING_TRUNCATED:
      return "truncated";
    default:
      return "transient_driver_error";
  }
}

std::string Render(const Labels& labels) {
  std::string out = "{";
  for (const auto& [key, value] : labels) {
    if (out.size() > 1) out += ",";
    out += key + "=\"" + PrometheusLabelValue(value) + "\"";
  }
  return out + "}";
}

// One gauge family: its header once, then a line per series that has a value.
class Family {
 public:
  Family(std::ostringstream& out, const char* name, const char* help)
      : out_(out), name_(name), help_(help) {}
  void Add(const Labels& labels, std::optional<double> value) {
    if (!value) return;  // unmeasured: absent, never zero
    if (!header_) {
      out_ << "# HELP " << name_ << " " << help_ << "\n# TYPE " << name_ << " gauge\n";
      header_ = true;
    }
    out_ << name_ << Render(labels) << " " << Number(*value) << "\n";
  }

 private:
  std::ostringstream& out_;
  const char* name_;
  const char* help_;
  bool header_ = false;
};

Labels PodLabels(const std::string& ns, const std::string& instance_name,
                 const std::string& instance_uid, const std::string& node) {
  return {{"namespace", ns},
          {"instance_name", instance_name},
          {"instance_uid", instance_uid},
          {"node", node}};
}

template <typename T>
std::optional<double> AsDouble(const std::optional<T>& value) {
  if (!value) return std::nullopt;
  return static_cast<double>(*value);
}

struct PodFamily {
  const char* name;
  const char* help;
  std::function<std::optional<double>(const PodFigures&)> value;
};

const PodFamily kPodFamilies[] = {
    {"gpustack_instance_cpu_total_millicores", "CPU the Pod's containers may use, millicores.",
     [](const PodFigures& p) { return AsDouble(std::optional(p.totals.cpu_millicores)); }},
    {"gpustack_instance_cpu_used_millicores", "CPU the Pod uses, millicores.",
     [](const PodFigures& p) { return AsDouble(p.use.cpu_millicores); }},
    {"gpustack_instance_memory_total_mib", "Memory the Pod's containers may use, MiB.",
     [](const PodFigures& p) { return AsDouble(std::optional(p.totals.memory_mib)); }},
    {"gpustack_instance_memory_used_mib", "Memory the Pod uses (working set), MiB.",
     [](const PodFigures& p) { return AsDouble(p.use.memory_mib); }},
    {"gpustack_instance_storage_total_mib", "Ephemeral storage the Pod's containers may use, MiB.",
     [](const PodFigures& p) { return AsDouble(std::optional(p.totals.storage_mib)); }},
    {"gpustack_instance_storage_used_mib",
     "Ephemeral storage the Pod uses (logs, writable layers, disk emptyDirs), MiB.",
     [](const PodFigures& p) { return AsDouble(p.use.storage_mib); }},
};

struct GrantFamily {
  const char* name;
  const char* help;
  std::function<std::optional<double>(const usage::GrantSample&)> value;
};

const GrantFamily kGrantFamilies[] = {
    {"gpustack_instance_accelerator_memory_total_mib",
     "Accelerator memory granted: the card, the slice's budget or the partition, MiB.",
     [](const usage::GrantSample& g) { return AsDouble(std::optional(g.hold.memory_total_mib)); }},
    {"gpustack_instance_accelerator_memory_used_mib",
     "Accelerator memory the Pod's processes use on its grant, MiB.",
     [](const usage::GrantSample& g) { return g.memory_used_mib; }},
    {"gpustack_instance_accelerator_memory_utilization_percent",
     "Accelerator memory used against the grant's, percent.",
     [](const usage::GrantSample& g) { return g.memory_utilization_percent; }},
    {"gpustack_instance_accelerator_cores_utilization_percent",
     "Compute used against the grant's own allowance, percent (can exceed 100).",
     [](const usage::GrantSample& g) { return g.cores_utilization_percent; }},
    {"gpustack_instance_accelerator_cores_allowance_percent",
     "The grant's compute, in percent of the card (or of its partition): utilization x this / "
     "100 is its share of the card.",
     [](const usage::GrantSample& g) {
       return g.hold.grants == 1 ? std::optional(g.hold.cores_allowance_percent) : std::nullopt;
     }},
    {"gpustack_instance_accelerator_temperature_celsius", "Temperature of the whole card.",
     [](const usage::GrantSample& g) { return g.temperature_celsius; }},
    {"gpustack_instance_accelerator_power_usage_watts", "Power drawn by the whole card, W.",
     [](const usage::GrantSample& g) { return g.power_watts; }},
    {"gpustack_instance_accelerator_unhealthy", "1 when the whole card is unhealthy.",
     [](const usage::GrantSample& g) -> std::optional<double> {
       if (!g.unhealthy) return std::nullopt;
       return *g.unhealthy ? 1.0 : 0.0;
     }},
};

// A card's own figures, as the snapshot's card list names them.
struct CardFigure {
  const char* key;
  sdk::Measurement sdk::DeviceSample::*figure;
};
constexpr CardFigure kCardFigures[] = {
    {"memory_total_mib", &sdk::DeviceSample::memory_total_mib},
    {"memory_used_mib", &sdk::DeviceSample::memory_used_mib},
    {"memory_utilization_percent", &sdk::DeviceSample::memory_utilization_percent},
    {"cores_utilization_percent", &sdk::DeviceSample::cores_utilization_percent},
    {"temperature_celsius", &sdk::DeviceSample::temperature_celsius},
    {"power_usage_watts", &sdk::DeviceSample::power_watts},
};

// A container's resource limits in a Pod object (null when it has none).
nlohmann::json LimitsOf(const nlohmann::json& pod, const std::string& container) {
  const nlohmann::json& containers = JsonAt(pod, {"spec", "containers"});
  if (!containers.is_array()) return nullptr;
  for (const nlohmann::json& c : containers) {
    if (StringAt(c, {"name"}) == container) return JsonAt(c, {"resources", "limits"});
  }
  return nullptr;
}

}  // namespace

std::vector<usage::Hold> HoldsOf(const ledger::NodeLedger& ledger,
                                 const std::map<std::string, const nlohmann::json*>& pods) {
  std::map<std::string, std::pair<const ledger::Group*, const ledger::Accelerator*>> cards;
  for (const ledger::Group& g : ledger.spec().groups) {
    for (const ledger::Accelerator& a : g.accelerators) cards[a.id] = {&g, &a};
  }
  std::map<std::pair<std::string, std::string>, std::vector<usage::HeldCharge>> charges;
  for (const auto& [owner, allocation] : ledger.allocations()) {
    auto pod = pods.find(owner.pod_uid);
    for (const ledger::Charge& c : allocation.charges) {
      auto card = cards.find(c.accelerator_id);
      if (c.mode == ledger::Mode::kNone || pod == pods.end() || card == cards.end()) continue;
      const uint64_t budget =
          c.mode == ledger::Mode::kSliced
              ? usage::SliceBudgetOfLimits(LimitsOf(*pod->second, owner.container),
                                           card->second.first->memory)
              : 0;
      charges[{owner.pod_uid, c.accelerator_id}].push_back({c, budget});
    }
  }
  std::vector<usage::Hold> holds;
  for (const auto& [key, on_card] : charges) {
    const auto& [group, card] = cards.at(key.second);
    const nlohmann::json& pod = *pods.at(key.first);
    usage::Hold hold = usage::HoldOf(on_card, group->memory, *card);
    hold.ns = StringAt(pod, {"metadata", "namespace"});
    hold.pod = StringAt(pod, {"metadata", "name"});
    hold.pod_uid = key.first;
    const usage::Subject subject = usage::SubjectOf(pod);
    hold.instance_name = subject.name;
    hold.instance_uid = subject.uid;
    holds.push_back(std::move(hold));
  }
  return holds;
}

std::vector<usage::CardReading> ReadingsOf(const runtime::SampleRound& round) {
  std::vector<usage::CardReading> out;
  for (const runtime::CardSample& c : round.cards) {
    usage::CardReading r;
    r.id = c.sample.accelerator_id;
    r.index = c.index;
    r.manufacturer = c.manufacturer;
    r.memory_used_mib = c.sample.memory_used_mib;
    r.cores_percent = c.sample.cores_utilization_percent;
    r.temperature_celsius = c.sample.temperature_celsius;
    r.power_watts = c.sample.power_watts;
    if (c.sample.health != GPUSTACK_HEALTH_UNKNOWN)
      r.unhealthy = c.sample.health == GPUSTACK_HEALTH_UNHEALTHY;
    r.processes_listed = c.processes_listed;
    r.unlisted_reason = UnlistedReason(c.sample.process_listing);
    for (const sdk::ProcessSample& p : c.processes) {
      r.processes.push_back(
          {p.pid, p.partition_id, p.memory_used_mib, p.cores_utilization_percent});
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string RenderMetrics(const MetricsInput& input) {
  std::ostringstream out;
  if (input.sampled) {
    for (const PodFamily& f : kPodFamilies) {
      Family family(out, f.name, f.help);
      for (const PodFigures& p : input.pods)
        family.Add(PodLabels(p.ns, p.instance_name, p.instance_uid, input.node), f.value(p));
    }
    for (const GrantFamily& f : kGrantFamilies) {
      Family family(out, f.name, f.help);
      for (const usage::GrantSample& g : input.attribution.grants) {
        Labels labels = PodLabels(g.hold.ns, g.hold.instance_name, g.hold.instance_uid, input.node);
        labels.insert(labels.end(), {{"id", g.id},
                                     {"index", std::to_string(g.index)},
                                     {"manufacturer", g.manufacturer},
                                     {"mode", ledger::ModeName(g.hold.mode)}});
        family.Add(labels, f.value(g));
      }
    }
    Family capability(out, "gpustack_accelerator_process_capability",
                      "1 when the card's plugin measures this figure per process; reason says why "
                      "not.");
    for (const usage::Capability& c : input.attribution.capabilities) {
      capability.Add({{"node", input.node},
                      {"manufacturer", c.manufacturer},
                      {"id", c.card_id},
                      {"entry_point", c.entry_point},
                      {"reason", c.reason}},
                     c.ok ? 1.0 : 0.0);
    }
  }
  Family success(out, "gpustack_instance_metrics_collector_success",
                 "1 when the latest round could read this source.");
  success.Add({{"source", "snapshot"}}, input.sampled && input.round.errors.empty() ? 1.0 : 0.0);
  if (input.kubelet_ok) success.Add({{"source", "kubelet"}}, *input.kubelet_ok ? 1.0 : 0.0);
  if (input.kubelet_ok) {
    Family duration(out, "gpustack_instance_metrics_collector_duration_seconds",
                    "How long the latest round's read of the source took.");
    duration.Add({{"source", "kubelet"}}, input.kubelet_seconds);
  }
  return out.str();
}

nlohmann::json SnapshotJson(const MetricsInput& input, std::chrono::system_clock::time_point now) {
  nlohmann::json cards = nlohmann::json::array();
  for (const runtime::CardSample& c : input.round.cards) {
    nlohmann::json card = {{"id", c.sample.accelerator_id},
                           {"index", c.index},
                           {"manufacturer", c.manufacturer},
                           {"product", c.product},
                           {"health", std::string(runtime::HealthName(c.sample.health))}};
    for (const CardFigure& f : kCardFigures) {
      if (c.sample.*f.figure) card[f.key] = *(c.sample.*f.figure);
    }
    cards.push_back(std::move(card));
  }
  nlohmann::json grants = nlohmann::json::array();
  for (const usage::GrantSample& g : input.attribution.grants) {
    nlohmann::json entry = usage::AcceleratorJson(g);
    entry["namespace"] = g.hold.ns;
    entry["pod"] = g.hold.pod;
    entry["podUID"] = g.hold.pod_uid;
    entry["card"] = g.hold.card_id;
    grants.push_back(std::move(entry));
  }
  nlohmann::json out = {{"node", input.node},
                        {"sampled", input.sampled},
                        {"periodSeconds", input.period.count() / 1000.0},
                        {"cards", cards},
                        {"grants", grants},
                        {"errors", input.round.errors}};
  if (input.sampled) {
    out["time"] = kube::FormatTime(input.sampled_at);
    out["ageSeconds"] = std::chrono::duration<double>(now - input.sampled_at).count();
  }
  return out;
}

}  // namespace gpustack::node
