// A fake NVML: exports NVML's C functions (under FAKE_PREFIX: nvml for NVIDIA and Iluvatar, hgml
// for T-Head) and answers from the fixture section FAKE_SECTION. MIG GPU and compute instances are
// created and destroyed in memory, with the driver's placement and overlap rules.
//
// Fixture section:
//   driver_version, cuda_driver_version, errors (see fake_fixture.h),
//   profile_sets: {name: [{index, id, name, slices, instances, memory_mb, placements: [[s, n]]}]}
//   devices: [{name, uuid, bus_id, minor, memory_mib (physical), reserved_mib, used_mib, gpu_util,
//   mem_util, temperature,
//              power_mw, architecture, cc: [maj, min], cores, lost,
//              mig: {current, pending, profiles: <set>, instances: [{index, start}]},
//              processes: [{pid, used_mib, sm_util, gi}]}]
//   (GPUSTACK_FAKE_PROCESSES overrides a card's processes by uuid: see fake_fixture.h)
#include <gpustack_support/nvml_api.h>

#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_fixture.h"

#define FAKE_CAT2(a, b) a##b
#define FAKE_CAT(a, b) FAKE_CAT2(a, b)
#define FN(name) FAKE_CAT(FAKE_PREFIX, name)
#define EXPORT extern "C" __attribute__((visibility("default")))

namespace nv = gpustack::support::nvml;
using nlohmann::json;

struct nv::DeviceOpaque {};
struct nv::GpuInstanceOpaque {};
struct nv::ComputeInstanceOpaque {};
struct nv::EventSetOpaque {};

namespace {

constexpr unsigned kMaxMigDevices = 7;
const unsigned kCiSlices[] = {1, 2, 3, 4, 7, 8, 6};  // compute profile index -> slices

struct Card;
struct Gi;
struct Ci : nv::ComputeInstanceOpaque {
  Gi* gi = nullptr;
  unsigned id = 0;
  unsigned profile = 0;
};
struct Gi : nv::GpuInstanceOpaque {
  Card* card = nullptr;
  unsigned id = 0;
  json profile;
  unsigned start = 0;
  unsigned size = 0;
  std::list<Ci> cis;
};
// Both a card and a MIG device are an nvmlDevice_t.
struct Handle : nv::DeviceOpaque {
  Card* card = nullptr;
  Ci* ci = nullptr;  // set for a MIG device
};
struct Card {
  json spec;
  Handle handle;
  unsigned mig_current = 0;
  unsigned mig_pending = 0;
  json profiles = json::array();
  std::list<Gi> gis;
  std::list<Handle> mig_handles;
};

struct State {
  std::mutex mu;
  int init_count = 0;
  json section;
  fake::Injector injector;
  std::list<Card> cards;
} g;

nv::Return Inject(const char* function) { return g.injector.Check(function); }

Card* CardOf(nv::Device device) {
  auto* h = static_cast<Handle*>(device);
  return h == nullptr || h->ci != nullptr ? nullptr : h->card;
}

// NVML refuses a buffer too small for the string (INSUFFICIENT_SIZE), it never truncates.
nv::Return CopyString(const std::string& value, char* out, unsigned length) {
  if (length <= value.size()) return nv::kErrorInsufficientSize;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return nv::kSuccess;
}

const json* Profile(const Card& card, unsigned key, const char* field) {
  for (const json& p : card.profiles) {
    if (p.value(field, ~0u) == key) return &p;
  }
  return nullptr;
}

std::vector<std::pair<unsigned, unsigned>> Placements(const json& profile) {
  std::vector<std::pair<unsigned, unsigned>> out;
  for (const json& p : profile.value("placements", json::array())) out.emplace_back(p[0], p[1]);
  return out;
}

unsigned LowestFreeGiId(const Card& card) {
  for (unsigned id = 1;; ++id) {
    if (std::none_of(card.gis.begin(), card.gis.end(), [&](const Gi& gi) { return gi.id == id; })) {
      return id;
    }
  }
}

nv::Return CreateGi(Card& card, const json& profile, unsigned start, unsigned size, Gi** out) {
  const auto legal = Placements(profile);
  if (std::find(legal.begin(), legal.end(), std::make_pair(start, size)) == legal.end()) {
    return nv::kErrorInvalidArgument;
  }
  unsigned same = 0;
  for (const Gi& gi : card.gis) {
    if (start < gi.start + gi.size && gi.start < start + size)
      return nv::kErrorInsufficientResources;
    same += gi.profile.value("id", ~0u) == profile.value("id", ~1u) ? 1 : 0;
  }
  if (same >= profile.value("instances", 0u)) return nv::kErrorInsufficientResources;
  Gi& gi = card.gis.emplace_back();
  gi.card = &card;
  gi.id = LowestFreeGiId(card);
  gi.profile = profile;
  gi.start = start;
  gi.size = size;
  *out = &gi;
  return nv::kSuccess;
}

void Load() {
  g.cards.clear();
  const json sets = g.section.value("profile_sets", json::object());
  for (const json& spec : g.section.value("devices", json::array())) {
    Card& card = g.cards.emplace_back();
    card.spec = spec;
    card.handle.card = &card;
    const json mig = spec.value("mig", json::object());
    card.mig_current = mig.value("current", 0u);
    card.mig_pending = mig.value("pending", card.mig_current);
    if (mig.contains("profiles")) card.profiles = sets.at(mig["profiles"].get<std::string>());
    for (const json& existing : mig.value("instances", json::array())) {
      const json* profile = Profile(card, existing.at("index"), "index");
      Gi* gi = nullptr;
      if (profile != nullptr &&
          CreateGi(card, *profile, existing.at("start"), Placements(*profile).front().second,
                   &gi) == nv::kSuccess) {
        gi->cis.push_back(Ci{{}, gi, 0, 0});
      }
    }
  }
}

std::string MigUuid(const Ci& ci) {
  const std::string parent = ci.gi->card->spec.value("uuid", "");
  // Derived from the card and the instance ids, as the driver's name-based (version 5) MIG
  // UUIDs appear to be: the same shape recreated at the same place gets the same UUID.
  return "MIG-" + parent.substr(parent.find('-') + 1, 8) + "-gi" + std::to_string(ci.gi->id) +
         "-ci" + std::to_string(ci.id);
}

// Every compute instance of a card, as MIG devices in a stable order.
std::vector<Ci*> MigDevices(Card& card) {
  std::vector<Ci*> out;
  for (Gi& gi : card.gis) {
    for (Ci& ci : gi.cis) out.push_back(&ci);
  }
  std::sort(out.begin(), out.end(), [](const Ci* a, const Ci* b) {
    return std::tie(a->gi->id, a->id) < std::tie(b->gi->id, b->id);
  });
  return out;
}

}  // namespace

