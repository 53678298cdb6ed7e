#include "host/ledger/model.h"

#include <algorithm>
#include <limits>
#include <map>

namespace gpustack::ledger {
namespace {

using nlohmann::json;

// Reads typed fields and remembers the first problem with its JSON path.
class Reader {
 public:
  std::string problem;

  bool Object(const json& j, const std::string& path) {
    if (j.is_object()) return true;
    Fail(path, "must be an object");
    return false;
  }
  template <class T>
  void Uint(const json& j, const char* key, const std::string& path, T& out,
            bool required = false) {
    auto it = j.find(key);
    if (it == j.end()) {
      if (required) Fail(path + "." + key, "is required");
      return;
    }
    // JSON has one kind of integer: a parser may read 81920 as signed (a YAML round trip does),
    // so any non-negative integer counts.
    const bool non_negative =
        it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() >= 0);
    if (!non_negative || it->get<uint64_t>() > std::numeric_limits<T>::max()) {
      Fail(path + "." + key, "must be a non-negative integer, got " + it->dump());
      return;
    }
    out = static_cast<T>(it->get<uint64_t>());
  }
  void Int64(const json& j, const char* key, const std::string& path, int64_t& out) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_number_integer()) {
      Fail(path + "." + key, "must be an integer, got " + it->dump());
      return;
    }
    out = it->get<int64_t>();
  }
  void Int32(const json& j, const char* key, const std::string& path, int32_t& out) {
    int64_t value = out;
    Int64(j, key, path, value);
    if (value < std::numeric_limits<int32_t>::min() ||
        value > std::numeric_limits<int32_t>::max()) {
      Fail(path + "." + key, "is out of range");
      return;
    }
    out = static_cast<int32_t>(value);
  }
  void String(const json& j, const char* key, const std::string& path, std::string& out,
              bool required = false) {
    auto it = j.find(key);
    if (it == j.end()) {
      if (required) Fail(path + "." + key, "is required");
      return;
    }
    if (!it->is_string()) {
      Fail(path + "." + key, "must be a string, got " + it->dump());
      return;
    }
    out = it->get<std::string>();
  }
  void Bool(const json& j, const char* key, const std::string& path, bool& out) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_boolean()) {
      Fail(path + "." + key, "must be true or false, got " + it->dump());
      return;
    }
    out = it->get<bool>();
  }
  // Calls read(element, element_path) for each element of the array at `key`.
  template <class Fn>
  void Array(const json& j, const char* key, const std::string& path, Fn read) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return;
    if (!it->is_array()) {
      Fail(path + "." + key, "must be an array");
      return;
    }
    for (size_t i = 0; i < it->size() && problem.empty(); ++i) {
      read((*it)[i], path + "." + key + "[" + std::to_string(i) + "]");
    }
  }
  void Fail(const std::string& path, const std::string& what) {
    if (problem.empty()) problem = path + ": " + what;
  }
};

json ProfileCounts(const std::vector<ProfileCount>& counts) {
  json out = json::array();
  for (const ProfileCount& c : counts) out.push_back({{"name", c.name}, {"count", c.count}});
  return out;
}

void ReadProfileCounts(Reader& r, const json& j, const char* key, const std::string& path,
                       std::vector<ProfileCount>& out) {
  r.Array(j, key, path, [&](const json& e, const std::string& p) {
    if (!r.Object(e, p)) return;
    ProfileCount c;
    r.String(e, "name", p, c.name, true);
    r.Uint(e, "count", p, c.count);
    out.push_back(c);
  });
}

Mode ReadMode(Reader& r, const json& j, const std::string& path) {
  uint32_t mode = 0;
  r.Uint(j, "mode", path, mode);
  if (mode > static_cast<uint32_t>(Mode::kPartitioned)) {
    r.Fail(path + ".mode", std::to_string(mode) + " is not 0..4 (None..Partitioned)");
    return Mode::kNone;
  }
  return static_cast<Mode>(mode);
}

}  // namespace

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kExclusive:
      return "Exclusive";
    case Mode::kShared:
      return "Shared";
    case Mode::kSliced:
      return "Sliced";
    case Mode::kPartitioned:
      return "Partitioned";
    case Mode::kNone:
      break;
  }
  return "None";
}

