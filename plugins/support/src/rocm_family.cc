#include "gpustack_support/rocm_family.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gpustack_support/discovery.h"

namespace gpustack::support {
namespace {

using sdk::Error;

std::string Trimmed(const char* text, size_t capacity) {
  return std::string(text, strnlen(text, capacity));
}

// Why a failed ROCm SMI call leaves processes unlisted.
gpustack_process_listing ListingFailure(rsmi::Status s) {
  if (s == rsmi::kNotSupported) return GPUSTACK_PROCESS_LISTING_UNSUPPORTED;
  if (s == rsmi::kPermission) return GPUSTACK_PROCESS_LISTING_PERMISSION;
  return GPUSTACK_PROCESS_LISTING_DRIVER_ERROR;
}

// Every compute process on the node (ROCm SMI lists them node-wide), or why not all.
gpustack_process_listing ComputeProcesses(const rsmi::Api& api,
                                          std::vector<rsmi::ProcessInfo>& out) {
  if (api.compute_process_info_get == nullptr || api.compute_process_gpus_get == nullptr)
    return GPUSTACK_PROCESS_LISTING_UNSUPPORTED;
  uint32_t n = 0;
  rsmi::Status s = api.compute_process_info_get(nullptr, &n);
  if (s == rsmi::kSuccess && n == 0) return GPUSTACK_PROCESS_LISTING_COMPLETE;
  if (s != rsmi::kSuccess && s != rsmi::kInsufficientSize) return ListingFailure(s);
  out.resize(n + 8);  // room for processes starting meanwhile
  n = static_cast<uint32_t>(out.size());
  s = api.compute_process_info_get(out.data(), &n);
  if (s == rsmi::kInsufficientSize) return GPUSTACK_PROCESS_LISTING_TRUNCATED;
  if (s != rsmi::kSuccess) return ListingFailure(s);
  out.resize(std::min<size_t>(n, out.size()));
  return GPUSTACK_PROCESS_LISTING_COMPLETE;
}

// "<sysfs root>/bus/pci/devices/<bdf>" -> "<sysfs root>".
std::string SysfsRootOf(const std::string& device_path) {
  const size_t at = device_path.rfind("/bus/pci/devices/");
  return at == std::string::npos ? std::string("/sys") : device_path.substr(0, at);
}

}  // namespace

std::string GfxTarget(uint32_t version) {
  if (version == 0) return {};
  char text[32];
  std::snprintf(text, sizeof text, "gfx%u%x%x", version / 10000, (version / 100) % 100,
                version % 100);
  return text;
}

KfdNode ReadKfdNode(const std::string& sysfs_root, const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) return {};
  const uint64_t location = (bus << 8) | (device << 3) | function;
  std::error_code ec;
  for (const auto& node :
       std::filesystem::directory_iterator(sysfs_root + "/class/kfd/kfd/topology/nodes", ec)) {
    std::ifstream in(node.path() / "properties");
    std::map<std::string, uint64_t> props;
    std::string key;
    uint64_t value = 0;
    while (in >> key >> value) props[key] = value;
    if (props["location_id"] != location || props["domain"] != domain || props["simd_count"] == 0) {
      continue;  // another GPU, or a CPU node (no SIMDs)
    }
    KfdNode out;
    if (props["simd_per_cu"] > 0) {
      out.compute_units = static_cast<uint32_t>(props["simd_count"] / props["simd_per_cu"]);
    }
    out.gfx_target = GfxTarget(static_cast<uint32_t>(props["gfx_target_version"]));
    return out;
  }
  return {};
}

RocmFamilyPlugin::RocmFamilyPlugin(const sdk::Host& host, RocmFamilyTraits traits)
    : host_(host), traits_(std::move(traits)), library_(host_, traits_.library) {}

RocmFamilyPlugin::~RocmFamilyPlugin() {
  if (initialized_) api_.shut_down();
}

std::string RocmFamilyPlugin::StatusText(rsmi::Status status) const {
  const char* text = nullptr;
  if (api_.status_string == nullptr || api_.status_string(status, &text) != rsmi::kSuccess) {
    text = nullptr;
  }
  return sdk::ErrorText(text, status);
}

void RocmFamilyPlugin::Fail(const std::string& what, rsmi::Status status) const {
  throw Error(GPUSTACK_STATUS_INTERNAL, "rocm_smi: " + what + ": " + StatusText(status));
}

bool RocmFamilyPlugin::EnsureLoaded() {
  if (initialized_) return true;
  if (!library_.Bind(&api_, &rsmi::Resolve)) return false;
  if (const rsmi::Status s = api_.init(0); s != rsmi::kSuccess) {
    throw Error(GPUSTACK_STATUS_UNAVAILABLE, "rocm_smi: initialization failed: " + StatusText(s));
  }
  initialized_ = true;
  return true;
}