#define GUARD(function)                                \
  std::lock_guard<std::mutex> lock(g.mu);              \
  if (g.init_count == 0) return 1; /* UNINITIALIZED */ \
  if (nv::Return injected = Inject(function)) return injected

EXPORT nv::Return FN(Init)() {
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count == 0) {
    if (!fake::LoadSection(FAKE_SECTION, &g.section)) return 9;  // DRIVER_NOT_LOADED
    g.injector.Reset(g.section);
    if (nv::Return injected = Inject("Init")) return injected;
    Load();
  }
  ++g.init_count;
  return nv::kSuccess;
}
#ifndef FAKE_UNVERSIONED
EXPORT nv::Return FN(Init_v2)() { return FN(Init)(); }
#endif

EXPORT nv::Return FN(Shutdown)() {
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count == 0) return 1;
  if (--g.init_count == 0) g.cards.clear();
  return nv::kSuccess;
}

EXPORT const char* FN(ErrorString)(nv::Return r) {
  switch (r) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 6:
      return "Not Found";
    case 7:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    case 15:
      return "GPU is lost";
    case 19:
      return "In use by another client";
    case 23:
      return "Insufficient resources";
    default:
      return "Unknown Error";
  }
}

EXPORT nv::Return FN(SystemGetDriverVersion)(char* version, unsigned length) {
  GUARD("SystemGetDriverVersion");
  if (!g.section.contains("driver_version")) return nv::kErrorNotSupported;
  return CopyString(g.section["driver_version"], version, length);
}

EXPORT nv::Return FN(SystemGetCudaDriverVersion)(int* version) {
  GUARD("SystemGetCudaDriverVersion");
  if (!g.section.contains("cuda_driver_version")) return nv::kErrorNotSupported;
  *version = g.section["cuda_driver_version"];
  return nv::kSuccess;
}
#ifndef FAKE_UNVERSIONED
EXPORT nv::Return FN(SystemGetCudaDriverVersion_v2)(int* version) {
  return FN(SystemGetCudaDriverVersion)(version);
}
#endif

