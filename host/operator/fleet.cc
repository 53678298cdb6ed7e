#include "host/operator/fleet.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "host/common/json_path.h"
#include "host/kube/quantity.h"
#include "host/ledger/allocated.h"
#include "host/ledger/views.h"
#include "host/node_profile/keys.h"

namespace gpustack::op {
namespace {

const std::string kKueue = "kueue.x-k8s.io/v1beta2";

std::string Label(const Json& object, const std::string& key) {
  return StringAt(object, {"metadata", "labels", key});
}

std::string Annotation(const Json& object, const std::string& key) {
  return StringAt(object, {"metadata", "annotations", key});
}

}  // namespace

namespace {

Json View(const ledger::ResourceView& v) {
  return {
      {"onceMaxRequest", v.once_max_request}, {"remaining", v.remaining}, {"capacity", v.capacity}};
}

Json Profiles(const std::vector<ledger::ProfileCount>& profiles) {
  Json out = Json::array();
  for (const auto& p : profiles) out.push_back({{"name", p.name}, {"count", p.count}});
  return out;
}

std::string Pair(const ledger::ResourceView& v) {
  return std::to_string(v.once_max_request) + "/" + std::to_string(v.remaining);
}

const ledger::Group* FindGroup(const NodeFacts& node, const std::string& manufacturer,
                               const std::string& group_id) {
  if (!node.ledger) return nullptr;
  for (const ledger::Group& g : node.ledger->spec().groups)
    if (g.manufacturer == manufacturer && g.id == group_id) return &g;
  return nullptr;
}

enum class Tier { kFallback, kSmall, kMedium, kLarge, kXLarge };
UnitPreset PresetOf(Tier tier) {
  switch (tier) {
    case Tier::kSmall:
      return {"8", "32Gi"};
    case Tier::kMedium:
      return {"8", "64Gi"};
    case Tier::kLarge:
      return {"12", "128Gi"};
    case Tier::kXLarge:
      return {"12", "192Gi"};
    case Tier::kFallback:
      break;
  }
  return {"4", "16Gi"};
}

struct PresetEntry {
  const char* manufacturer;
  std::vector<std::string> tokens;  // the last one matches as a prefix ("910b" ~ "910b3")
  Tier tier;
  std::vector<std::pair<std::string, Tier>> by = {};  // a whole token that refines the tier
};

// The unit presets (docs/behaviour.md §3.5): the products the upstream operator's preset table
// names that this project knows of; other products fall back (4 CPU / 16Gi).
const std::vector<PresetEntry>& Presets() {
  static const std::vector<PresetEntry> presets = {
      {"nvidia", {"a10g"}, Tier::kMedium},
      {"nvidia", {"a10"}, Tier::kMedium},
      {"nvidia", {"t4"}, Tier::kSmall},
      {"nvidia", {"l40s"}, Tier::kLarge},
      {"nvidia", {"h100"}, Tier::kXLarge},
      {"nvidia", {"h200"}, Tier::kXLarge},
      {"nvidia", {"b200"}, Tier::kXLarge},
      {"nvidia", {"a100"}, Tier::kMedium, {{"80gb", Tier::kLarge}, {"40gb", Tier::kMedium}}},
      {"ascend", {"910b"}, Tier::kMedium},
      {"ascend", {"910", "93"}, Tier::kXLarge},
      {"amd", {"mi300x"}, Tier::kXLarge},
      {"amd", {"mi210"}, Tier::kLarge},
      {"hygon", {"k100"}, Tier::kLarge},
      {"metax", {"mxc500"}, Tier::kMedium},
      {"thead", {"ppu", "zw810e"}, Tier::kMedium},
  };
  return presets;
}

std::vector<std::string> Tokens(std::string_view text) {
  std::vector<std::string> out;
  std::string current;
  for (char c : text) {
    if (c == '-') {
      if (!current.empty()) out.push_back(std::move(current));
      current.clear();
    } else {
      current += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (!current.empty()) out.push_back(std::move(current));
  return out;
}

bool Matches(const std::vector<std::string>& product, const std::vector<std::string>& entry) {
  if (entry.empty() || entry.size() > product.size()) return false;
  for (size_t i = 0; i + 1 < entry.size(); ++i)
    if (product[i] != entry[i]) return false;
  return product[entry.size() - 1].rfind(entry.back(), 0) == 0;
}

size_t Length(const std::vector<std::string>& tokens) {
  size_t n = 0;
  for (const auto& t : tokens) n += t.size() + 1;
  return n;
}

bool Equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    if (a.is_number_unsigned() && b.is_number_unsigned()) return a == b;
    return a.get<int64_t>() == b.get<int64_t>();
  }
  return a == b;
}

}  // namespace

std::string EntranceName(std::string_view cluster_queue) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : cluster_queue) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return std::string("gpustack-fnv64-") + hex;
}