void RocmFamilyPlugin::Discover(sdk::DiscoverySink& sink) {
  if (!EnsureLoaded()) return;
  uint32_t count = 0;
  if (const rsmi::Status s = api_.num_monitor_devices(&count); s != rsmi::kSuccess) {
    Fail("counting devices", s);
  }
  char driver[128] = {};
  if (api_.version_str_get == nullptr ||
      api_.version_str_get(rsmi::kSwComponentDriver, driver, sizeof driver) != rsmi::kSuccess) {
    driver[0] = '\0';
  }
  // A card that cannot be read is reported unhealthy as it was last read, never hiding the
  // others; the library failing as a whole (above) fails the pass.
  sdk::CardBook::Pass pass = book_.Begin();
  std::vector<Card> cards;
  for (uint32_t i = 0; i < count; ++i) {
    std::string failure;
    auto ok = [&](const char* what, rsmi::Status s) {
      if (s != rsmi::kSuccess && failure.empty())
        failure = std::string(what) + ": " + StatusText(s);
      return failure.empty();
    };
    char name[256] = {};
    uint64_t bdfid = 0;
    uint64_t vram = 0;
    uint64_t unique = 0;
    const rsmi::Status unique_status = api_.dev_unique_id_get == nullptr
                                           ? rsmi::kNotSupported
                                           : api_.dev_unique_id_get(i, &unique);
    if (!ok("name", api_.dev_name_get(i, name, sizeof name)) ||
        !ok("PCI id", api_.dev_pci_id_get(i, &bdfid)) ||
        !ok("VRAM", api_.dev_memory_total_get(i, rsmi::kMemTypeVram, &vram)) ||
        (unique_status != rsmi::kNotSupported && !ok("unique id", unique_status))) {
      const std::string reason = "rocm_smi: " + failure;
      KeepUnreadable(
          pass, book_, host_, i, "device " + std::to_string(i), reason,
          [&](const sdk::Accelerator& known) {
            cards.push_back({known.id, i, static_cast<uint32_t>(cards.size()), false,
                             known.physical_indexes.at(0), known.physical_indexes.at(1)});
          });
      continue;
    }
    const std::string bus = rsmi::BusIdFromBdfId(bdfid);
    // A card is named by its unique id and exposed by its DRM nodes: without either it cannot
    // be handed out safely, so it is left out rather than guessed.
    if (unique_status == rsmi::kNotSupported || unique == 0) {
      host_.Log(GPUSTACK_LOG_WARN, "skipping the GPU at " + bus + ": it has no unique id");
      continue;
    }
    const gpustack_pci_device* pci = sdk::FindPci(host_.PciDevices(), bus);
    if (pci == nullptr) {
      host_.Log(GPUSTACK_LOG_WARN, "skipping the GPU at " + bus +
                                       ": not in the host's PCI inventory, so its DRM nodes are "
                                       "unknown");
      continue;
    }
    const std::string sysfs(sdk::View(pci->sysfs_path));
    const sdk::DrmNodes drm = sdk::ReadDrmNodes(sysfs);
    if (!drm.card || !drm.render) {
      host_.Log(GPUSTACK_LOG_WARN, "skipping the GPU at " + bus + ": no DRM card/render node");
      continue;
    }
    char uuid[40];
    std::snprintf(uuid, sizeof uuid, "GPU-%016" PRIx64, unique);

    sdk::Accelerator a;
    a.id = uuid;
    a.physical_indexes = {*drm.card, *drm.render};
    a.memory_mib = vram / (1024 * 1024);
    sdk::FillTopology(host_, bus, a);
    a.health = GPUSTACK_HEALTH_UNKNOWN;  // ROCm SMI has no health query
    a.logical_slice_count = traits_.logical_slice_count;
    a.cores_percentage_overcommit = traits_.cores_percentage_overcommit;

    const KfdNode kfd = ReadKfdNode(SysfsRootOf(sysfs), bus);
    sdk::AcceleratorGroup g;
    g.memory_mib = a.memory_mib;
    g.cores = kfd.compute_units;
    g.compute_capability = kfd.gfx_target;
    g.family = traits_.family_name && !kfd.gfx_target.empty() ? traits_.family_name(kfd.gfx_target)
                                                              : std::string();
    g.driver_version = Trimmed(driver, sizeof driver);
    cards.push_back({uuid, i, static_cast<uint32_t>(cards.size()), true, *drm.card, *drm.render});
    pass.Found(i, Trimmed(name, sizeof name), std::move(g), std::move(a));
  }
  pass.Report(sink);
  cards_ = std::move(cards);
}

const RocmFamilyPlugin::Card& RocmFamilyPlugin::FindCard(std::string_view uuid) {
  const std::vector<const Card*> found =
      CardsFor(*this, cards_, std::vector<std::string>{std::string(uuid)});
  return *found.front();
}