EXPORT nv::Return FN(DeviceGetCount)(unsigned* count) {
  GUARD("DeviceGetCount");
  *count = static_cast<unsigned>(g.cards.size());
  return nv::kSuccess;
}
#ifndef FAKE_UNVERSIONED
EXPORT nv::Return FN(DeviceGetCount_v2)(unsigned* count) { return FN(DeviceGetCount)(count); }
#endif

EXPORT nv::Return FN(DeviceGetHandleByIndex)(unsigned index, nv::Device* device) {
  GUARD("DeviceGetHandleByIndex");
  if (index >= g.cards.size()) return nv::kErrorInvalidArgument;
  Card& card = *std::next(g.cards.begin(), index);
  if (card.spec.value("lost", false)) return nv::kErrorGpuIsLost;
  *device = &card.handle;
  return nv::kSuccess;
}
#ifndef FAKE_UNVERSIONED
EXPORT nv::Return FN(DeviceGetHandleByIndex_v2)(unsigned index, nv::Device* device) {
  return FN(DeviceGetHandleByIndex)(index, device);
}
#endif

EXPORT nv::Return FN(DeviceGetName)(nv::Device device, char* name, unsigned length) {
  GUARD("DeviceGetName");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  return CopyString(card->spec.value("name", ""), name, length);
}

EXPORT nv::Return FN(DeviceGetUUID)(nv::Device device, char* uuid, unsigned length) {
  GUARD("DeviceGetUUID");
  auto* h = static_cast<Handle*>(device);
  if (h == nullptr) return nv::kErrorInvalidArgument;
  return CopyString(h->ci != nullptr ? MigUuid(*h->ci) : h->card->spec.value("uuid", ""), uuid,
                    length);
}

// The current layout (_v3) carries the bus id at busId; the unversioned query fills NVML's first
// layout, whose 16-byte bus id sits where busIdLegacy is now, and nothing at busId.
static nv::Return PciInfo(nv::Device device, nv::PciInfo* pci, bool legacy) {
  GUARD("DeviceGetPciInfo");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  *pci = {};
  // NVML spells the domain with 8 digits and upper-case hex.
  std::string bus = card->spec.value("bus_id", "0000:00:00.0");
  for (char& c : bus) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (legacy) {
    CopyString(bus, pci->bus_id_legacy, sizeof pci->bus_id_legacy);
  } else {
    CopyString("0000" + bus, pci->bus_id, sizeof pci->bus_id);
    CopyString(bus.substr(5), pci->bus_id_legacy, sizeof pci->bus_id_legacy);
  }
  pci->pci_device_id = card->spec.value("pci_device_id", 0u);
  return nv::kSuccess;
}
EXPORT nv::Return FN(DeviceGetPciInfo)(nv::Device device, nv::PciInfo* pci) {
  return PciInfo(device, pci, true);
}
#ifndef FAKE_UNVERSIONED
EXPORT nv::Return FN(DeviceGetPciInfo_v3)(nv::Device device, nv::PciInfo* pci) {
  return PciInfo(device, pci, false);
}
#endif

EXPORT nv::Return FN(DeviceGetMinorNumber)(nv::Device device, unsigned* minor) {
  GUARD("DeviceGetMinorNumber");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  if (!card->spec.contains("minor")) return nv::kErrorNotSupported;
  *minor = card->spec["minor"];
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetMemoryInfo)(nv::Device device, nv::Memory* memory) {
  GUARD("DeviceGetMemoryInfo");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  if (card->spec.value("lost", false)) return nv::kErrorGpuIsLost;
  const unsigned long long mib = 1024ull * 1024ull;
  memory->total =
      (card->spec.value("memory_mib", 0ull) - card->spec.value("reserved_mib", 0ull)) * mib;
  memory->used = card->spec.value("used_mib", 0ull) * mib;
  memory->free = memory->total - memory->used;
  return nv::kSuccess;
}