UnitPreset PresetFor(std::string_view manufacturer, std::string_view group_id) {
  std::vector<std::string> tokens = Tokens(group_id);
  // Marketing words that lead some product names ("Tesla T4", "Instinct MI210").
  while (!tokens.empty() && (tokens.front() == "tesla" || tokens.front() == "instinct"))
    tokens.erase(tokens.begin());
  const PresetEntry* best = nullptr;
  for (const PresetEntry& e : Presets()) {
    if (e.manufacturer != manufacturer || !Matches(tokens, e.tokens)) continue;
    if (best == nullptr || Length(e.tokens) > Length(best->tokens)) best = &e;
  }
  if (best == nullptr) return PresetOf(Tier::kFallback);
  for (const auto& [token, tier] : best->by)
    if (std::find(tokens.begin(), tokens.end(), token) != tokens.end()) return PresetOf(tier);
  return PresetOf(best->tier);
}

NodeFacts NodeFactsOf(const Json& node, const DevicesRecord* devices) {
  NodeFacts f;
  const Json& meta = node.value("metadata", Json::object());
  f.name = meta.value("name", "");
  f.uid = meta.value("uid", "");
  if (const Json& managed = JsonAt(node, {"metadata", "labels", kManagedLabel});
      managed.is_string())
    f.labels[kManagedLabel] = managed.get<std::string>();
  const Json& status = node.value("status", Json::object());
  const Json& info = status.value("nodeInfo", Json::object());
  f.os = Label(node, "kubernetes.io/os");
  if (f.os.empty()) f.os = info.value("operatingSystem", "linux");
  f.arch = Label(node, "kubernetes.io/arch");
  if (f.arch.empty()) f.arch = info.value("architecture", "amd64");
  const Json capacity = status.value("capacity", Json::object());
  for (const auto& [k, v] : capacity.items()) {
    if (k != "cpu" && !k.ends_with(".sliced") && !k.ends_with(".partitioned")) continue;
    if (auto milli = kube::MilliOf(v)) f.capacity[k] = *milli / 1000;
  }
  f.cores = f.capacity.count("cpu") ? f.capacity["cpu"] : 0;

  const std::string vendor = Label(node, kCpuVendorLabel);
  f.cpu_name = Annotation(node, kCpuNameAnnotation);
  if (f.cpu_name.rfind('@', 0) == 0) f.cpu_name.clear();  // an unresolved NFD template
  f.cpu_vendor = node_profile::LabelSegment(vendor);
  if (f.cpu_vendor.empty() || f.cpu_vendor == "unknown") f.cpu_vendor = "generic";
  f.gkey = node_profile::CpuKey(f.cpu_vendor == "generic" ? "" : vendor, f.cpu_name,
                                Label(node, kCpuFamilyLabel), Label(node, kCpuModelLabel));

  if (devices != nullptr) {
    f.ledger = devices->ledger;
    f.claims = devices->claims;
    f.devices_problem = devices->problem;
  }
  return f;
}

NodeFacts NodeFactsOf(const Json& node, const Json* devices) {
  if (devices == nullptr) return NodeFactsOf(node);
  const DevicesRecord record = DevicesRecordOf(*devices);
  return NodeFactsOf(node, &record);
}

std::string PoolName(const PoolIdentity& id) {
  std::string name = "gpustack--";
  if (!id.acceleratable) {
    name += id.general_group;
  } else if (id.general_group == "generic") {
    name += id.accelerator_group;
  } else {
    name += id.general_group + "--" + id.accelerator_group;
  }
  return name + "-" + id.os + "-" + id.arch;
}

