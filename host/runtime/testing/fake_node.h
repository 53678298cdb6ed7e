// A node's sysfs tree for runtime tests: PCI functions of a vendor, in a temporary directory
// removed with the object, and RuntimeOptions pointing at it.
#ifndef GPUSTACK_HOST_RUNTIME_TESTING_FAKE_NODE_H_
#define GPUSTACK_HOST_RUNTIME_TESTING_FAKE_NODE_H_

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "host/runtime/node_runtime.h"

namespace gpustack::runtime::testing {

namespace fs = std::filesystem;

// A sysfs tree holding `count` PCI display functions of `vendor`.
class Node {
 public:
  Node() {
    root_ = fs::temp_directory_path() /
            ("gpustack-node-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(root_ / "bus/pci/devices");
  }
  ~Node() { fs::remove_all(root_); }
  void AddPci(uint16_t vendor, int count) {
    for (int i = 0; i < count; ++i) {
      char bus[32];
      std::snprintf(bus, sizeof bus, "0000:%02x:00.0", next_bus_++);
      const fs::path dir = root_ / "devices" / bus;
      fs::create_directories(dir);
      char text[16];
      std::snprintf(text, sizeof text, "0x%04x\n", vendor);
      std::ofstream(dir / "vendor") << text;
      std::ofstream(dir / "device") << "0x0001\n";
      std::ofstream(dir / "class") << "0x030200\n";
      std::ofstream(dir / "numa_node") << "-1\n";
      // libpci also reads the first bytes of configuration space.
      std::string config(64, '\0');
      config[0] = static_cast<char>(vendor & 0xff);
      config[1] = static_cast<char>(vendor >> 8);
      config[2] = 1;
      config[0x0a] = 0x02;
      config[0x0b] = 0x03;
      std::ofstream(dir / "config", std::ios::binary) << config;
      fs::create_directory_symlink(dir, root_ / "bus/pci/devices" / bus);
    }
  }
  RuntimeOptions Options() const {
    RuntimeOptions options;
    options.node_name = "node-a";
    options.pci.sysfs_root = root_.string();
    options.config.default_setting.source = "default";
    options.hook_deadline = std::chrono::milliseconds(2000);
    return options;
  }
  const fs::path& root() const { return root_; }

 private:
  static inline int counter_ = 0;
  fs::path root_;
  int next_bus_ = 0x10;
};

}  // namespace gpustack::runtime::testing

#endif  // GPUSTACK_HOST_RUNTIME_TESTING_FAKE_NODE_H_
