// The node profile: what the CPU, memory and data disk of this node are, read from /proc and
// sysfs (both roots overridable, so tests run on fixture trees). Parsing is pure; reading is a
// thin layer over it.
#ifndef GPUSTACK_HOST_NODE_PROFILE_PROFILE_H_
#define GPUSTACK_HOST_NODE_PROFILE_PROFILE_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "host/common/result.h"

namespace gpustack::node_profile {

struct CpuProfile {
  std::string manufacturer;  // NFD's vendor name: "Intel", "AMD", "Hygon", "ARM"; empty if unknown
  std::string name;          // "model name": "AMD EPYC 7R32"
  std::string family;        // "23"
  std::string model;         // "49"
  std::string stepping;      // "0"
  uint32_t sockets = 0;
  uint32_t physical_cores = 0;
  uint32_t logical_cores = 0;
  uint32_t threads_per_core = 0;
  double clock_mhz = 0;      // current, from cpuinfo
  double max_clock_mhz = 0;  // cpufreq's maximum; 0 when not exposed
  uint32_t cache_line = 0;   // bytes
  uint64_t cache_l1i_kib = 0, cache_l1d_kib = 0, cache_l2_kib = 0, cache_l3_kib = 0;
  std::string key;  // gKey: "amd-epyc-7r32"
};

struct NodeProfile {
  CpuProfile cpu;
  uint64_t memory_mib = 0;         // MemTotal
  std::string data_dir;            // where capacity was measured
  uint64_t data_capacity_mib = 0;  // the data directory's filesystem
  uint64_t data_available_mib = 0;
};

struct ProfileRoots {
  std::string proc_root = "/proc";
  std::string sysfs_root = "/sys";
  std::string data_dir = "/var/lib/gpustack";
};

// Parses /proc/cpuinfo text (x86 and arm64 layouts). Pure.
CpuProfile ParseCpuInfo(std::string_view text);
// MemTotal from /proc/meminfo text, in MiB; 0 when absent. Pure.
uint64_t ParseMemTotalMib(std::string_view text);

// Reads the whole profile. Fails when cpuinfo or meminfo cannot be read; a missing data
// directory is measured at its nearest existing parent.
Result<NodeProfile> ReadNodeProfile(const ProfileRoots& roots);

nlohmann::json ToJson(const NodeProfile& profile);

}  // namespace gpustack::node_profile

#endif  // GPUSTACK_HOST_NODE_PROFILE_PROFILE_H_