Result<PoolIdentity> IdentityOf(const Json& instance_type) {
  const Json& spec = instance_type.value("spec", Json::object());
  PoolIdentity id;
  id.acceleratable = spec.value("acceleratable", false);
  id.accelerator_group = spec.value("acceleratorGroup", "");
  id.general_group = spec.value("generalGroup", "generic");
  if (id.general_group.empty()) id.general_group = "generic";
  id.os = spec.value("os", "");
  id.arch = spec.value("arch", "");
  if (id.os.empty() || id.arch.empty())
    return Error{"InstanceType " + instance_type["metadata"].value("name", "") +
                 ": spec.os and spec.arch are required"};
  if (id.acceleratable == id.accelerator_group.empty())
    return Error{"InstanceType " + instance_type["metadata"].value("name", "") +
                 ": acceleratorGroup is required exactly when acceleratable is true"};
  return id;
}

void DecideManagement(NodeFacts& n, const Settings& settings) {
  auto label = n.labels.find(kManagedLabel);
  if (label == n.labels.end()) {
    n.managed = !settings.node_management_manual;
    n.stamp_managed = n.managed;
  } else {
    n.managed = label->second == "true";
    // Once ours, kept ours while automatic (an admin's "false" is theirs, never overwritten).
    n.stamp_managed = n.managed && !settings.node_management_manual;
  }
}

namespace {
std::vector<NodePtr> Decided(std::vector<NodeFacts> nodes, const Settings& settings) {
  std::vector<NodePtr> out;
  for (NodeFacts& n : nodes) {
    DecideManagement(n, settings);
    out.push_back(std::make_shared<const NodeFacts>(std::move(n)));
  }
  return out;
}
}  // namespace

Fleet::Fleet(std::vector<NodeFacts> nodes, Settings settings, ManufacturerTable manufacturers)
    : Fleet(Decided(std::move(nodes), settings), settings, std::move(manufacturers)) {}

Fleet::Fleet(std::vector<NodePtr> nodes, Settings settings, ManufacturerTable manufacturers)
    : nodes_(std::move(nodes)), settings_(settings), manufacturers_(std::move(manufacturers)) {
  std::sort(nodes_.begin(), nodes_.end(),
            [](const NodePtr& a, const NodePtr& b) { return a->name < b->name; });
  auto contribute = [&](const NodeFacts& n, Flavor f) {
    auto [it, added] = flavors_.try_emplace(f.name, std::move(f));
    if (added) it->second.first = &n;
    it->second.nodes.push_back(n.name);
  };
  for (const NodePtr& node : nodes_) {
    const NodeFacts& n = *node;
    if (!n.managed) continue;
    if ((settings_.mixed_on_node || !n.accelerated()) && n.cores > 0) {
      Flavor f;
      f.gkey = n.gkey;
      f.os = n.os;
      f.arch = n.arch;
      f.count = n.cores;
      f.name =
          "gpustack--" + n.gkey + "-" + n.os + "-" + n.arch + "-" + std::to_string(n.cores) + "c";
      contribute(n, std::move(f));
    }
    if (!n.ledger) continue;
    for (const ledger::Group& g : n.ledger->spec().groups) {
      if (g.accelerators.empty()) continue;
      Flavor f;
      f.gkey = n.gkey;
      f.akey = node_profile::AcceleratorKey(g.manufacturer, g.id);
      f.manufacturer = g.manufacturer;
      f.group_id = g.id;
      f.os = n.os;
      f.arch = n.arch;
      f.count = static_cast<int64_t>(g.accelerators.size());
      f.name = "gpustack--" + n.gkey + "--" + f.akey + "-" + n.os + "-" + n.arch + "-" +
               std::to_string(f.count) + "d";
      contribute(n, std::move(f));
    }
  }
}

const NodeFacts* Fleet::Node(const std::string& name) const {
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), name,
                             [](const NodePtr& n, const std::string& k) { return n->name < k; });
  return it != nodes_.end() && (*it)->name == name ? it->get() : nullptr;
}

std::vector<const Flavor*> Fleet::FlavorsOf(const PoolIdentity& id) const {
  std::vector<const Flavor*> out;
  for (const auto& [name, f] : flavors_) {
    if (f.os != id.os || f.arch != id.arch) continue;
    if (id.acceleratable ? f.akey != id.accelerator_group : !f.akey.empty()) continue;
    if (id.general_group != "generic" && f.gkey != id.general_group) continue;
    out.push_back(&f);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Flavor* a, const Flavor* b) { return a->count < b->count; });
  return out;
}