InjectedCard RocmFamilyPlugin::Injected(const Card& card) const {
  return {card.uuid,
          card.position,
          card.uuid,
          {"dri/card" + std::to_string(card.drm_card),
           "dri/renderD" + std::to_string(card.drm_render)}};
}

void RocmFamilyPlugin::Grant(const sdk::Grant& grant, sdk::ContainerEditSink& sink) {
  std::vector<InjectedCard> cards;
  for (const std::string& id : grant.accelerator_ids) cards.push_back(Injected(FindCard(id)));
  EmitGrant(traits_.injection, grant, std::move(cards), sink);
}

void RocmFamilyPlugin::ListDeviceNodes(const std::vector<std::string>& ids,
                                       sdk::DeviceNodeSink& sink) {
  std::vector<InjectedCard> cards;
  for (const Card* card : CardsFor(*this, cards_, ids)) cards.push_back(Injected(*card));
  EmitDeviceNodes(traits_.injection, cards, sink);
}

void RocmFamilyPlugin::SampleMetrics(const sdk::MetricsRequest& request, sdk::MetricsSink& sink) {
  if (!EnsureLoaded() && request.accelerator_ids.empty()) return;
  const std::vector<const Card*> cards = CardsFor(*this, cards_, request.accelerator_ids);
  // Processes are listed node-wide; each is charged to a card only when it runs on that card
  // alone (ROCm SMI does not split a process's VRAM between GPUs).
  std::vector<rsmi::ProcessInfo> processes;
  const gpustack_process_listing listing = request.include_processes
                                               ? ComputeProcesses(api_, processes)
                                               : GPUSTACK_PROCESS_LISTING_COMPLETE;
  for (const Card* card : cards) {
    sdk::DeviceSample s;
    s.accelerator_id = card->uuid;
    s.timestamp_ns = host_.NowNs();
    if (!card->answered) s.health = GPUSTACK_HEALTH_UNHEALTHY;
    uint64_t total = 0, used = 0;
    if (api_.dev_memory_total_get(card->index, rsmi::kMemTypeVram, &total) == rsmi::kSuccess) {
      s.memory_total_mib = static_cast<double>(total) / (1024.0 * 1024.0);
      if (api_.dev_memory_usage_get != nullptr &&
          api_.dev_memory_usage_get(card->index, rsmi::kMemTypeVram, &used) == rsmi::kSuccess) {
        s.memory_used_mib = static_cast<double>(used) / (1024.0 * 1024.0);
        if (total > 0) s.memory_utilization_percent = 100.0 * static_cast<double>(used) / total;
      }
    }
    uint32_t busy = 0;
    if (api_.dev_busy_percent_get != nullptr &&
        api_.dev_busy_percent_get(card->index, &busy) == rsmi::kSuccess) {
      s.cores_utilization_percent = busy;
    }
    int64_t millidegrees = 0;
    if (api_.dev_temp_metric_get != nullptr &&
        api_.dev_temp_metric_get(card->index, rsmi::kTempTypeEdge, rsmi::kTempCurrent,
                                 &millidegrees) == rsmi::kSuccess) {
      s.temperature_celsius = static_cast<double>(millidegrees) / 1000.0;
    }
    uint64_t microwatts = 0;
    if (api_.dev_power_ave_get != nullptr &&
        api_.dev_power_ave_get(card->index, 0, &microwatts) == rsmi::kSuccess) {
      s.power_watts = static_cast<double>(microwatts) / 1e6;
    }
    std::vector<sdk::ProcessSample> rows;
    s.process_listing = listing;
    for (const rsmi::ProcessInfo& p : processes) {
      if (s.process_listing != GPUSTACK_PROCESS_LISTING_COMPLETE) break;
      uint32_t gpus[64];
      uint32_t n = 64;
      const rsmi::Status found = api_.compute_process_gpus_get(p.process_id, gpus, &n);
      if (found == rsmi::kNotFound) continue;  // it ended since the list was read
      if (found != rsmi::kSuccess) {
        s.process_listing = ListingFailure(found);  // it may have been on this card
        break;
      }
      n = std::min<uint32_t>(n, 64);
      if (std::find(gpus, gpus + n, card->index) == gpus + n) continue;
      sdk::ProcessSample ps;
      ps.accelerator_id = card->uuid;
      ps.pid = p.process_id;
      if (n == 1) {
        ps.memory_used_mib = static_cast<double>(p.vram_usage) / (1024.0 * 1024.0);
        ps.cores_utilization_percent = p.cu_occupancy;
      }
      rows.push_back(std::move(ps));
    }
    sink.Add(s);
    if (s.process_listing != GPUSTACK_PROCESS_LISTING_COMPLETE) continue;
    for (const sdk::ProcessSample& ps : rows) sink.Add(ps);
  }
}

}  // namespace gpustack::support