#ifndef FAKE_UNVERSIONED
EXPORT nv::Return FN(DeviceGetMemoryInfo_v2)(nv::Device device, nv::MemoryV2* memory) {
  if (memory == nullptr || memory->version != nv::kMemoryV2Version) return 25;  // VERSION_MISMATCH
  nv::Memory v1{};
  if (const nv::Return r = FN(DeviceGetMemoryInfo)(device, &v1); r != nv::kSuccess) return r;
  std::lock_guard<std::mutex> lock(g.mu);
  memory->reserved = CardOf(device)->spec.value("reserved_mib", 0ull) * 1024ull * 1024ull;
  memory->total = v1.total + memory->reserved;
  memory->used = v1.used;
  memory->free = v1.free;
  return nv::kSuccess;
}
#endif

EXPORT nv::Return FN(DeviceGetCudaComputeCapability)(nv::Device device, int* major, int* minor) {
  GUARD("DeviceGetCudaComputeCapability");
  Card* card = CardOf(device);
  if (card == nullptr || !card->spec.contains("cc")) return nv::kErrorNotSupported;
  *major = card->spec["cc"][0];
  *minor = card->spec["cc"][1];
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetNumGpuCores)(nv::Device device, unsigned* cores) {
  GUARD("DeviceGetNumGpuCores");
  Card* card = CardOf(device);
  if (card == nullptr || !card->spec.contains("cores")) return nv::kErrorNotSupported;
  *cores = card->spec["cores"];
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetArchitecture)(nv::Device device, unsigned* architecture) {
  GUARD("DeviceGetArchitecture");
  Card* card = CardOf(device);
  if (card == nullptr || !card->spec.contains("architecture")) return nv::kErrorNotSupported;
  *architecture = card->spec["architecture"];
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetUtilizationRates)(nv::Device device, nv::Utilization* util) {
  GUARD("DeviceGetUtilizationRates");
  Card* card = CardOf(device);
  if (card == nullptr || !card->spec.contains("gpu_util")) return nv::kErrorNotSupported;
  util->gpu = card->spec["gpu_util"];
  util->memory = card->spec.value("mem_util", 0u);
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetTemperature)(nv::Device device, unsigned sensor, unsigned* value) {
  GUARD("DeviceGetTemperature");
  Card* card = CardOf(device);
  if (card == nullptr || sensor != nv::kTemperatureGpu || !card->spec.contains("temperature")) {
    return nv::kErrorNotSupported;
  }
  *value = card->spec["temperature"];
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetPowerUsage)(nv::Device device, unsigned* milliwatts) {
  GUARD("DeviceGetPowerUsage");
  Card* card = CardOf(device);
  if (card == nullptr || !card->spec.contains("power_mw")) return nv::kErrorNotSupported;
  *milliwatts = card->spec["power_mw"];
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetComputeRunningProcesses_v3)(nv::Device device, unsigned* count,
                                                          nv::ProcessInfo* infos) {
  GUARD("DeviceGetComputeRunningProcesses");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  if (const int code = fake::ProcessListingError(card->spec.value("uuid", "")); code != 0)
    return static_cast<nv::Return>(code);
  const json processes =
      fake::ProcessRows(card->spec.value("uuid", ""), card->spec.value("processes", json::array()));
  if (infos == nullptr || *count < processes.size()) {
    const bool empty = processes.empty();
    *count = static_cast<unsigned>(processes.size());
    return empty ? nv::kSuccess : nv::kErrorInsufficientSize;
  }
  *count = static_cast<unsigned>(processes.size());
  for (size_t i = 0; i < processes.size(); ++i) {
    // "unaccounted": NVML_VALUE_NOT_AVAILABLE, as under WDDM or in some containers.
    const unsigned long long used = processes[i].value("unaccounted", false)
                                        ? ~0ULL
                                        : processes[i].value("used_mib", 0ull) * 1024 * 1024;
    infos[i] = {processes[i].value("pid", 0u), used, processes[i].value("gi", nv::kNoInstance),
                processes[i].value("ci", nv::kNoInstance)};
  }
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetProcessUtilization)(nv::Device device,
                                                  nv::ProcessUtilizationSample* samples,
                                                  unsigned* count, unsigned long long) {
  GUARD("DeviceGetProcessUtilization");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  const json processes =
      fake::ProcessRows(card->spec.value("uuid", ""), card->spec.value("processes", json::array()));
  if (samples == nullptr || *count < processes.size()) {
    *count = static_cast<unsigned>(processes.size());
    return processes.empty() ? 21 /* NO_DATA */ : nv::kErrorInsufficientSize;
  }
  *count = static_cast<unsigned>(processes.size());
  for (size_t i = 0; i < processes.size(); ++i) {
    samples[i] = {processes[i].value("pid", 0u), 1, processes[i].value("sm_util", 0u), 0, 0, 0};
  }
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetMigMode)(nv::Device device, unsigned* current, unsigned* pending) {
  GUARD("DeviceGetMigMode");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  if (!card->spec.contains("mig")) return nv::kErrorNotSupported;
  *current = card->mig_current;
  *pending = card->mig_pending;
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetGpuInstanceProfileInfo)(nv::Device device, unsigned index,
                                                      nv::GpuInstanceProfileInfo* info) {
  GUARD("DeviceGetGpuInstanceProfileInfo");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  if (card->mig_current != 1) return nv::kErrorNotSupported;
  const json* p = Profile(*card, index, "index");
  if (p == nullptr) return nv::kErrorNotSupported;
  *info = {};
  info->id = (*p)["id"];
  info->slice_count = (*p)["slices"];
  info->instance_count = (*p)["instances"];
  info->memory_size_mb = (*p)["memory_mb"];
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetGpuInstanceProfileInfoV)(nv::Device device, unsigned index,
                                                       nv::GpuInstanceProfileInfoV2* info) {
  if (info == nullptr || info->version != nv::kGpuInstanceProfileInfoV2Version) return 25;
  nv::GpuInstanceProfileInfo v1{};
  const nv::Return r = FN(DeviceGetGpuInstanceProfileInfo)(device, index, &v1);
  if (r != nv::kSuccess) return r;
  std::lock_guard<std::mutex> lock(g.mu);
  const json* p = Profile(*CardOf(device), index, "index");
  info->id = v1.id;
  info->slice_count = v1.slice_count;
  info->instance_count = v1.instance_count;
  info->memory_size_mb = v1.memory_size_mb;
  return CopyString(p->value("name", ""), info->name, sizeof info->name);
}