std::vector<PoolIdentity> Fleet::DerivedPools() const {
  std::set<PoolIdentity> pools;
  if (!settings_.derived_from_node) return {};
  for (const auto& [name, f] : flavors_) {
    PoolIdentity id;
    id.acceleratable = !f.akey.empty();
    id.accelerator_group = f.akey;
    id.general_group = settings_.aware_cpu_manufacturer ? f.gkey : "generic";
    id.os = f.os;
    id.arch = f.arch;
    pools.insert(id);
  }
  return {pools.begin(), pools.end()};
}

std::vector<const NodeFacts*> Fleet::PoolNodes(const PoolIdentity& id) const {
  std::set<std::string> names;
  for (const Flavor* f : FlavorsOf(id)) names.insert(f->nodes.begin(), f->nodes.end());
  std::vector<const NodeFacts*> out;
  for (const std::string& n : names) out.push_back(Node(n));
  return out;
}

Json Fleet::RenderFlavor(const Flavor& f) const {
  const std::string key = f.akey.empty() ? std::string(kGeneralPrefix) + f.gkey
                                         : std::string(kAcceleratablePrefix) + f.akey;
  Json labels = {{kTypeLabel, "nodes"},
                 {"kubernetes.io/os", f.os},
                 {"kubernetes.io/arch", f.arch},
                 {kAcceleratableLabel, f.akey.empty() ? "false" : "true"},
                 {std::string(kGeneralPrefix) + f.gkey, "true"},
                 {key + ".count", std::to_string(f.count)},
                 {key + ".capacity", std::to_string(f.capacity())}};
  Json node_labels = {{"kubernetes.io/os", f.os},
                      {"kubernetes.io/arch", f.arch},
                      {kManagedLabel, "true"},
                      {std::string(kGeneralPrefix) + f.gkey, "true"},
                      {key + ".count", std::to_string(f.count)}};
  Json notes = Json::object();
  if (!f.akey.empty()) {
    labels[std::string(kAcceleratablePrefix) + f.akey] = "true";
    node_labels[std::string(kAcceleratablePrefix) + f.akey] = "true";
    if (const ledger::Group* g = FindGroup(*f.first, f.manufacturer, f.group_id)) {
      notes["note.gpustack.ai/manufacturer"] = g->manufacturer;
      notes["note.gpustack.ai/product"] = g->name;
      notes["note.gpustack.ai/memory"] = node_profile::MemoryQuantity(g->memory);
      notes["note.gpustack.ai/cores"] = std::to_string(g->cores);
      if (!g->family.empty()) notes["note.gpustack.ai/family"] = g->family;
      if (!g->compute_capability.empty())
        notes["note.gpustack.ai/computeCapability"] = g->compute_capability;
      // The InstanceTypeFlavor catalogue's SLICEABLE (docs/behaviour.md §2.3).
      const bool sliceable =
          std::any_of(g->accelerators.begin(), g->accelerators.end(),
                      [](const ledger::Accelerator& a) { return a.sliceable(); });
      notes["note.gpustack.ai/sliceable"] = sliceable ? "true" : "false";
    }
  } else if (!settings_.mixed_on_node) {
    node_labels[kCpuOnlyLabel] = "true";
  }
  if (f.akey.empty() || settings_.aware_cpu_manufacturer) {
    notes["note.gpustack.ai/cpuDetail"] =
        Json{{"manufacturer", f.first->cpu_vendor}, {"product", f.first->cpu_name}}.dump();
  }
  return {
      {"apiVersion", kKueue},
      {"kind", "ResourceFlavor"},
      {"metadata", {{"name", f.name}, {"labels", labels}, {"annotations", notes}}},
      {"spec",
       {{"nodeLabels", node_labels}, {"tolerations", Json::array({{{"operator", "Exists"}}})}}}};
}

