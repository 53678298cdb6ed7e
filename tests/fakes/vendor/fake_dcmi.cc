// A fake DCMI (libdcmi.so): dcmi_* functions answering from the fixture's `dcmi` section:
//   driver_version, errors (see fake_fixture.h),
//   devices: [{card, device, logic, phy, chip_type, chip_name, aicore, bus_id, die: [5 words],
//              hbm_mb, hbm_used_mb, util, temperature, power_tenths, health,
//              processes: [{pid, used_mib}]}]
// dcmi_init loads the section once; DCMI has no shutdown.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

#include "dcmi_api.h"
#include "fake_fixture.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace dc = gpustack::ascend::dcmi;
using nlohmann::json;

namespace {

constexpr int kInvalidDeviceId = -8007;
constexpr int kNotReady = -8012;

struct State {
  std::mutex mu;
  bool loaded = false;
  std::string fixture_text;  // the scenario loaded
  json section;
  fake::Injector injector;
} g;

const json* Device(int card, int device) {
  for (const json& d : g.section["devices"]) {
    if (d.value("card", -1) == card && d.value("device", -1) == device) return &d;
  }
  return nullptr;
}

void CopyBytes(const std::string& value, unsigned char* out, size_t size) {
  std::memset(out, 0, size);
  std::memcpy(out, value.data(), std::min(value.size(), size - 1));
}

}  // namespace

#define GUARD(function)                   \
  std::lock_guard<std::mutex> lock(g.mu); \
  if (!g.loaded) return kNotReady;        \
  if (int injected = g.injector.Check(function)) return injected

#define DEVICE(card, dev)            \
  const json* d = Device(card, dev); \
  if (d == nullptr) return kInvalidDeviceId

EXPORT int dcmi_init() {
  std::lock_guard<std::mutex> lock(g.mu);
  if (std::string text = fake::FixtureText(); !g.loaded || text != g.fixture_text) {
    g.loaded = false;
    g.fixture_text = std::move(text);
    if (!fake::LoadSection("dcmi", &g.section)) return kNotReady;
    if (!g.section.contains("devices")) g.section["devices"] = json::array();
    g.injector.Reset(g.section);
    if (int injected = g.injector.Check("init")) return injected;
    g.loaded = true;
  }
  return dc::kOk;
}

EXPORT int dcmi_get_card_list(int* count, int* cards, int length) {
  GUARD("get_card_list");
  std::set<int> ids;
  for (const json& d : g.section["devices"]) ids.insert(d.value("card", 0));
  *count = 0;
  for (int id : ids) {
    if (*count >= length) break;
    cards[(*count)++] = id;
  }
  return dc::kOk;
}

EXPORT int dcmi_get_device_num_in_card(int card, int* count) {
  GUARD("get_device_num_in_card");
  *count =
      static_cast<int>(std::count_if(g.section["devices"].begin(), g.section["devices"].end(),
                                     [&](const json& d) { return d.value("card", -1) == card; }));
  return *count > 0 ? dc::kOk : kInvalidDeviceId;
}

EXPORT int dcmi_get_device_logic_id(int* logic, int card, int dev) {
  GUARD("get_device_logic_id");
  DEVICE(card, dev);
  *logic = d->value("logic", 0);
  return dc::kOk;
}

EXPORT int dcmi_get_device_phyid_from_logicid(unsigned logic, unsigned* phy) {
  GUARD("get_device_phyid_from_logicid");
  for (const json& d : g.section["devices"]) {
    if (d.value("logic", -1) == static_cast<int>(logic)) {
      *phy = d.value("phy", 0u);
      return dc::kOk;
    }
  }
  return kInvalidDeviceId;
}

EXPORT int dcmi_get_device_chip_info(int card, int dev, dc::ChipInfo* chip) {
  GUARD("get_device_chip_info");
  DEVICE(card, dev);
  *chip = {};
  CopyBytes(d->value("chip_type", "Ascend"), chip->chip_type, sizeof chip->chip_type);
  CopyBytes(d->value("chip_name", ""), chip->chip_name, sizeof chip->chip_name);
  CopyBytes("V1", chip->chip_ver, sizeof chip->chip_ver);
  chip->aicore_cnt = d->value("aicore", 0u);
  return dc::kOk;
}

EXPORT int dcmi_get_device_die_v2(int card, int dev, int type, dc::DieId* die) {
  GUARD("get_device_die_v2");
  DEVICE(card, dev);
  if (type != dc::kDieVdie || !d->contains("die")) return dc::kNotSupport;
  for (int i = 0; i < 5; ++i) die->soc_die[i] = (*d)["die"][i];
  return dc::kOk;
}

EXPORT int dcmi_get_device_pcie_info_v2(int card, int dev, dc::PcieInfoAll* pcie) {
  GUARD("get_device_pcie_info_v2");
  DEVICE(card, dev);
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  std::sscanf(d->value("bus_id", "").c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function);
  *pcie = {};
  pcie->venderid = 0x19e5;
  pcie->deviceid = 0xd802;
  pcie->domain = static_cast<int>(domain);
  pcie->bdf_busid = bus;
  pcie->bdf_deviceid = device;
  pcie->bdf_funcid = function;
  return dc::kOk;
}

EXPORT int dcmi_get_device_hbm_info(int card, int dev, dc::HbmInfo* hbm) {
  GUARD("get_device_hbm_info");
  DEVICE(card, dev);
  if (!d->contains("hbm_mb")) return dc::kNotSupport;
  *hbm = {};
  hbm->memory_size = (*d)["hbm_mb"];
  hbm->memory_usage = d->value("hbm_used_mb", 0ull);
  return dc::kOk;
}

EXPORT int dcmi_get_device_utilization_rate(int card, int dev, int type, unsigned* rate) {
  GUARD("get_device_utilization_rate");
  DEVICE(card, dev);
  if (type != dc::kUtilizationAicore || !d->contains("util")) return dc::kNotSupport;
  *rate = (*d)["util"];
  return dc::kOk;
}

EXPORT int dcmi_get_device_temperature(int card, int dev, int* temperature) {
  GUARD("get_device_temperature");
  DEVICE(card, dev);
  if (!d->contains("temperature")) return dc::kNotSupport;
  *temperature = (*d)["temperature"];
  return dc::kOk;
}

EXPORT int dcmi_get_device_power_info(int card, int dev, int* power) {
  GUARD("get_device_power_info");
  DEVICE(card, dev);
  if (!d->contains("power_tenths")) return dc::kNotSupport;
  *power = (*d)["power_tenths"];
  return dc::kOk;
}

EXPORT int dcmi_get_device_health(int card, int dev, unsigned* health) {
  GUARD("get_device_health");
  DEVICE(card, dev);
  *health = d->value("health", 0u);
  return dc::kOk;
}

EXPORT int dcmi_get_driver_version(char* version, unsigned length) {
  GUARD("get_driver_version");
  if (!g.section.contains("driver_version")) return dc::kNotSupport;
  std::snprintf(version, length, "%s", g.section["driver_version"].get<std::string>().c_str());
  return dc::kOk;
}

EXPORT int dcmi_get_device_resource_info(int card, int dev, dc::ProcMemInfo* info, int* count) {
  GUARD("get_device_resource_info");
  DEVICE(card, dev);
  const json processes = d->value("processes", json::array());
  *count = std::min(static_cast<int>(processes.size()), dc::kMaxProcesses);
  for (int i = 0; i < *count; ++i) {
    info[i] = {processes[i].value("pid", 0), processes[i].value("used_mib", 0UL) * 1024 * 1024};
  }
  return dc::kOk;
}