EXPORT nv::Return FN(DeviceGetGpuInstancePossiblePlacements)(nv::Device device, unsigned id,
                                                             nv::GpuInstancePlacement* out,
                                                             unsigned* count) {
  GUARD("DeviceGetGpuInstancePossiblePlacements");
  Card* card = CardOf(device);
  if (card == nullptr || card->mig_current != 1) return nv::kErrorNotSupported;
  const json* p = Profile(*card, id, "id");
  if (p == nullptr) return nv::kErrorInvalidArgument;
  const auto placements = Placements(*p);
  if (out == nullptr) {
    *count = static_cast<unsigned>(placements.size());
    return nv::kSuccess;
  }
  if (*count < placements.size()) return nv::kErrorInsufficientSize;
  *count = static_cast<unsigned>(placements.size());
  for (size_t i = 0; i < placements.size(); ++i)
    out[i] = {placements[i].first, placements[i].second};
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceCreateGpuInstanceWithPlacement)(nv::Device device, unsigned id,
                                                           const nv::GpuInstancePlacement* where,
                                                           nv::GpuInstance* out) {
  GUARD("DeviceCreateGpuInstanceWithPlacement");
  Card* card = CardOf(device);
  if (card == nullptr || card->mig_current != 1) return nv::kErrorNotSupported;
  const json* p = Profile(*card, id, "id");
  if (p == nullptr || where == nullptr) return nv::kErrorInvalidArgument;
  Gi* gi = nullptr;
  const nv::Return r = CreateGi(*card, *p, where->start, where->size, &gi);
  if (r == nv::kSuccess) *out = gi;
  return r;
}

EXPORT nv::Return FN(DeviceGetGpuInstances)(nv::Device device, unsigned id, nv::GpuInstance* out,
                                            unsigned* count) {
  GUARD("DeviceGetGpuInstances");
  Card* card = CardOf(device);
  if (card == nullptr || card->mig_current != 1) return nv::kErrorNotSupported;
  unsigned n = 0;
  for (Gi& gi : card->gis) {
    if (gi.profile.value("id", ~0u) != id) continue;
    if (n >= *count) return nv::kErrorInsufficientSize;
    out[n++] = &gi;
  }
  *count = n;
  return nv::kSuccess;
}

EXPORT nv::Return FN(GpuInstanceGetInfo)(nv::GpuInstance instance, nv::GpuInstanceInfo* info) {
  GUARD("GpuInstanceGetInfo");
  auto* gi = static_cast<Gi*>(instance);
  if (gi == nullptr) return nv::kErrorInvalidArgument;
  *info = {&gi->card->handle, gi->id, gi->profile.value("id", 0u), {gi->start, gi->size}};
  return nv::kSuccess;
}