Json Fleet::RenderDerivedInstanceType(const PoolIdentity& id) const {
  UnitPreset unit{"1", "2Gi"};
  if (id.acceleratable) {
    unit = PresetOf(Tier::kFallback);
    for (const Flavor* f : FlavorsOf(id)) {
      unit = PresetFor(f->manufacturer, f->group_id);
      break;
    }
  }
  const std::string name = PoolName(id);
  Json labels = {{"kubernetes.io/os", id.os},
                 {"kubernetes.io/arch", id.arch},
                 {kAcceleratableLabel, id.acceleratable ? "true" : "false"},
                 {kDerivedLabel, "true"},
                 {kEntranceLabel, EntranceName(name)}};
  if (id.acceleratable) labels[std::string(kAcceleratablePrefix) + id.accelerator_group] = "true";
  if (id.general_group != "generic")
    labels[std::string(kGeneralPrefix) + id.general_group] = "true";
  Json spec = {{"acceleratable", id.acceleratable},
               {"generalGroup", id.general_group},
               {"os", id.os},
               {"arch", id.arch},
               {"unitResources", {{"cpu", unit.cpu}, {"ram", unit.ram}}},
               {"localStorage", "100Gi"}};
  if (id.acceleratable) spec["acceleratorGroup"] = id.accelerator_group;
  return {
      {"apiVersion", "worker.gpustack.ai/v1alpha1"},
      {"kind", "InstanceType"},
      {"metadata", {{"name", name}, {"labels", labels}, {"finalizers", Json::array({kFinalizer})}}},
      {"spec", spec}};
}

namespace {

// What an accelerated pool shows of its hardware (status.detail): the first node's card group,
// with the logical and partition counts summed over the pool. Empty when no node has the group.
Json AcceleratedDetail(const std::vector<const NodeFacts*>& nodes, const Flavor& f) {
  ledger::SlicedDetail sliced;
  std::map<std::string, uint32_t> profile_counts;
  std::map<std::string, uint64_t> profile_memory;  // MiB, what the Pod webhook folds
  std::vector<std::string> profile_order;
  const ledger::Group* shown = nullptr;
  for (const NodeFacts* n : nodes) {
    const ledger::Group* g = FindGroup(*n, f.manufacturer, f.group_id);
    if (g == nullptr) continue;
    if (shown == nullptr) shown = g;
    const ledger::SlicedDetail d = ledger::SlicedDetailOf(*g);
    sliced.cores_percentage_overcommit |= d.cores_percentage_overcommit;
    sliced.logical_count += d.logical_count;
    sliced.physical_count += d.physical_count;
    for (const auto& p : d.physical_profiles) {
      auto [it, added] = profile_counts.try_emplace(p.name, 0);
      if (added) profile_order.push_back(p.name);
      it->second += p.count;
    }
    for (const ledger::Accelerator& card : g->accelerators) {
      for (const ledger::PartitionProfile& p : card.profiles)
        profile_memory.try_emplace(p.name, p.memory_mib);
    }
  }
  if (shown == nullptr) return Json::object();
  // Maps that would be empty are left out: server-side apply turns a map whose last field goes
  // into null, which the schema refuses.
  Json sliced_detail = {{"logical",
                         {{"count", sliced.logical_count},
                          {"coresPercentageOvercommit", sliced.cores_percentage_overcommit}}}};
  if (sliced.physical_count > 0) {
    Json profiles = Json::array();
    for (const auto& p : profile_order)
      profiles.push_back(
          {{"name", p}, {"count", profile_counts[p]}, {"memoryMib", profile_memory[p]}});
    sliced_detail["physical"] = {{"count", sliced.physical_count}, {"profiles", profiles}};
  }
  Json detail = {{"manufacturer", shown->manufacturer},
                 {"product", shown->name},
                 {"memory", shown->memory},
                 {"cores", shown->cores},
                 {"slicedDetail", sliced_detail}};
  if (!shown->family.empty()) detail["family"] = shown->family;
  if (!shown->compute_capability.empty()) detail["computeCapability"] = shown->compute_capability;
  return detail;
}

// The four card views and the CPU view, as status fields and printer columns.
void AddViews(const ledger::PoolViews& views, const ledger::ResourceView& cpu, Json& status,
              Json& columns) {
  status["accelerator"] = View(views.exclusive);
  status["acceleratorShared"] = View(views.shared);
  status["acceleratorSliced"] = View(views.sliced);
  Json partitioned = View(views.partitioned);
  partitioned["allocatedProfiles"] = Profiles(views.allocated_profiles);
  partitioned["remainingProfiles"] = Profiles(views.remaining_profiles);
  status["acceleratorPartitioned"] = partitioned;
  status["cpu"] = View(cpu);
  columns["accelerator"] = ledger::FormatViews(views);
  columns["cpu"] = Pair(cpu);
  std::string partitions;
  for (const auto& p : views.remaining_profiles)
    partitions += (partitions.empty() ? "" : " ") + p.name + ":" + std::to_string(p.count);
  columns["partitions"] = partitions;
}

}  // namespace