const char* ModeKey(Mode mode) {
  switch (mode) {
    case Mode::kExclusive:
      return "exclusive";
    case Mode::kShared:
      return "shared";
    case Mode::kSliced:
      return "sliced";
    case Mode::kPartitioned:
      return "partitioned";
    case Mode::kNone:
      break;
  }
  return "none";
}

const PartitionProfile* Accelerator::FindProfile(const std::string& name) const {
  for (const PartitionProfile& p : profiles) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

uint32_t Accelerator::PhysicalCount() const {
  uint32_t count = 0;
  for (const PartitionProfile& p : profiles) count = std::max(count, p.count);
  return count;
}

SlicedDetail SlicedDetailOf(const Group& group) {
  SlicedDetail detail;
  std::map<std::string, uint32_t> per_profile;
  for (const Accelerator& a : group.accelerators) {
    if (a.sliceable()) {
      detail.logical_count += a.logical_count;
      detail.cores_percentage_overcommit |= a.cores_percentage_overcommit;
    }
    for (const PartitionProfile& p : a.profiles) per_profile[p.name] += p.count;
    detail.physical_count += a.PhysicalCount();
  }
  for (const auto& [name, count] : per_profile) detail.physical_profiles.push_back({name, count});
  return detail;
}

Status ValidateSpec(const DevicesSpec& spec) {
  std::map<std::string, std::string> seen;  // card id -> where
  for (size_t gi = 0; gi < spec.groups.size(); ++gi) {
    const Group& g = spec.groups[gi];
    for (size_t ai = 0; ai < g.accelerators.size(); ++ai) {
      const Accelerator& a = g.accelerators[ai];
      const std::string path =
          "spec.groups[" + std::to_string(gi) + "].accelerators[" + std::to_string(ai) + "]";
      if (a.id.empty()) return Error{path + ".id: is required"};
      if (auto [it, added] = seen.emplace(a.id, path); !added) {
        return Error{path + ".id: \"" + a.id + "\" is also the id of " + it->second};
      }
      for (size_t pi = 0; pi < a.profiles.size(); ++pi) {
        const PartitionProfile& p = a.profiles[pi];
        const std::string pp = path + ".status.physicalSliced.profiles[" + std::to_string(pi) + "]";
        if (p.memory_mib == 0) return Error{pp + ".memoryMib: must be positive"};
        if (p.placements.empty())
          return Error{pp + ".placements: a profile needs a legal placement"};
        for (size_t li = 0; li < p.placements.size(); ++li) {
          const Placement& pl = p.placements[li];
          const std::string lp = pp + ".placements[" + std::to_string(li) + "]";
          if (pl.length == 0 || pl.length != p.memory_slices) {
            return Error{lp + ".length: must equal the profile's memorySlices (" +
                         std::to_string(p.memory_slices) + ")"};
          }
          if (uint64_t{pl.start} + pl.length > 64) {
            return Error{lp + ": must lie within 64 memory slices"};
          }
          if (li > 0 && p.placements[li - 1].start >= pl.start) {
            return Error{lp + ".start: placements must be sorted by start, without repeats"};
          }
        }
      }
    }
  }
  return Ok{};
}

json ToJson(const DevicesSpec& spec) {
  json groups = json::array();
  for (const Group& g : spec.groups) {
    json accelerators = json::array();
    for (const Accelerator& a : g.accelerators) {
      json profiles = json::array();
      for (const PartitionProfile& p : a.profiles) {
        json placements = json::array();
        for (const Placement& pl : p.placements) {
          placements.push_back({{"start", pl.start}, {"length", pl.length}});
        }
        profiles.push_back({{"name", p.name},
                            {"memoryMib", p.memory_mib},
                            {"computeSlices", p.compute_slices},
                            {"memorySlices", p.memory_slices},
                            {"count", p.count},
                            {"placements", placements}});
      }
      accelerators.push_back(
          {{"id", a.id},
           {"index", a.index},
           {"physicalIndexes", a.physical_indexes},
           {"topology",
            {{"pciBusId", a.topology.pci_bus_id},
             {"pciRootId", a.topology.pci_root_id},
             {"pciClass", a.topology.pci_class},
             {"numaAffinity", a.topology.numa_affinity},
             {"cpuAffinity", a.topology.cpu_affinity}}},
           {"status",
            {{"unhealthy", a.unhealthy},
             {"logicalSliced",
              {{"coresPercentageOvercommit", a.cores_percentage_overcommit},
               {"count", a.logical_count}}},
             {"physicalSliced", {{"profiles", profiles}, {"count", a.PhysicalCount()}}}}}});
    }
    const SlicedDetail detail = SlicedDetailOf(g);
    groups.push_back({{"id", g.id},
                      {"manufacturer", g.manufacturer},
                      {"name", g.name},
                      {"memory", g.memory},
                      {"cores", g.cores},
                      {"driverVersion", g.driver_version},
                      {"runtimeVersion", g.runtime_version},
                      {"computeCapability", g.compute_capability},
                      {"family", g.family},
                      {"accelerators", accelerators},
                      {"acceleratorSlicedDetail",
                       {{"logical",
                         {{"coresPercentageOvercommit", detail.cores_percentage_overcommit},
                          {"count", detail.logical_count}}},
                        {"physical",
                         {{"profiles", ProfileCounts(detail.physical_profiles)},
                          {"count", detail.physical_count}}}}}});
  }
  return {{"groups", groups}};
}

Result<DevicesSpec> SpecFromJson(const json& j) {
  Reader r;
  DevicesSpec spec;
  if (!r.Object(j, "spec")) return Error{r.problem};
  r.Array(j, "groups", "spec", [&](const json& gj, const std::string& gp) {
    if (!r.Object(gj, gp)) return;
    Group g;
    r.String(gj, "id", gp, g.id, true);
    r.String(gj, "manufacturer", gp, g.manufacturer, true);
    r.String(gj, "name", gp, g.name);
    r.Uint(gj, "memory", gp, g.memory);
    r.Uint(gj, "cores", gp, g.cores);
    r.String(gj, "driverVersion", gp, g.driver_version);
    r.String(gj, "runtimeVersion", gp, g.runtime_version);
    r.String(gj, "computeCapability", gp, g.compute_capability);
    r.String(gj, "family", gp, g.family);
    r.Array(gj, "accelerators", gp, [&](const json& aj, const std::string& ap) {
      if (!r.Object(aj, ap)) return;
      Accelerator a;
      r.String(aj, "id", ap, a.id, true);
      r.Uint(aj, "index", ap, a.index);
      r.Array(aj, "physicalIndexes", ap, [&](const json& e, const std::string& p) {
        const bool non_negative =
            e.is_number_unsigned() || (e.is_number_integer() && e.get<int64_t>() >= 0);
        if (!non_negative || e.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
          r.Fail(p, "must be a non-negative integer, got " + e.dump());
          return;
        }
        a.physical_indexes.push_back(e.get<uint32_t>());
      });
      if (auto t = aj.find("topology"); t != aj.end() && r.Object(*t, ap + ".topology")) {
        const std::string tp = ap + ".topology";
        r.String(*t, "pciBusId", tp, a.topology.pci_bus_id);
        r.String(*t, "pciRootId", tp, a.topology.pci_root_id);
        r.String(*t, "pciClass", tp, a.topology.pci_class);
        r.Int32(*t, "numaAffinity", tp, a.topology.numa_affinity);
        r.String(*t, "cpuAffinity", tp, a.topology.cpu_affinity);
      }
      if (auto s = aj.find("status"); s != aj.end() && r.Object(*s, ap + ".status")) {
        const std::string sp = ap + ".status";
        r.Bool(*s, "unhealthy", sp, a.unhealthy);
        if (auto l = s->find("logicalSliced");
            l != s->end() && r.Object(*l, sp + ".logicalSliced")) {
          r.Bool(*l, "coresPercentageOvercommit", sp + ".logicalSliced",
                 a.cores_percentage_overcommit);
          r.Uint(*l, "count", sp + ".logicalSliced", a.logical_count);
        }
        if (auto ph = s->find("physicalSliced");
            ph != s->end() && r.Object(*ph, sp + ".physicalSliced")) {
          r.Array(*ph, "profiles", sp + ".physicalSliced",
                  [&](const json& pj, const std::string& pp) {
                    if (!r.Object(pj, pp)) return;
                    PartitionProfile p;
                    r.String(pj, "name", pp, p.name, true);
                    r.Uint(pj, "memoryMib", pp, p.memory_mib);
                    r.Uint(pj, "computeSlices", pp, p.compute_slices);
                    r.Uint(pj, "memorySlices", pp, p.memory_slices);
                    r.Uint(pj, "count", pp, p.count);
                    r.Array(pj, "placements", pp, [&](const json& lj, const std::string& lp) {
                      if (!r.Object(lj, lp)) return;
                      Placement pl;
                      r.Uint(lj, "start", lp, pl.start, true);
                      r.Uint(lj, "length", lp, pl.length, true);
                      p.placements.push_back(pl);
                    });
                    a.profiles.push_back(std::move(p));
                  });
        }
      }
      g.accelerators.push_back(std::move(a));
    });
    spec.groups.push_back(std::move(g));
  });
  if (!r.problem.empty()) return Error{r.problem};
  if (auto valid = ValidateSpec(spec); !valid) return Error{valid.error()};
  return spec;
}

json ToJson(const DevicesStatus& status) {
  json groups = json::array();
  for (const AllocationGroup& g : status.groups) {
    json accelerators = json::array();
    for (const AcceleratorAllocation& a : g.accelerators) {
      accelerators.push_back({{"id", a.id},
                              {"index", a.index},
                              {"mode", static_cast<uint32_t>(a.mode)},
                              {"allocated", a.allocated},
                              {"remaining", a.remaining},
                              {"allocatedProfiles", ProfileCounts(a.allocated_profiles)},
                              {"remainingProfiles", ProfileCounts(a.remaining_profiles)},
                              {"allocatedSlices", a.allocated_slices}});
    }
    groups.push_back(
        {{"id", g.id}, {"manufacturer", g.manufacturer}, {"accelerators", accelerators}});
  }
  return {{"groups", groups}};
}

Result<DevicesStatus> StatusFromJson(const json& j) {
  Reader r;
  DevicesStatus status;
  if (!r.Object(j, "status")) return Error{r.problem};
  r.Array(j, "groups", "status", [&](const json& gj, const std::string& gp) {
    if (!r.Object(gj, gp)) return;
    AllocationGroup g;
    r.String(gj, "id", gp, g.id, true);
    r.String(gj, "manufacturer", gp, g.manufacturer, true);
    r.Array(gj, "accelerators", gp, [&](const json& aj, const std::string& ap) {
      if (!r.Object(aj, ap)) return;
      AcceleratorAllocation a;
      r.String(aj, "id", ap, a.id, true);
      r.Uint(aj, "index", ap, a.index);
      a.mode = ReadMode(r, aj, ap);
      r.Int64(aj, "allocated", ap, a.allocated);
      r.Int64(aj, "remaining", ap, a.remaining);
      ReadProfileCounts(r, aj, "allocatedProfiles", ap, a.allocated_profiles);
      ReadProfileCounts(r, aj, "remainingProfiles", ap, a.remaining_profiles);
      r.Uint(aj, "allocatedSlices", ap, a.allocated_slices);
      g.accelerators.push_back(std::move(a));
    });
    status.groups.push_back(std::move(g));
  });
  if (!r.problem.empty()) return Error{r.problem};
  return status;
}

json ToJson(const Allocation& allocation) {
  json charges = json::array();
  for (const Charge& c : allocation.charges) {
    json entry{{"id", c.accelerator_id},
               {"mode", static_cast<uint32_t>(c.mode)},
               {"allocated", c.credits}};
    if (c.mode == Mode::kShared) entry["sharedSlots"] = c.shared_slots;
    if (c.mode == Mode::kSliced) entry["coresPercentage"] = c.cores_percentage;
    if (c.mode == Mode::kPartitioned) {
      entry["allocatedPhysicalProfile"] = c.profile;
      entry["allocatedPhysicalPlacements"] =
          json::array({{{"start", c.placement.start}, {"length", c.placement.length}}});
    }
    charges.push_back(std::move(entry));
  }
  return {{"podUID", allocation.owner.pod_uid},
          {"container", allocation.owner.container},
          {"accelerators", charges}};
}

Result<Allocation> AllocationFromJson(const json& j) {
  Reader r;
  Allocation allocation;
  if (!r.Object(j, "allocation")) return Error{r.problem};
  r.String(j, "podUID", "allocation", allocation.owner.pod_uid, true);
  r.String(j, "container", "allocation", allocation.owner.container, true);
  r.Array(j, "accelerators", "allocation", [&](const json& cj, const std::string& cp) {
    if (!r.Object(cj, cp)) return;
    Charge c;
    r.String(cj, "id", cp, c.accelerator_id, true);
    c.mode = ReadMode(r, cj, cp);
    r.Int64(cj, "allocated", cp, c.credits);
    if (c.credits <= 0 || c.credits > kCardCredits) {
      r.Fail(cp + ".allocated", "must be 1.." + std::to_string(kCardCredits));
    }
    r.Uint(cj, "sharedSlots", cp, c.shared_slots);
    r.Uint(cj, "coresPercentage", cp, c.cores_percentage);
    r.String(cj, "allocatedPhysicalProfile", cp, c.profile);
    r.Array(cj, "allocatedPhysicalPlacements", cp, [&](const json& lj, const std::string& lp) {
      if (!r.Object(lj, lp)) return;
      if (c.placement.length != 0) r.Fail(lp, "a charge holds one placement");
      r.Uint(lj, "start", lp, c.placement.start, true);
      r.Uint(lj, "length", lp, c.placement.length, true);
    });
    // Each mode carries exactly its own fields, so what is read is what will be written back.
    switch (c.mode) {
      case Mode::kNone:
        r.Fail(cp + ".mode", "an allocation cannot be mode None");
        break;
      case Mode::kExclusive:
        if (c.credits != kCardCredits) r.Fail(cp + ".allocated", "an exclusive card is 1600000");
        break;
      case Mode::kShared:
        if (c.shared_slots == 0 || c.shared_slots > kSharedSlots ||
            c.credits != c.shared_slots * kSharedSlotCredits) {
          r.Fail(cp + ".sharedSlots", "must be 1..10, and allocated 160000 per slot");
        }
        break;
      case Mode::kSliced:
        if (c.cores_percentage == 0 || c.cores_percentage > 100) {
          r.Fail(cp + ".coresPercentage", "must be 1..100 for a slice");
        }
        break;
      case Mode::kPartitioned:
        if (c.profile.empty() || c.placement.length == 0) {
          r.Fail(cp + ".allocatedPhysicalProfile", "a partition needs a profile and one placement");
        }
        break;
    }
    const bool stray =
        (c.mode != Mode::kShared && c.shared_slots != 0) ||
        (c.mode != Mode::kSliced && c.cores_percentage != 0) ||
        (c.mode != Mode::kPartitioned && (!c.profile.empty() || c.placement.length != 0));
    if (stray)
      r.Fail(cp, std::string("carries fields that a ") + ModeName(c.mode) + " charge has not");
    allocation.charges.push_back(std::move(c));
  });
  if (!r.problem.empty()) return Error{r.problem};
  return allocation;
}

}  // namespace gpustack::ledger
