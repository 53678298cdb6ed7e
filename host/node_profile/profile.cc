#include "host/node_profile/profile.h"

#include <sys/statvfs.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "host/node_profile/keys.h"

namespace gpustack::node_profile {
namespace {

std::string Trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(begin, end - begin + 1));
}

std::string VendorName(const std::string& vendor_id, const std::string& implementer) {
  if (vendor_id == "GenuineIntel") return "Intel";
  if (vendor_id == "AuthenticAMD") return "AMD";
  if (vendor_id == "HygonGenuine") return "Hygon";
  if (vendor_id == "CentaurHauls" || vendor_id == "Shanghai") return "Zhaoxin";  // trimmed
  if (!implementer.empty()) {  // arm64: the MIDR implementer code
    if (implementer == "0x41") return "ARM";
    if (implementer == "0x48") return "HiSilicon";
    if (implementer == "0xc0") return "Ampere";
    return "ARM";
  }
  return {};
}

std::optional<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

uint64_t ParseSizeKib(std::string text) {  // "32K", "36608K", "1M"
  text = Trim(text);
  if (text.empty()) return 0;
  uint64_t multiplier = 1;
  if (text.back() == 'K')
    text.pop_back();
  else if (text.back() == 'M') {
    multiplier = 1024;
    text.pop_back();
  }
  try {
    return std::stoull(text) * multiplier;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

CpuProfile ParseCpuInfo(std::string_view text) {
  CpuProfile cpu;
  std::string vendor_id, implementer;
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::set<std::string> sockets;
  uint32_t processors = 0;
  std::string physical_id;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (key == "processor")
      ++processors;
    else if (key == "vendor_id" && vendor_id.empty())
      vendor_id = value;
    else if (key == "CPU implementer" && implementer.empty())
      implementer = value;
    else if (key == "model name" && cpu.name.empty())
      cpu.name = value;
    else if (key == "cpu family" && cpu.family.empty())
      cpu.family = value;
    else if (key == "model" && cpu.model.empty())
      cpu.model = value;
    else if (key == "CPU part" && cpu.model.empty())
      cpu.model = value;
    else if (key == "stepping" && cpu.stepping.empty())
      cpu.stepping = value;
    else if (key == "CPU variant" && cpu.stepping.empty())
      cpu.stepping = value;
    else if (key == "cpu MHz" && cpu.clock_mhz == 0)
      cpu.clock_mhz = std::atof(value.c_str());
    else if (key == "clflush size" && cpu.cache_line == 0)
      cpu.cache_line = std::atoi(value.c_str());
    else if (key == "physical id") {
      physical_id = value;
      sockets.insert(value);
    } else if (key == "core id") {
      cores.insert({physical_id, value});
    }
  }
  cpu.manufacturer = VendorName(vendor_id, implementer);
  cpu.logical_cores = processors;
  cpu.sockets = sockets.empty() ? (processors > 0 ? 1 : 0) : static_cast<uint32_t>(sockets.size());
  // Without core ids (arm64, some VMs) every logical CPU is a core.
  cpu.physical_cores = cores.empty() ? processors : static_cast<uint32_t>(cores.size());
  cpu.threads_per_core = cpu.physical_cores == 0 ? 0 : processors / cpu.physical_cores;
  cpu.key = CpuKey(cpu.manufacturer, cpu.name, cpu.family, cpu.model);
  return cpu;
}

uint64_t ParseMemTotalMib(std::string_view text) {
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    uint64_t kib = 0;
    fields >> kib;
    return kib / 1024;
  }
  return 0;
}

Result<NodeProfile> ReadNodeProfile(const ProfileRoots& roots) {
  namespace fs = std::filesystem;
  NodeProfile profile;
  const auto cpuinfo = ReadFile(fs::path(roots.proc_root) / "cpuinfo");
  if (!cpuinfo) return Error{"cannot read " + roots.proc_root + "/cpuinfo"};
  const auto meminfo = ReadFile(fs::path(roots.proc_root) / "meminfo");
  if (!meminfo) return Error{"cannot read " + roots.proc_root + "/meminfo"};
  profile.cpu = ParseCpuInfo(*cpuinfo);
  profile.memory_mib = ParseMemTotalMib(*meminfo);

  const fs::path cpu0 = fs::path(roots.sysfs_root) / "devices/system/cpu/cpu0";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cpu0 / "cache", ec)) {
    const std::string level = Trim(ReadFile(entry.path() / "level").value_or(""));
    const std::string type = Trim(ReadFile(entry.path() / "type").value_or(""));
    const uint64_t kib = ParseSizeKib(ReadFile(entry.path() / "size").value_or(""));
    if (level == "1" && type == "Instruction") profile.cpu.cache_l1i_kib = kib;
    if (level == "1" && type == "Data") profile.cpu.cache_l1d_kib = kib;
    if (level == "2") profile.cpu.cache_l2_kib = kib;
    if (level == "3") profile.cpu.cache_l3_kib = kib;
    if (profile.cpu.cache_line == 0) {
      profile.cpu.cache_line = static_cast<uint32_t>(
          std::atoi(ReadFile(entry.path() / "coherency_line_size").value_or("0").c_str()));
    }
  }
  if (auto max = ReadFile(cpu0 / "cpufreq/cpuinfo_max_freq")) {
    profile.cpu.max_clock_mhz = std::atof(max->c_str()) / 1000.0;
  }

  fs::path dir = roots.data_dir;
  while (!dir.empty() && !fs::exists(dir, ec) && dir != dir.parent_path()) dir = dir.parent_path();
  profile.data_dir = roots.data_dir;
  struct statvfs st {};
  if (!dir.empty() && ::statvfs(dir.c_str(), &st) == 0) {
    profile.data_capacity_mib = static_cast<uint64_t>(st.f_blocks) * st.f_frsize / (1024 * 1024);
    profile.data_available_mib = static_cast<uint64_t>(st.f_bavail) * st.f_frsize / (1024 * 1024);
  }
  return profile;
}

nlohmann::json ToJson(const NodeProfile& p) {
  const CpuProfile& c = p.cpu;
  nlohmann::json cpu = {{"key", c.key},
                        {"manufacturer", c.manufacturer},
                        {"name", c.name},
                        {"family", c.family},
                        {"model", c.model},
                        {"stepping", c.stepping},
                        {"sockets", c.sockets},
                        {"physicalCores", c.physical_cores},
                        {"threadsPerPhysicalCore", c.threads_per_core},
                        {"logicalCores", c.logical_cores},
                        {"clockSpeedMHz", std::llround(c.clock_mhz)},
                        {"cacheLine", c.cache_line},
                        {"cache",
                         {{"l1i", std::to_string(c.cache_l1i_kib) + "Ki"},
                          {"l1d", std::to_string(c.cache_l1d_kib) + "Ki"},
                          {"l2", std::to_string(c.cache_l2_kib) + "Ki"},
                          {"l3", std::to_string(c.cache_l3_kib) + "Ki"}}}};
  if (c.max_clock_mhz > 0) cpu["maxClockSpeedMHz"] = std::llround(c.max_clock_mhz);
  return {{"cpu", cpu},
          {"memoryMiB", p.memory_mib},
          {"dataDirectory",
           {{"path", p.data_dir},
            {"capacityMiB", p.data_capacity_mib},
            {"availableMiB", p.data_available_mib}}}};
}

}  // namespace gpustack::node_profile