ledger::ResourceView Fleet::CpuView(const std::vector<const NodeFacts*>& nodes) const {
  std::vector<ledger::CpuNode> cpu_nodes;
  for (const NodeFacts* n : nodes) {
    auto requested = cpu_requests_.find(n->name);
    const int64_t taken_m = requested == cpu_requests_.end() ? 0 : requested->second;
    // Whole cores left: what a unit of 1 CPU can still get on the node.
    const int64_t free = std::max<int64_t>(0, n->cores * 1000 - taken_m) / 1000;
    cpu_nodes.push_back({n->cores, n->cores - free});
  }
  return ledger::CpuView(cpu_nodes);
}

Json Fleet::RenderInstanceTypeStatus(const Json& instance_type, bool stopped,
                                     const std::string& stop_reason) const {
  const std::string name = StringAt(instance_type, {"metadata", "name"});
  const Json& spec = JsonAt(instance_type, {"spec"});
  const Json& unit = JsonAt(spec, {"unitResources"});
  Json status = {{"entrance", EntranceName(name)},
                 {"phase", stopped ? "Inactive" : "Active"},
                 {"phaseMessage", stopped ? stop_reason : ""}};
  // A quantity as written: an int-or-string field may hold either.
  auto text = [](const Json& q) {
    return q.is_string() ? q.get<std::string>() : q.is_null() ? std::string() : q.dump();
  };
  Json columns = {{"unit", text(JsonAt(unit, {"cpu"})) + "/" + text(JsonAt(unit, {"ram"})) + "/" +
                               text(JsonAt(spec, {"localStorage"}))}};
  auto identity = IdentityOf(instance_type);
  ledger::PoolViews views;
  ledger::ResourceView cpu;
  Json detail = Json::object();
  if (!identity) {
    status["phaseMessage"] = identity.error();
  } else if (identity->acceleratable) {
    const std::vector<const Flavor*> flavors = FlavorsOf(*identity);
    if (!flavors.empty()) {
      const Flavor& f = *flavors.front();
      const std::vector<const NodeFacts*> nodes = PoolNodes(*identity);
      std::vector<const ledger::NodeLedger*> ledgers;
      for (const NodeFacts* n : nodes)
        if (n->ledger) ledgers.push_back(n->ledger.get());
      views = ledger::ComputePoolViews(ledgers, f.manufacturer, f.group_id);
      detail = AcceleratedDetail(nodes, f);
    }
  } else {
    const std::vector<const NodeFacts*> nodes = PoolNodes(*identity);
    cpu = CpuView(nodes);
    const bool generic = identity->general_group == "generic";
    const NodeFacts* first = nodes.empty() ? nullptr : nodes.front();
    detail = {{"cpu",
               {{"manufacturer", generic || !first ? "generic" : first->cpu_vendor},
                {"product", generic || !first ? "generic" : first->cpu_name}}}};
  }
  if (!detail.empty()) status["detail"] = detail;
  AddViews(views, cpu, status, columns);
  status["columns"] = columns;
  return {{"apiVersion", "worker.gpustack.ai/v1alpha1"},
          {"kind", "InstanceType"},
          {"metadata", {{"name", name}}},
          {"status", status}};
}

