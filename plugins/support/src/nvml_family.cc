#include "gpustack_support/nvml_family.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <tuple>

#include "gpustack_support/discovery.h"
#include "gpustack_support/partition_tables.h"

namespace gpustack::support {
namespace {

using sdk::Error;

// NVML_COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7,8,6}_SLICE: the enum index for a slice count.
std::optional<unsigned> ComputeProfileIndex(unsigned slices) {
  switch (slices) {
    case 1:
      return 0;
    case 2:
      return 1;
    case 3:
      return 2;
    case 4:
      return 3;
    case 7:
      return 4;
    case 8:
      return 5;
    case 6:
      return 6;
    default:
      return std::nullopt;
  }
}

// "MIG 1g.10gb" -> "1g.10gb"; "MIG 4g48gb" -> "4g.48gb" (the '.' resource names need).
// Variants ("+me", "+gfx") are not resource-name segments: empty.
std::string ResourceNameOf(std::string_view driver_name) {
  std::string name(driver_name);
  if (name.rfind("MIG ", 0) == 0) name.erase(0, 4);
  if (name.empty() || name.find('+') != std::string::npos) return {};
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t g = name.find('g');
  if (g != std::string::npos && g + 1 < name.size() && name[g + 1] != '.') name.insert(g + 1, ".");
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return {};
  }
  return name;
}

std::string Trimmed(const char* text, size_t capacity) {
  return std::string(text, strnlen(text, capacity));
}

std::string CudaVersion(int version) {
  if (version <= 0) return {};
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

// Why a failed NVML call leaves a card's processes unlisted.
gpustack_process_listing ListingFailure(nvml::Return r) {
  switch (r) {
    case nvml::kErrorNotSupported:
      return GPUSTACK_PROCESS_LISTING_UNSUPPORTED;
    case nvml::kErrorNoPermission:
      return GPUSTACK_PROCESS_LISTING_PERMISSION;
    default:
      return GPUSTACK_PROCESS_LISTING_DRIVER_ERROR;
  }
}

// Every compute process on the card, or why they could not all be read.
gpustack_process_listing RunningProcesses(const nvml::Api& api, nvml::Device card,
                                          std::vector<nvml::ProcessInfo>& out) {
  if (api.device_get_compute_running_processes == nullptr)
    return GPUSTACK_PROCESS_LISTING_UNSUPPORTED;
  unsigned n = 0;
  nvml::Return r = api.device_get_compute_running_processes(card, &n, nullptr);
  if (r == nvml::kSuccess) return GPUSTACK_PROCESS_LISTING_COMPLETE;  // none run
  if (r != nvml::kErrorInsufficientSize) return ListingFailure(r);
  out.resize(n + 8);  // room for processes starting meanwhile
  n = static_cast<unsigned>(out.size());
  r = api.device_get_compute_running_processes(card, &n, out.data());
  if (r == nvml::kErrorInsufficientSize) return GPUSTACK_PROCESS_LISTING_TRUNCATED;
  if (r != nvml::kSuccess) return ListingFailure(r);
  out.resize(n);
  return GPUSTACK_PROCESS_LISTING_COMPLETE;
}

// A GPU instance without a compute instance has no MIG device (and no UUID) yet; such a
// partition is never ours (ours always get one), so a stand-in id only names it.
std::string MigDeviceUuid(const nvml::Api& api, const std::string& card_uuid, nvml::Device card,
                          unsigned instance_id) {
  return FindMigDeviceUuid(api, card, instance_id)
      .value_or(card_uuid + "/gi" + std::to_string(instance_id));
}

}  // namespace

std::optional<std::string> FindMigDeviceUuid(const nvml::Api& api, nvml::Device card,
                                             unsigned instance_id) {
  unsigned max = 0;
  if (api.device_get_max_mig_device_count(card, &max) != nvml::kSuccess) return std::nullopt;
  for (unsigned i = 0; i < max; ++i) {
    nvml::Device mig = nullptr;
    unsigned gi = 0;
    if (api.device_get_mig_device_handle_by_index(card, i, &mig) != nvml::kSuccess ||
        api.device_get_gpu_instance_id(mig, &gi) != nvml::kSuccess || gi != instance_id) {
      continue;
    }
    char uuid[96] = {};
    if (api.device_get_uuid(mig, uuid, sizeof uuid) == nvml::kSuccess) {
      return Trimmed(uuid, sizeof uuid);
    }
  }
  return std::nullopt;
}

NvmlFamilyPlugin::NvmlFamilyPlugin(const sdk::Host& host, NvmlFamilyTraits traits)
    : host_(host),
      traits_(std::move(traits)),
      library_(host_, {traits_.pci_vendor_ids, traits_.library_candidates,
                       traits_.preload_candidates, traits_.install_hint}) {}

NvmlMigFamilyPlugin::NvmlMigFamilyPlugin(const sdk::Host& host, NvmlFamilyTraits traits)
    : NvmlFamilyPlugin(host, std::move(traits)) {
  const std::string state_dir(
      host_.Config("state_dir").value_or("/var/lib/gpustack/" + traits_.manufacturer));
  owners_ = std::make_unique<OwnershipStore>(std::filesystem::path(state_dir) / "partition-owners");
}

NvmlFamilyPlugin::~NvmlFamilyPlugin() {
  if (events_ != nullptr) api_.event_set_free(events_);
  if (initialized_) api_.shutdown();
}

// Runs on the host's health thread, beside the other hooks: it touches only the event set and
// its own handle map, and the function table, which is written once before `loaded_` is set.
void NvmlFamilyPlugin::PollHealthEvents(uint32_t timeout_ms, sdk::HealthSink& sink) {
  std::lock_guard lock(events_mutex_);
  if (!loaded_.load(std::memory_order_acquire) || !api_.has_events()) {
    return;  // not loaded yet, or a driver without events: the host waits out its timeout
  }
  if (events_ == nullptr) {
    if (api_.event_set_create(&events_) != nvml::kSuccess) {
      events_ = nullptr;
      return;
    }
    unsigned count = 0;
    api_.device_get_count(&count);
    for (unsigned i = 0; i < count; ++i) {
      nvml::Device device = nullptr;
      char uuid[96] = {};
      if (api_.device_get_handle_by_index(i, &device) != nvml::kSuccess ||
          api_.device_get_uuid(device, uuid, sizeof(uuid)) != nvml::kSuccess) {
        continue;
      }
      // A card that cannot report events is still polled by discovery.
      if (api_.device_register_events(device, nvml::kEventTypeXidCriticalError, events_) ==
          nvml::kSuccess) {
        event_cards_[device] = uuid;
      }
    }
  }
  nvml::EventData data{};
  const nvml::Return r = api_.event_set_wait(events_, &data, timeout_ms);
  if (r != nvml::kSuccess) return;  // a timeout, mostly
  auto card = event_cards_.find(data.device);
  if (card == event_cards_.end() || data.event_type != nvml::kEventTypeXidCriticalError) return;
  sink.Add({card->second, GPUSTACK_HEALTH_UNHEALTHY,
            "XID " + std::to_string(data.event_data) + " (critical error reported by the driver)"});
}

std::string NvmlFamilyPlugin::ErrorText(nvml::Return r) const {
  return sdk::ErrorText(api_.error_string != nullptr ? api_.error_string(r) : nullptr, r);
}

void NvmlFamilyPlugin::Fail(gpustack_status code, const std::string& what, nvml::Return r) const {
  throw Error(code, traits_.prefix + ": " + what + ": " + ErrorText(r));
}

// Opens and initializes the library on first use; a missing library or function is UNAVAILABLE
// with what to fix, never a crash. Init is retried on the next call after a failure.
bool NvmlFamilyPlugin::EnsureLoaded() {
  if (initialized_) return true;
  const bool bound = library_.Bind(
      &api_, [this](const sdk::VendorLibrary& library, nvml::Api* api, std::string* missing) {
        return nvml::Resolve(library, traits_.prefix, api, missing);
      });
  if (!bound) return false;
  if (const nvml::Return r = api_.init(); r != nvml::kSuccess) {
    Fail(GPUSTACK_STATUS_UNAVAILABLE, "initialization failed", r);
  }
  initialized_ = true;
  loaded_.store(true, std::memory_order_release);
  return true;
}

std::vector<NvmlFamilyPlugin::DriverProfile> NvmlFamilyPlugin::QueryProfiles(
    nvml::Device device, const std::string& product) const {
  const PartitionTable* table = FindPartitionTable(traits_.manufacturer, product);
  std::vector<DriverProfile> out;
  for (unsigned index = 0; index < traits_.profile_probe_count; ++index) {
    nvml::GpuInstanceProfileInfoV2 info{};
    info.version = nvml::kGpuInstanceProfileInfoV2Version;
    nvml::Return r = nvml::kErrorNotSupported;
    if (api_.device_get_gpu_instance_profile_info_v != nullptr) {
      r = api_.device_get_gpu_instance_profile_info_v(device, index, &info);
    }
    if (r != nvml::kSuccess) {
      nvml::GpuInstanceProfileInfo v1{};
      r = api_.device_get_gpu_instance_profile_info(device, index, &v1);
      if (r == nvml::kErrorNotSupported || r == nvml::kErrorInvalidArgument)
        continue;  // not offered
      if (r != nvml::kSuccess)
        Fail(GPUSTACK_STATUS_INTERNAL, "profile " + std::to_string(index), r);
      info = {};
      info.id = v1.id;
      info.slice_count = v1.slice_count;
      info.instance_count = v1.instance_count;
      info.memory_size_mb = v1.memory_size_mb;
    }
    unsigned count = 0;
    r = api_.device_get_gpu_instance_possible_placements(device, info.id, nullptr, &count);
    if (r == nvml::kErrorNotSupported) continue;
    if (r != nvml::kSuccess && r != nvml::kErrorInsufficientSize) {
      Fail(GPUSTACK_STATUS_INTERNAL, "placements of profile " + std::to_string(info.id), r);
    }
    if (count == 0) continue;  // a profile without a legal placement is not offered
    std::vector<nvml::GpuInstancePlacement> placements(count);
    r = api_.device_get_gpu_instance_possible_placements(device, info.id, placements.data(),
                                                         &count);
    if (r != nvml::kSuccess) {
      Fail(GPUSTACK_STATUS_INTERNAL, "placements of profile " + std::to_string(info.id), r);
    }
    placements.resize(count);
    const unsigned length = placements.front().size;

    // The name: the driver's, made a resource name, checked against the product's table; or,
    // when the driver gives none, the table's entry of the same geometry.
    std::string name = ResourceNameOf(Trimmed(info.name, sizeof info.name));
    if (table != nullptr) {
      const sdk::PartitionProfile* match = nullptr;
      for (const sdk::PartitionProfile& p : table->profiles) {
        const bool same_shape = p.compute_slices == info.slice_count && p.memory_slices == length;
        if (name.empty() ? same_shape : p.name == name) {
          match = &p;
          break;
        }
      }
      if (match == nullptr) continue;
      name = match->name;
    }
    if (name.empty()) continue;
    if (std::any_of(out.begin(), out.end(),
                    [&](const DriverProfile& d) { return d.profile.name == name; })) {
      continue;  // a later index with the same shape (a variant without a name)
    }
    DriverProfile d;
    d.creation_id = info.id;
    d.profile.name = name;
    d.profile.memory_mib = info.memory_size_mb;
    d.profile.compute_slices = info.slice_count;
    d.profile.memory_slices = length;
    d.profile.max_count = info.instance_count;
    for (const auto& p : placements) d.profile.placements.push_back({p.start, p.size});
    std::sort(
        d.profile.placements.begin(), d.profile.placements.end(),
        [](const gpustack_placement& a, const gpustack_placement& b) { return a.start < b.start; });
    out.push_back(std::move(d));
  }
  // Smallest first, as administrators read them: 1g.10gb, 1g.20gb, 2g.20gb ...
  std::sort(out.begin(), out.end(), [](const DriverProfile& a, const DriverProfile& b) {
    return std::tie(a.profile.compute_slices, a.profile.memory_slices, a.profile.name) <
           std::tie(b.profile.compute_slices, b.profile.memory_slices, b.profile.name);
  });
  return out;
}

NvmlFamilyPlugin::Read NvmlFamilyPlugin::ReadCard(unsigned i, const std::string& driver, int cuda) {
  Read out;
  auto ok = [&](const char* what, nvml::Return r) {
    if (r != nvml::kSuccess && out.failure.empty())
      out.failure = std::string(what) + ": " + ErrorText(r);
    return out.failure.empty();
  };
  nvml::Device device = nullptr;
  char name[96] = {};
  char uuid[96] = {};
  nvml::PciInfo pci{};
  nvml::Memory memory{};
  unsigned minor = 0;
  if (!ok("handle", api_.device_get_handle_by_index(i, &device)) ||
      !ok("uuid", api_.device_get_uuid(device, uuid, sizeof uuid)) ||
      !ok("name", api_.device_get_name(device, name, sizeof name)) ||
      !ok("PCI info", api_.device_get_pci_info(device, &pci)) ||
      !ok("memory", api_.device_get_memory_info(device, &memory))) {
    return out;
  }
  // The device node is the driver's minor, never the enumeration index. A card whose driver
  // has no minor to give is left out (fail closed) rather than guessed.
  const nvml::Return minor_status = api_.device_get_minor_number(device, &minor);
  const int node = static_cast<int>(minor) + traits_.minor_offset;
  if (minor_status == nvml::kErrorNotSupported || (minor_status == nvml::kSuccess && node < 0)) {
    host_.Log(GPUSTACK_LOG_WARN, "skipping " + Trimmed(uuid, sizeof uuid) +
                                     ": no usable device minor (" + ErrorText(minor_status) + ")");
    out.skip = true;
    return out;
  }
  if (!ok("minor number", minor_status)) return out;
  out.product = Trimmed(name, sizeof name);

  sdk::Accelerator& a = out.accelerator;
  a.id = Trimmed(uuid, sizeof uuid);
  a.physical_indexes = {static_cast<uint32_t>(node)};
  // The card's size is the physical one (v2 counts the driver's reservation, v1 does not):
  // 16384 MiB for a T4 whose usable memory is 15360.
  nvml::MemoryV2 physical{};
  physical.version = nvml::kMemoryV2Version;
  const bool has_v2 = api_.device_get_memory_info_v2 != nullptr &&
                      api_.device_get_memory_info_v2(device, &physical) == nvml::kSuccess;
  a.memory_mib = (has_v2 ? physical.total : memory.total) / (1024 * 1024);
  a.health = GPUSTACK_HEALTH_HEALTHY;
  // The unversioned PCI query (HGML's only one) fills NVML's older layout, whose bus id sits
  // where the newer layout keeps busIdLegacy: try both.
  auto bus = sdk::NormalizeBusId(Trimmed(pci.bus_id, sizeof pci.bus_id));
  if (!bus) bus = sdk::NormalizeBusId(Trimmed(pci.bus_id_legacy, sizeof pci.bus_id_legacy));
  if (bus) {
    sdk::FillTopology(host_, *bus, a);
  } else {
    host_.Log(GPUSTACK_LOG_WARN, a.id + ": the driver gave no PCI bus id; topology unknown");
  }

  out.card = Card{a.id, 0, device, static_cast<uint32_t>(node), false, {}};
  if (traits_.partitions && api_.has_mig()) {
    unsigned current = 0;
    unsigned pending = 0;
    const nvml::Return r = api_.device_get_mig_mode(device, &current, &pending);
    if (r == nvml::kSuccess) {
      out.card.partitioned = current == nvml::kMigEnable;
      a.partition_mode = out.card.partitioned ? GPUSTACK_PARTITION_MODE_ENABLED
                         : pending != current ? GPUSTACK_PARTITION_MODE_PENDING
                                              : GPUSTACK_PARTITION_MODE_DISABLED;
      if (out.card.partitioned) {
        out.card.profiles = QueryProfiles(device, out.product);
        for (const DriverProfile& d : out.card.profiles) a.partition_profiles.push_back(d.profile);
      }
    } else if (!ok("MIG mode", r == nvml::kErrorNotSupported ? nvml::kSuccess : r)) {
      return out;
    }
  }
  // A partitioned card offers partitions only (logicalSliced.count 0).
  a.logical_slice_count = out.card.partitioned ? 0 : traits_.logical_slice_count;
  a.cores_percentage_overcommit = !out.card.partitioned && traits_.cores_percentage_overcommit;

  sdk::AcceleratorGroup& g = out.group;
  g.memory_mib = a.memory_mib;
  g.driver_version = driver;
  g.runtime_version = CudaVersion(cuda);
  int major = 0;
  int minor_cc = 0;
  if (api_.device_get_cuda_compute_capability != nullptr &&
      api_.device_get_cuda_compute_capability(device, &major, &minor_cc) == nvml::kSuccess) {
    g.compute_capability = std::to_string(major) + "." + std::to_string(minor_cc);
  }
  unsigned cores = 0;
  if (api_.device_get_num_gpu_cores != nullptr &&
      api_.device_get_num_gpu_cores(device, &cores) == nvml::kSuccess) {
    g.cores = cores;
  }
  unsigned arch = 0;
  if (traits_.family_name && api_.device_get_architecture != nullptr &&
      api_.device_get_architecture(device, &arch) == nvml::kSuccess) {
    g.family = traits_.family_name(arch);
  }
  return out;
}

void NvmlFamilyPlugin::Discover(sdk::DiscoverySink& sink) {
  if (!EnsureLoaded()) return;
  unsigned count = 0;
  if (const nvml::Return r = api_.device_get_count(&count); r != nvml::kSuccess) {
    Fail(GPUSTACK_STATUS_INTERNAL, "counting devices", r);
  }
  char driver[96] = {};
  if (api_.system_get_driver_version == nullptr ||
      api_.system_get_driver_version(driver, sizeof driver) != nvml::kSuccess) {
    driver[0] = '\0';
  }
  int cuda = 0;
  if (api_.system_get_cuda_driver_version == nullptr ||
      api_.system_get_cuda_driver_version(&cuda) != nvml::kSuccess) {
    cuda = 0;
  }

  // One card that cannot be read is reported unhealthy (as it was last read), never hiding the
  // others; a failure of the library itself (above) fails the pass and the host keeps its last
  // good result.
  sdk::CardBook::Pass pass = book_.Begin();
  std::vector<Card> cards;
  for (unsigned i = 0; i < count; ++i) {
    Read read = ReadCard(i, Trimmed(driver, sizeof driver), cuda);
    if (read.skip) continue;
    if (!read.failure.empty()) {
      const std::string reason = traits_.prefix + ": " + read.failure;
      KeepUnreadable(
          pass, book_, host_, i, "device " + std::to_string(i), reason,
          [&](const sdk::Accelerator& known) {
            cards.push_back(Card{known.id,
                                 static_cast<uint32_t>(cards.size()),
                                 nullptr,
                                 known.physical_indexes.empty() ? 0u : known.physical_indexes[0],
                                 false,
                                 {}});
          });
      continue;
    }
    read.card.index = static_cast<uint32_t>(cards.size());
    cards.push_back(std::move(read.card));
    pass.Found(i, read.product, std::move(read.group), std::move(read.accelerator));
  }
  pass.Report(sink);
  cards_ = std::move(cards);
}

void NvmlFamilyPlugin::RefreshCards() {
  if (!cards_.empty()) return;
  DiscardingSink discard;
  Discover(discard.sink());
}

NvmlFamilyPlugin::Card& NvmlFamilyPlugin::FindCard(std::string_view uuid) {
  RefreshCards();
  for (Card& card : cards_) {
    if (card.uuid == uuid) return card;
  }
  throw Error(GPUSTACK_STATUS_NOT_FOUND, "no accelerator " + std::string(uuid) + " on this node");
}

InjectedCard NvmlFamilyPlugin::Injected(const Card& card) const {
  return {card.uuid, card.index, card.uuid, {traits_.card_node + std::to_string(card.node)}};
}

void NvmlFamilyPlugin::Grant(const sdk::Grant& grant, sdk::ContainerEditSink& sink) {
  std::vector<InjectedCard> cards;
  for (const std::string& id : grant.accelerator_ids) cards.push_back(Injected(FindCard(id)));
  EmitGrant(traits_.injection, grant, std::move(cards), sink);
}

void NvmlFamilyPlugin::ListDeviceNodes(const std::vector<std::string>& ids,
                                       sdk::DeviceNodeSink& sink) {
  std::vector<InjectedCard> cards;
  for (const std::string& id : ids) cards.push_back(Injected(FindCard(id)));
  if (ids.empty()) {
    RefreshCards();
    for (const Card& card : cards_) cards.push_back(Injected(card));
  }
  EmitDeviceNodes(traits_.injection, cards, sink);
}

void NvmlFamilyPlugin::SampleMetrics(const sdk::MetricsRequest& request, sdk::MetricsSink& sink) {
  if (!EnsureLoaded() && request.accelerator_ids.empty()) return;
  for (const Card* card : CardsFor(*this, cards_, request.accelerator_ids)) {
    sdk::DeviceSample s;
    s.accelerator_id = card->uuid;
    s.timestamp_ns = host_.NowNs();
    if (card->handle == nullptr) {  // it did not answer at the last discovery
      s.health = GPUSTACK_HEALTH_UNHEALTHY;
      if (request.include_processes) s.process_listing = GPUSTACK_PROCESS_LISTING_DRIVER_ERROR;
      sink.Add(s);
      continue;
    }
    nvml::Memory memory{};
    const nvml::Return mr = api_.device_get_memory_info(card->handle, &memory);
    if (mr == nvml::kSuccess) {
      s.health = GPUSTACK_HEALTH_HEALTHY;  // the card answers
      s.memory_total_mib = static_cast<double>(memory.total) / (1024.0 * 1024.0);
      s.memory_used_mib = static_cast<double>(memory.used) / (1024.0 * 1024.0);
      if (memory.total > 0) {
        s.memory_utilization_percent =
            100.0 * static_cast<double>(memory.used) / static_cast<double>(memory.total);
      }
    } else if (mr == nvml::kErrorGpuIsLost) {
      s.health = GPUSTACK_HEALTH_UNHEALTHY;
    }
    nvml::Utilization util{};
    if (api_.device_get_utilization_rates != nullptr &&
        api_.device_get_utilization_rates(card->handle, &util) == nvml::kSuccess) {
      s.cores_utilization_percent = util.gpu;
    }
    unsigned temperature = 0;
    if (api_.device_get_temperature != nullptr &&
        api_.device_get_temperature(card->handle, nvml::kTemperatureGpu, &temperature) ==
            nvml::kSuccess) {
      s.temperature_celsius = temperature;
    }
    unsigned milliwatts = 0;
    if (api_.device_get_power_usage != nullptr &&
        api_.device_get_power_usage(card->handle, &milliwatts) == nvml::kSuccess) {
      s.power_watts = milliwatts / 1000.0;
    }
    std::vector<nvml::ProcessInfo> processes;
    if (request.include_processes)
      s.process_listing = RunningProcesses(api_, card->handle, processes);
    sink.Add(s);
    if (!request.include_processes || s.process_listing != GPUSTACK_PROCESS_LISTING_COMPLETE)
      continue;
    std::vector<nvml::ProcessUtilizationSample> utils;
    if (api_.device_get_process_utilization != nullptr) {
      unsigned un = 0;
      const nvml::Return r = api_.device_get_process_utilization(card->handle, nullptr, &un, 0);
      if ((r == nvml::kSuccess || r == nvml::kErrorInsufficientSize) && un > 0) {
        utils.resize(un);
        if (api_.device_get_process_utilization(card->handle, utils.data(), &un, 0) ==
            nvml::kSuccess) {
          utils.resize(un);
        } else {
          utils.clear();
        }
      }
    }
    std::map<unsigned, std::string> partition_of;
    for (const nvml::ProcessInfo& p : processes) {
      sdk::ProcessSample ps;
      ps.accelerator_id = card->uuid;
      ps.pid = p.pid;
      // NVML_VALUE_NOT_AVAILABLE (all ones) where the driver cannot account a process's memory.
      if (p.used_gpu_memory != ~0ULL) {
        ps.memory_used_mib = static_cast<double>(p.used_gpu_memory) / (1024.0 * 1024.0);
      }
      unsigned long long newest = 0;
      for (const auto& u : utils) {
        if (u.pid == p.pid && u.timestamp >= newest) {
          newest = u.timestamp;
          ps.cores_utilization_percent = u.sm_util;
        }
      }
      if (p.gpu_instance_id != nvml::kNoInstance && card->partitioned) {
        auto [it, inserted] = partition_of.try_emplace(p.gpu_instance_id);
        if (inserted) it->second = MigDeviceUuid(api_, card->uuid, card->handle, p.gpu_instance_id);
        ps.partition_id = it->second;
      }
      sink.Add(ps);
    }
  }
}

std::vector<OwnershipRecord> NvmlMigFamilyPlugin::LoadOwners() const {
  try {
    return owners_->Load();
  } catch (const std::exception& e) {
    throw Error(GPUSTACK_STATUS_DATA_LOSS, e.what());
  }
}

void NvmlMigFamilyPlugin::UpdateOwners(
    const std::function<void(std::vector<OwnershipRecord>&)>& change) const {
  try {
    owners_->Update(change);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(GPUSTACK_STATUS_UNAVAILABLE, e.what());
  }
}

// A record owns a live partition only if everything it recorded still matches, the partition's
// own id included (new on every creation), so an id the driver reuses is never mistaken for ours.
static bool Matches(const OwnershipRecord& o, const std::string& card, const sdk::Partition& p,
                    unsigned instance_id) {
  return o.card_id == card && o.instance == instance_id && o.partition_id == p.id &&
         o.profile == p.profile && o.start == p.placement.start && o.length == p.placement.length;
}

std::vector<NvmlMigFamilyPlugin::LivePartition> NvmlMigFamilyPlugin::ListInstances(
    const Card& card) const {
  if (card.handle == nullptr) {
    throw Error(GPUSTACK_STATUS_UNAVAILABLE,
                card.uuid + " did not answer at the last discovery; its partitions are unknown");
  }
  std::vector<LivePartition> out;
  for (const DriverProfile& d : card.profiles) {
    // The driver fills up to the profile's instance count; the buffer must hold that many.
    unsigned n = d.profile.max_count + 1;
    std::vector<nvml::GpuInstance> instances(n);
    const nvml::Return r =
        api_.device_get_gpu_instances(card.handle, d.creation_id, instances.data(), &n);
    if (r != nvml::kSuccess) {
      Fail(GPUSTACK_STATUS_INTERNAL, card.uuid + ": listing " + d.profile.name, r);
    }
    for (unsigned i = 0; i < std::min<size_t>(n, instances.size()); ++i) {
      nvml::GpuInstanceInfo info{};
      if (const nvml::Return ir = api_.gpu_instance_get_info(instances[i], &info);
          ir != nvml::kSuccess) {
        Fail(GPUSTACK_STATUS_INTERNAL, card.uuid + ": GPU instance info", ir);
      }
      LivePartition live;
      live.instance = instances[i];
      live.instance_id = info.id;
      live.partition.accelerator_id = card.uuid;
      live.partition.id = MigDeviceUuid(api_, card.uuid, card.handle, info.id);
      live.partition.profile = d.profile.name;
      live.partition.placement = {info.placement.start, info.placement.size};
      out.push_back(std::move(live));
    }
  }
  std::sort(out.begin(), out.end(), [](const LivePartition& a, const LivePartition& b) {
    return a.partition.placement.start < b.partition.placement.start;
  });
  return out;
}

std::vector<NvmlMigFamilyPlugin::LivePartition> NvmlMigFamilyPlugin::Live(const Card& card) const {
  std::vector<LivePartition> out = ListInstances(card);
  auto owned = [&](const OwnershipRecord& o, const std::vector<LivePartition>& live) {
    return std::any_of(live.begin(), live.end(), [&](const LivePartition& l) {
      return Matches(o, card.uuid, l.partition, l.instance_id);
    });
  };
  const std::vector<OwnershipRecord> owners = LoadOwners();
  bool stale = false;
  for (const OwnershipRecord& o : owners) {
    if (o.card_id != card.uuid) continue;
    for (LivePartition& l : out) {
      if (Matches(o, card.uuid, l.partition, l.instance_id)) l.partition.owner = o.owner;
    }
    stale = stale || !owned(o, out);
  }
  if (stale) {
    // Forget records of this card whose partition is gone (destroyed behind the plugin's back,
    // or lost in a reset): they could only ever mislead. Listed again under the lock, so a
    // record another process has just written for its new partition is not taken for stale.
    try {
      owners_->Update([&](std::vector<OwnershipRecord>& records) {
        const std::vector<LivePartition> now = ListInstances(card);
        std::erase_if(records, [&](const OwnershipRecord& o) {
          return o.card_id == card.uuid && !owned(o, now);
        });
      });
      host_.Log(GPUSTACK_LOG_INFO, card.uuid + ": dropped ownership records of partitions gone");
    } catch (const std::exception& e) {
      host_.Log(GPUSTACK_LOG_WARN, std::string("cannot drop stale ownership records: ") + e.what());
    }
  }
  return out;
}

void NvmlMigFamilyPlugin::ListPartitions(std::string_view accelerator_id,
                                         sdk::PartitionSink& sink) {
  if (!EnsureLoaded() && accelerator_id.empty()) return;
  std::vector<const Card*> cards;
  if (accelerator_id.empty()) {
    RefreshCards();
    for (const Card& c : cards_) cards.push_back(&c);
  } else {
    cards.push_back(&FindCard(accelerator_id));
  }
  for (const Card* card : cards) {
    if (!card->partitioned) continue;
    for (const LivePartition& live : Live(*card)) sink.Add(live.partition);
  }
}

void NvmlMigFamilyPlugin::CreatePartition(const sdk::CreatePartitionRequest& request,
                                          sdk::PartitionSink& sink) {
  EnsureLoaded();
  if (!ValidOwnerTag(request.owner)) {
    throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT,
                "owner tag must be 1-253 characters of [A-Za-z0-9._:/-]");
  }
  Card& card = FindCard(request.accelerator_id);
  if (!card.partitioned) {
    throw Error(
        GPUSTACK_STATUS_FAILED_PRECONDITION,
        card.uuid + " is not in partition (MIG) mode; enable it and restart the device manager");
  }
  auto profile =
      std::find_if(card.profiles.begin(), card.profiles.end(),
                   [&](const DriverProfile& d) { return d.profile.name == request.profile; });
  if (profile == card.profiles.end()) {
    throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT,
                "profile " + request.profile + " is not offered by " + card.uuid);
  }
  const bool legal = std::any_of(
      profile->profile.placements.begin(), profile->profile.placements.end(),
      [&](const gpustack_placement& p) {
        return p.start == request.placement.start && p.length == request.placement.length;
      });
  if (!legal) {
    throw Error(GPUSTACK_STATUS_INVALID_ARGUMENT,
                "placement " + std::to_string(request.placement.start) + "+" +
                    std::to_string(request.placement.length) + " is not legal for " +
                    request.profile);
  }
  // Check the ownership file can be read before touching the hardware.
  LoadOwners();

  const nvml::GpuInstancePlacement placement{request.placement.start, request.placement.length};
  nvml::GpuInstance gi = nullptr;
  nvml::Return r = api_.device_create_gpu_instance_with_placement(card.handle, profile->creation_id,
                                                                  &placement, &gi);
  if (r == nvml::kErrorInsufficientResources || r == nvml::kErrorInUse) {
    Fail(GPUSTACK_STATUS_RESOURCE_EXHAUSTED, card.uuid + ": placement is taken", r);
  }
  if (r != nvml::kSuccess)
    Fail(GPUSTACK_STATUS_INTERNAL, card.uuid + ": creating " + request.profile, r);

  // Anything failing after the GPU instance exists undoes it: nothing unowned is left behind.
  nvml::GpuInstanceInfo info{};
  nvml::ComputeInstanceProfileInfo ci_profile{};
  nvml::ComputeInstance ci = nullptr;
  const auto index = ComputeProfileIndex(profile->profile.compute_slices);
  r = api_.gpu_instance_get_info(gi, &info);
  if (r == nvml::kSuccess) {
    r = index ? api_.gpu_instance_get_compute_instance_profile_info(
                    gi, *index, nvml::kComputeEngineShared, &ci_profile)
              : nvml::kErrorNotSupported;
  }
  if (r == nvml::kSuccess) r = api_.gpu_instance_create_compute_instance(gi, ci_profile.id, &ci);
  if (r != nvml::kSuccess) {
    api_.gpu_instance_destroy(gi);
    Fail(GPUSTACK_STATUS_INTERNAL, card.uuid + ": creating the compute instance", r);
  }
  auto undo = [&]() -> bool {
    const nvml::Return rc = api_.compute_instance_destroy(ci);
    const nvml::Return rg = rc == nvml::kSuccess ? api_.gpu_instance_destroy(gi) : rc;
    if (rg != nvml::kSuccess) {
      host_.Log(GPUSTACK_LOG_ERROR,
                card.uuid + ": cannot undo a partition just made: " + ErrorText(rg));
    }
    return rg == nvml::kSuccess;
  };
  // The partition's id is its MIG device's UUID; a partition without one could not be told apart
  // from others later, so it is not kept.
  const std::optional<std::string> id = FindMigDeviceUuid(api_, card.handle, info.id);
  if (!id) {
    undo();
    throw Error(GPUSTACK_STATUS_INTERNAL, card.uuid + ": the new partition has no MIG device");
  }
  const sdk::Partition made{
      card.uuid, *id, request.profile, {info.placement.start, info.placement.size}, request.owner};
  const OwnershipRecord record{
      card.uuid,           info.id,      made.id, request.profile, info.placement.start,
      info.placement.size, request.owner};
  try {
    UpdateOwners([&](std::vector<OwnershipRecord>& records) {
      // Whatever was recorded for this instance id before is about someone else's partition.
      std::erase_if(records, [&](const OwnershipRecord& o) {
        return o.card_id == card.uuid && o.instance == info.id;
      });
      records.push_back(record);
    });
  } catch (...) {
    undo();
    throw;
  }
  try {
    sink.Add(made);
  } catch (...) {
    // The host refused the report, so it will never know of this partition: take it back. If
    // the driver refuses, it stays recorded as ours, for the reclaim loop to retry.
    if (undo()) {
      try {
        UpdateOwners([&](std::vector<OwnershipRecord>& records) { std::erase(records, record); });
      } catch (const std::exception& e) {
        host_.Log(GPUSTACK_LOG_WARN, std::string("cannot drop an ownership record: ") + e.what());
      }
    }
    throw;
  }
}