EXPORT nv::Return FN(GpuInstanceDestroy)(nv::GpuInstance instance) {
  GUARD("GpuInstanceDestroy");
  auto* gi = static_cast<Gi*>(instance);
  if (gi == nullptr) return nv::kErrorInvalidArgument;
  if (!gi->cis.empty()) return nv::kErrorInUse;  // compute instances must go first
  gi->card->gis.remove_if([&](const Gi& other) { return &other == gi; });
  return nv::kSuccess;
}

EXPORT nv::Return FN(GpuInstanceGetComputeInstanceProfileInfo)(
    nv::GpuInstance instance, unsigned index, unsigned engine,
    nv::ComputeInstanceProfileInfo* info) {
  GUARD("GpuInstanceGetComputeInstanceProfileInfo");
  auto* gi = static_cast<Gi*>(instance);
  if (gi == nullptr || engine != nv::kComputeEngineShared) return nv::kErrorInvalidArgument;
  if (index >= std::size(kCiSlices) || kCiSlices[index] > gi->profile.value("slices", 0u)) {
    return nv::kErrorNotSupported;
  }
  *info = {};
  info->id = index;
  info->slice_count = kCiSlices[index];
  info->instance_count = gi->profile.value("slices", 0u) / kCiSlices[index];
  return nv::kSuccess;
}

EXPORT nv::Return FN(GpuInstanceCreateComputeInstance)(nv::GpuInstance instance, unsigned id,
                                                       nv::ComputeInstance* out) {
  GUARD("GpuInstanceCreateComputeInstance");
  auto* gi = static_cast<Gi*>(instance);
  if (gi == nullptr || id >= std::size(kCiSlices)) return nv::kErrorInvalidArgument;
  unsigned used = 0;
  for (const Ci& ci : gi->cis) used += kCiSlices[ci.profile];
  if (used + kCiSlices[id] > gi->profile.value("slices", 0u))
    return nv::kErrorInsufficientResources;
  unsigned ci_id = 0;
  while (std::any_of(gi->cis.begin(), gi->cis.end(), [&](const Ci& c) { return c.id == ci_id; })) {
    ++ci_id;
  }
  Ci& ci = gi->cis.emplace_back();
  ci.gi = gi;
  ci.id = ci_id;
  ci.profile = id;
  *out = &ci;
  return nv::kSuccess;
}

EXPORT nv::Return FN(GpuInstanceGetComputeInstances)(nv::GpuInstance instance, unsigned id,
                                                     nv::ComputeInstance* out, unsigned* count) {
  GUARD("GpuInstanceGetComputeInstances");
  auto* gi = static_cast<Gi*>(instance);
  if (gi == nullptr) return nv::kErrorInvalidArgument;
  unsigned n = 0;
  for (Ci& ci : gi->cis) {
    if (ci.profile != id) continue;
    if (n >= *count) return nv::kErrorInsufficientSize;
    out[n++] = &ci;
  }
  *count = n;
  return nv::kSuccess;
}

EXPORT nv::Return FN(ComputeInstanceDestroy)(nv::ComputeInstance instance) {
  GUARD("ComputeInstanceDestroy");
  auto* ci = static_cast<Ci*>(instance);
  if (ci == nullptr) return nv::kErrorInvalidArgument;
  Card& card = *ci->gi->card;
  card.mig_handles.remove_if([&](const Handle& h) { return h.ci == ci; });
  ci->gi->cis.remove_if([&](const Ci& other) { return &other == ci; });
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetMaxMigDeviceCount)(nv::Device device, unsigned* count) {
  GUARD("DeviceGetMaxMigDeviceCount");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  *count = card->mig_current == 1 ? kMaxMigDevices : 0;
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetMigDeviceHandleByIndex)(nv::Device device, unsigned index,
                                                      nv::Device* out) {
  GUARD("DeviceGetMigDeviceHandleByIndex");
  Card* card = CardOf(device);
  if (card == nullptr) return nv::kErrorInvalidArgument;
  const std::vector<Ci*> migs = MigDevices(*card);
  if (index >= migs.size()) return nv::kErrorNotFound;
  for (Handle& h : card->mig_handles) {
    if (h.ci == migs[index]) {
      *out = &h;
      return nv::kSuccess;
    }
  }
  Handle& h = card->mig_handles.emplace_back();
  h.card = card;
  h.ci = migs[index];
  *out = &h;
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceGetGpuInstanceId)(nv::Device device, unsigned* id) {
  GUARD("DeviceGetGpuInstanceId");
  auto* h = static_cast<Handle*>(device);
  if (h == nullptr || h->ci == nullptr) return nv::kErrorInvalidArgument;
  *id = h->ci->gi->id;
  return nv::kSuccess;
}