Json Fleet::RenderClusterQueue(const Json& instance_type, const Json* current, bool deleting,
                               bool check_active) const {
  const std::string name = instance_type["metadata"].value("name", "");
  const Json& spec = instance_type.value("spec", Json::object());
  Json labels = {{kTypeLabel, "instancetypes"}};
  Json groups = Json::array();
  Json annotations = Json::object();
  std::string stop = spec.value("inactive", false) ? "Hold" : "None";
  bool accelerated = false;
  if (auto id = IdentityOf(instance_type)) {
    accelerated = id->acceleratable;
    labels["kubernetes.io/os"] = id->os;
    labels["kubernetes.io/arch"] = id->arch;
    labels[kAcceleratableLabel] = id->acceleratable ? "true" : "false";
    if (id->acceleratable)
      labels[std::string(kAcceleratablePrefix) + id->accelerator_group] = "true";
    if (id->general_group != "generic")
      labels[std::string(kGeneralPrefix) + id->general_group] = "true";
    std::vector<const Flavor*> flavors = FlavorsOf(*id);
    if (flavors.size() > kMaxFlavorsPerQueue) flavors.resize(kMaxFlavorsPerQueue);
    if (!flavors.empty()) {
      // Kueue v0.17 refuses a Workload asking for a resource its queue does not cover (it has
      // no IgnoreUndeclared), so an accelerated queue also covers its nodes' cores.
      Json covered = Json::array({"cpu"});
      if (id->acceleratable)
        covered = Json::array({std::string(kCreditsPrefix) + flavors.front()->manufacturer, "cpu"});
      Json entries = Json::array();
      for (const Flavor* f : flavors) {
        Json resources = Json::array();
        if (id->acceleratable) {
          int64_t cores = 0;
          for (const std::string& n : f->nodes) cores += Node(n)->cores;
          resources.push_back(
              {{"name", covered[0]},
               {"nominalQuota", kube::FormatDecimal(f->capacity() * ledger::kCardCredits)}});
          resources.push_back({{"name", "cpu"}, {"nominalQuota", kube::FormatDecimal(cores)}});
        } else {
          resources.push_back(
              {{"name", "cpu"}, {"nominalQuota", kube::FormatDecimal(f->capacity())}});
        }
        entries.push_back({{"name", f->name}, {"resources", resources}});
      }
      groups.push_back({{"coveredResources", covered}, {"flavors", entries}});
    }
  }
  if (groups.empty()) {
    // No flavor: drain what the queue admitted before emptying its groups, then hold it (an
    // empty queue must not admit what it cannot cover).
    const Json* current_spec =
        current != nullptr && current->contains("spec") ? &(*current)["spec"] : nullptr;
    const bool had_groups =
        current_spec != nullptr && !current_spec->value("resourceGroups", Json::array()).empty();
    const int64_t busy = current == nullptr ? 0 : WorkloadsHeld(*current);
    if (had_groups && busy > 0 && settings_.drain_when_no_flavors) {
      groups = (*current_spec)["resourceGroups"];
      stop = "HoldAndDrain";
    } else {
      // Nothing left to drain: held with empty groups until flavors return.
      stop = "Hold";
      annotations[kEmptyPlanHold] = "true";
    }
  }
  if (deleting) stop = "HoldAndDrain";
  Json queue_spec = {
      {"namespaceSelector", Json::object()}, {"resourceGroups", groups}, {"stopPolicy", stop}};
  if (accelerated && check_active && settings_.derived_from_node) {
    queue_spec["admissionChecksStrategy"] = {
        {"admissionChecks", Json::array({{{"name", kNodeDevicesCheck}}})}};
  }
  Json meta = {{"name", name}, {"labels", labels}};
  if (!annotations.empty()) meta["annotations"] = annotations;
  return {
      {"apiVersion", kKueue}, {"kind", "ClusterQueue"}, {"metadata", meta}, {"spec", queue_spec}};
}

Json Fleet::RenderNodeLabels(const NodeFacts& n) const {
  Json labels = Json::object();
  if (n.stamp_managed) labels[kManagedLabel] = "true";
  labels[std::string(kGeneralPrefix) + n.gkey] = "true";
  labels[std::string(kGeneralPrefix) + n.gkey + ".count"] = std::to_string(n.cores);
  labels[std::string(kGeneralPrefix) + n.cpu_vendor] = "true";
  if (!settings_.mixed_on_node && !n.accelerated()) labels[kCpuOnlyLabel] = "true";
  if (n.managed && n.ledger) {
    for (const auto& [key, value] : ledger::FitLabels(*n.ledger))
      labels[key] = std::to_string(value);
  }
  return {
      {"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", n.name}, {"labels", labels}}}};
}

Json Fleet::RenderNodeCapacity(const NodeFacts& n) const {
  Json capacity = Json::object();
  if (n.managed && n.ledger) {
    std::set<std::string> present;
    for (const ledger::Group& g : n.ledger->spec().groups) present.insert(g.manufacturer);
    for (const std::string& m : present) {
      auto it = manufacturers_.find(m);
      if (it == manufacturers_.end()) continue;  // no plugin names its resources here
      const std::string& base = it->second.base;
      auto pool = [&](const std::string& suffix) {
        auto c = n.capacity.find(base + suffix);
        return c != n.capacity.end() && c->second > 0;
      };
      for (const auto& [key, value] : ledger::CountingKeys(*n.ledger, it->second.Kind())) {
        const bool sliced = key.rfind(base + ".sliced.", 0) == 0;
        if (sliced ? !pool(".sliced") : !pool(".partitioned")) continue;
        capacity[key] = kube::FormatDecimal(value);
      }
    }
  }
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", n.name}}},
          {"status", {{"capacity", capacity}}}};
}