void NvmlMigFamilyPlugin::DestroyPartition(const sdk::DestroyPartitionRequest& request) {
  EnsureLoaded();
  Card& card = FindCard(request.accelerator_id);
  for (const LivePartition& live : Live(card)) {
    if (live.partition.id != request.partition_id) continue;
    if (live.partition.owner.empty() || live.partition.owner != request.owner) {
      throw Error(GPUSTACK_STATUS_FAILED_PRECONDITION,
                  request.partition_id + " is not owned by " + request.owner + "; left as it is");
    }
    // The record goes first: should the process die midway, a partition is left unowned (an
    // administrator can see and remove it), never a record that could be mistaken for another.
    std::optional<OwnershipRecord> removed;
    UpdateOwners([&](std::vector<OwnershipRecord>& records) {
      for (auto it = records.begin(); it != records.end(); ++it) {
        if (Matches(*it, card.uuid, live.partition, live.instance_id)) {
          removed = *it;
          records.erase(it);
          return;
        }
      }
    });
    if (!removed) {  // another process released it meanwhile
      throw Error(GPUSTACK_STATUS_FAILED_PRECONDITION,
                  request.partition_id + " is no longer recorded as owned; left as it is");
    }
    auto fail = [&](const std::string& what, nvml::Return r) {
      // Restored under the id the partition is listed by now: once its compute instances are
      // gone it has no MIG device, and a record under the old id would be taken for stale and
      // dropped, leaving the GPU instance behind, owned by no one.
      OwnershipRecord restored = *removed;
      restored.partition_id = MigDeviceUuid(api_, card.uuid, card.handle, live.instance_id);
      try {
        UpdateOwners([&](std::vector<OwnershipRecord>& records) { records.push_back(restored); });
      } catch (const std::exception& e) {
        host_.Log(GPUSTACK_LOG_ERROR, std::string("cannot restore ownership: ") + e.what());
      }
      Fail(r == nvml::kErrorInUse ? GPUSTACK_STATUS_UNAVAILABLE : GPUSTACK_STATUS_INTERNAL,
           request.partition_id + ": destroying " + what + " (retry when idle)", r);
    };
    // Compute instances first (every compute profile, the REV1 ones included), then the GPU
    // instance.
    for (unsigned index = 0; index < nvml::kComputeInstanceProfileCount; ++index) {
      nvml::ComputeInstanceProfileInfo ci_profile{};
      if (api_.gpu_instance_get_compute_instance_profile_info(
              live.instance, index, nvml::kComputeEngineShared, &ci_profile) != nvml::kSuccess) {
        continue;
      }
      std::vector<nvml::ComputeInstance> cis(8);
      unsigned n = static_cast<unsigned>(cis.size());
      if (api_.gpu_instance_get_compute_instances(live.instance, ci_profile.id, cis.data(), &n) !=
          nvml::kSuccess) {
        continue;
      }
      for (unsigned i = 0; i < n; ++i) {
        if (const nvml::Return r = api_.compute_instance_destroy(cis[i]); r != nvml::kSuccess) {
          fail("a compute instance", r);
        }
      }
    }
    if (const nvml::Return r = api_.gpu_instance_destroy(live.instance); r != nvml::kSuccess) {
      fail("the GPU instance", r);
    }
    return;
  }
  throw Error(GPUSTACK_STATUS_NOT_FOUND,
              "no partition " + request.partition_id + " on " + card.uuid);
}

}  // namespace gpustack::support
