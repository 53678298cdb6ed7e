#include "gpustack_support/rocm_family.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gpustack_support/discovery.h"
#include "gpustack_support/pci_topology.h"

namespace gpustack::support {
namespace {

using sdk::Error;

std::string Trimmed(const char* text, size_t capacity) {
  return std::string(text, strnlen(text, capacity));
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

void RocmFamilyPlugin::Fail(const std::string& what, rsmi::Status status) const {
  const char* text = nullptr;
  if (api_.status_string == nullptr || api_.status_string(status, &text) != rsmi::kSuccess) {
    text = nullptr;
  }
  throw Error(GPUSTACK_STATUS_INTERNAL, "rocm_smi: " + what + ": " +
                                            (text != nullptr ? text : "error") + " (" +
                                            std::to_string(status) + ")");
}

bool RocmFamilyPlugin::EnsureLoaded() {
  if (initialized_) return true;
  if (!library_.Bind(&api_, &rsmi::Resolve)) return false;
  if (const rsmi::Status s = api_.init(0); s != rsmi::kSuccess) {
    try {
      Fail("initialization failed", s);
    } catch (const Error& e) {
      throw Error(GPUSTACK_STATUS_UNAVAILABLE, e.what());
    }
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
  GroupBuilder groups;
  std::vector<Card> cards;
  for (uint32_t i = 0; i < count; ++i) {
    auto query = [&](const char* what, rsmi::Status s) {
      if (s != rsmi::kSuccess) Fail("device " + std::to_string(i) + ": " + what, s);
    };
    char name[256] = {};
    uint64_t bdfid = 0;
    uint64_t vram = 0;
    query("name", api_.dev_name_get(i, name, sizeof name));
    query("PCI id", api_.dev_pci_id_get(i, &bdfid));
    query("VRAM", api_.dev_memory_total_get(i, rsmi::kMemTypeVram, &vram));
    const std::string bus = BusIdFromBdfId(bdfid);
    // A card is named by its unique id and exposed by its DRM nodes: without either it cannot
    // be handed out safely, so it is skipped rather than guessed.
    uint64_t unique = 0;
    const rsmi::Status unique_status = api_.dev_unique_id_get == nullptr
                                           ? rsmi::kNotSupported
                                           : api_.dev_unique_id_get(i, &unique);
    if (unique_status == rsmi::kNotSupported || (unique_status == rsmi::kSuccess && unique == 0)) {
      host_.Log(GPUSTACK_LOG_WARN, "skipping the GPU at " + bus + ": it has no unique id");
      continue;
    }
    query("unique id", unique_status);
    const gpustack_pci_device* pci = FindPci(host_.PciDevices(), bus);
    if (pci == nullptr) {
      host_.Log(GPUSTACK_LOG_WARN, "skipping the GPU at " + bus +
                                       ": not in the host's PCI inventory, so its DRM nodes are "
                                       "unknown");
      continue;
    }
    const std::string sysfs(sdk::View(pci->sysfs_path));
    const DrmNodes drm = ReadDrmNodes(sysfs);
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
    FillTopology(host_, bus, a);
    a.health = GPUSTACK_HEALTH_UNKNOWN;  // ROCm SMI has no health query
    a.logical_slice_count = traits_.logical_slice_count;
    a.cores_percentage_overcommit = traits_.cores_percentage_overcommit;

    const std::string product = Trimmed(name, sizeof name);
    const uint64_t card_memory = a.memory_mib;  // `a` is moved into the group below
    groups.Add(
        product,
        [&] {
          const KfdNode kfd = ReadKfdNode(SysfsRootOf(sysfs), bus);
          sdk::AcceleratorGroup g;
          g.memory_mib = card_memory;
          g.cores = kfd.compute_units;
          g.compute_capability = kfd.gfx_target;
          g.family = traits_.family_name && !kfd.gfx_target.empty()
                         ? traits_.family_name(kfd.gfx_target)
                         : std::string();
          g.driver_version = Trimmed(driver, sizeof driver);
          return g;
        },
        std::move(a));
    cards.push_back({uuid, i});
  }
  cards_ = std::move(cards);
  groups.Report(sink);
}

void RocmFamilyPlugin::SampleMetrics(const sdk::MetricsRequest& request, sdk::MetricsSink& sink) {
  if (!EnsureLoaded() && request.accelerator_ids.empty()) return;
  const std::vector<const Card*> cards = CardsFor(*this, cards_, request.accelerator_ids);
  // Processes are listed node-wide; each is charged to a card only when it runs on that card
  // alone (ROCm SMI does not split a process's VRAM between GPUs).
  std::vector<rsmi::ProcessInfo> processes;
  if (request.include_processes && api_.compute_process_info_get != nullptr) {
    uint32_t n = 0;
    const rsmi::Status s = api_.compute_process_info_get(nullptr, &n);
    if ((s == rsmi::kSuccess || s == rsmi::kInsufficientSize) && n > 0) {
      processes.resize(n + 8);
      n = static_cast<uint32_t>(processes.size());
      if (api_.compute_process_info_get(processes.data(), &n) == rsmi::kSuccess) {
        processes.resize(n);
      } else {
        processes.clear();
      }
    }
  }
  for (const Card* card : cards) {
    sdk::DeviceSample s;
    s.accelerator_id = card->uuid;
    s.timestamp_ns = host_.NowNs();
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
    sink.Add(s);

    for (const rsmi::ProcessInfo& p : processes) {
      if (api_.compute_process_gpus_get == nullptr) break;
      uint32_t gpus[64];
      uint32_t n = 64;
      if (api_.compute_process_gpus_get(p.process_id, gpus, &n) != rsmi::kSuccess) continue;
      n = std::min<uint32_t>(n, 64);
      if (std::find(gpus, gpus + n, card->index) == gpus + n) continue;
      sdk::ProcessSample ps;
      ps.accelerator_id = card->uuid;
      ps.pid = p.process_id;
      if (n == 1) {
        ps.memory_used_mib = static_cast<double>(p.vram_usage) / (1024.0 * 1024.0);
        ps.cores_utilization_percent = p.cu_occupancy;
      }
      sink.Add(ps);
    }
  }
}

}  // namespace gpustack::support