namespace {
int64_t RequestOf(const Json& container) {
  const Json& resources = container.value("resources", Json::object());
  const Json& requests = resources.value("requests", Json::object());
  if (requests.contains("cpu")) return kube::MilliOf(requests["cpu"]).value_or(0);
  // A limit without a request is also the request.
  const Json& limits = resources.value("limits", Json::object());
  return limits.contains("cpu") ? kube::MilliOf(limits["cpu"]).value_or(0) : 0;
}
}  // namespace

int64_t PodCpuMillicores(const Json& pod) {
  const Json& spec = pod.value("spec", Json::object());
  int64_t apps = 0, sidecars = 0, largest_init = 0;
  for (const Json& c : spec.value("containers", Json::array())) apps += RequestOf(c);
  for (const Json& c : spec.value("initContainers", Json::array())) {
    if (c.value("restartPolicy", "") == "Always") {
      sidecars += RequestOf(c);
    } else {
      largest_init = std::max(largest_init, sidecars + RequestOf(c));
    }
  }
  return std::max(apps + sidecars, largest_init);
}

int64_t WorkloadsHeld(const Json& cluster_queue) {
  const Json& status = JsonAt(cluster_queue, {"status"});
  if (!status.is_object()) return 0;
  return status.value("reservingWorkloads", int64_t{0}) +
         status.value("admittedWorkloads", int64_t{0});
}

Json RenderLocalQueue(const std::string& ns, const std::string& cluster_queue) {
  return {{"apiVersion", kKueue},
          {"kind", "LocalQueue"},
          {"metadata",
           {{"name", EntranceName(cluster_queue)},
            {"namespace", ns},
            {"labels", {{kTypeLabel, "entrances"}, {kPartOfLabel, kPartOf}}},
            {"annotations", {{kQueueAnnotation, cluster_queue}}}}},
          {"spec", {{"clusterQueue", cluster_queue}}}};
}

Json RenderAdmissionCheck() {
  return {{"apiVersion", kKueue},
          {"kind", "AdmissionCheck"},
          {"metadata", {{"name", kNodeDevicesCheck}, {"labels", {{kPartOfLabel, kPartOf}}}}},
          {"spec", {{"controllerName", kNodeDevicesController}}}};
}

bool WorkerOwnsNodeLabel(std::string_view key) {
  return key.rfind(kGeneralPrefix, 0) == 0 ||
         key.rfind("sliced-max-free-units.fit.gpustack.ai/", 0) == 0 ||
         key.rfind("shared-free-cards.fit.gpustack.ai/", 0) == 0 ||
         key.rfind("shared-max-free-slots.fit.gpustack.ai/", 0) == 0 || key == kManagedLabel ||
         key == kCpuOnlyLabel;
}

std::string Difference(const Json& actual, const Json& desired, const std::string& path) {
  if (desired.is_object()) {
    if (!actual.is_object()) return path + ": not an object";
    for (const auto& [key, value] : desired.items()) {
      // Items of a list of built-in kinds come without apiVersion and kind.
      if (path == "$" && (key == "apiVersion" || key == "kind")) continue;
      auto it = actual.find(key);
      if (it == actual.end()) {
        // An empty map or list the server dropped is the same as absent.
        if ((value.is_object() || value.is_array()) && value.empty()) continue;
        return path + "." + key + ": absent";
      }
      if (std::string d = Difference(*it, value, path + "." + key); !d.empty()) return d;
    }
    return {};
  }
  if (desired.is_array()) {
    if (!actual.is_array() || actual.size() != desired.size())
      return path + ": " + std::to_string(actual.size()) + " items, want " +
             std::to_string(desired.size());
    for (size_t i = 0; i < desired.size(); ++i) {
      if (std::string d = Difference(actual[i], desired[i], path + "[" + std::to_string(i) + "]");
          !d.empty())
        return d;
    }
    return {};
  }
  if (Equal(actual, desired)) return {};
  return path + ": " + actual.dump() + ", want " + desired.dump();
}

bool Covers(const Json& actual, const Json& desired) { return Difference(actual, desired).empty(); }

}  // namespace gpustack::op