// Driver events. A test raises one by appending "<card uuid> <xid>" to the file named by
// GPUSTACK_FAKE_NVML_EVENTS; each event set reads the lines added since it was created.
namespace {
struct FakeEventSet : nv::EventSetOpaque {
  std::vector<nv::Device> devices;
  std::streamoff offset = 0;
  int inotify = -1;  // on the events file, so that a wait blocks as the driver's does
  ~FakeEventSet() {
    if (inotify >= 0) ::close(inotify);
  }
  // Before the set reads where the file ends, so that no append falls between.
  void Watch(const std::string& path) {
    inotify = ::inotify_init1(IN_CLOEXEC);
    if (inotify >= 0 && ::inotify_add_watch(inotify, path.c_str(), IN_MODIFY) < 0) {
      ::close(inotify);
      inotify = -1;
    }
  }
  // Until the file changes or `until`; a file that cannot be watched is looked at every 50 ms.
  void WaitForChange(std::chrono::steady_clock::time_point until) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (inotify < 0) {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(50)));
      return;
    }
    pollfd p{inotify, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) > 0) {
      alignas(inotify_event) char buffer[4096];
      (void)::read(inotify, buffer, sizeof buffer);
    }
  }
};
std::string EventsPath() {
  const char* path = std::getenv("GPUSTACK_FAKE_NVML_EVENTS");
  return path == nullptr ? std::string() : std::string(path);
}
}  // namespace

EXPORT nv::Return FN(EventSetCreate)(nv::EventSet* set) {
  GUARD("EventSetCreate");
  auto* created = new FakeEventSet();
  if (!EventsPath().empty()) created->Watch(EventsPath());
  std::ifstream in(EventsPath(), std::ios::ate);
  created->offset = in ? static_cast<std::streamoff>(in.tellg()) : 0;
  *set = created;
  return nv::kSuccess;
}

EXPORT nv::Return FN(DeviceRegisterEvents)(nv::Device device, unsigned long long types,
                                           nv::EventSet set) {
  GUARD("DeviceRegisterEvents");
  if (device == nullptr || set == nullptr || (types & nv::kEventTypeXidCriticalError) == 0)
    return nv::kErrorInvalidArgument;
  static_cast<FakeEventSet*>(set)->devices.push_back(device);
  return nv::kSuccess;
}

EXPORT nv::Return FN(EventSetWait_v2)(nv::EventSet set, nv::EventData* data, unsigned timeout_ms) {
  auto* events = static_cast<FakeEventSet*>(set);
  if (events == nullptr || data == nullptr) return nv::kErrorInvalidArgument;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const std::string path = EventsPath();
  if (path.empty()) {  // nothing can ever arrive: block like the driver does
    std::this_thread::sleep_until(until);
    return nv::kErrorTimeout;
  }
  do {
    // Opened only when the file has grown past what this set has read.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || st.st_size <= events->offset) {
      events->WaitForChange(until);
      continue;
    }
    std::ifstream in(path);
    if (in && in.seekg(events->offset)) {
      std::string uuid;
      unsigned long long xid = 0;
      if (in >> uuid >> xid) {
        std::string rest;
        std::getline(in, rest);
        events->offset = in.tellg() >= 0 ? static_cast<std::streamoff>(in.tellg()) : events->offset;
        std::lock_guard<std::mutex> lock(g.mu);
        for (nv::Device device : events->devices) {
          if (static_cast<Handle*>(device)->card->spec.value("uuid", "") == uuid) {
            *data = {device, nv::kEventTypeXidCriticalError, xid, 0xFFFFFFFFu, 0xFFFFFFFFu};
            return nv::kSuccess;
          }
        }
        continue;  // a card this set does not watch
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < until);
  return nv::kErrorTimeout;
}

EXPORT nv::Return FN(EventSetFree)(nv::EventSet set) {
  delete static_cast<FakeEventSet*>(set);
  return nv::kSuccess;
}
