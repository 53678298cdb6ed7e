#include "host/pci/pci_inventory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gpustack::pci {
namespace {

namespace fs = std::filesystem;

// A sysfs tree in a temporary directory, with libpci's file layout.
class FakeSysfs {
 public:
  FakeSysfs()
      : root_(fs::temp_directory_path() /
              ("gpustack-pci-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(root_ / "bus/pci/devices");
  }
  ~FakeSysfs() { fs::remove_all(root_); }

  void AddDevice(const std::string& bdf, const std::string& vendor, const std::string& device,
                 const std::string& klass, const std::string& numa = "",
                 const std::string& subsystem_vendor = "", const std::string& subsystem = "") {
    const fs::path dir = root_ / "bus/pci/devices" / bdf;
    fs::create_directories(dir);
    Write(dir / "vendor", vendor);
    Write(dir / "device", device);
    Write(dir / "class", klass);
    if (!numa.empty()) Write(dir / "numa_node", numa);
    if (!subsystem_vendor.empty()) Write(dir / "subsystem_vendor", subsystem_vendor);
    if (!subsystem.empty()) Write(dir / "subsystem_device", subsystem);
  }
  std::string root() const { return root_.string(); }
  fs::path path() const { return root_; }

  static void Write(const fs::path& file, const std::string& text) {
    std::ofstream(file) << text << "\n";
  }

 private:
  static inline int counter_ = 0;
  fs::path root_;
};

TEST(PciInventory, ScansFixtureTreeAndKeepsAcceleratorClasses) {
  FakeSysfs sysfs;
  sysfs.AddDevice("0000:3b:00.0", "0x10de", "0x2335", "0x030200", "1", "0x10de", "0x18be");
  sysfs.AddDevice("0000:00:1f.0", "0x8086", "0xa1c1", "0x060100");  // ISA bridge: not kept
  sysfs.AddDevice("0000:5e:00.0", "0x1002", "0x747e", "0x030000", "0");
  sysfs.AddDevice("0000:af:00.0", "0x15b3", "0x101b", "0x020000");  // NIC: kept (class 02)

  auto devices = Scan({sysfs.root(), {"02", "03", "0b", "12"}});
  ASSERT_TRUE(devices) << devices.error();
  ASSERT_EQ(devices->size(), 3u);
  const PciDevice& h200 = (*devices)[0];
  EXPECT_EQ(h200.bus_id, "0000:3b:00.0");
  EXPECT_EQ(h200.vendor_id, 0x10de);
  EXPECT_EQ(h200.device_id, 0x2335);
  EXPECT_EQ(h200.class_code, 0x030200u);
  EXPECT_EQ(h200.subsystem_vendor_id, 0x10de);
  EXPECT_EQ(h200.subsystem_device_id, 0x18be);
  EXPECT_EQ(h200.numa_node, 1);
  EXPECT_EQ(h200.sysfs_path, sysfs.root() + "/bus/pci/devices/0000:3b:00.0");
  EXPECT_EQ((*devices)[1].bus_id, "0000:5e:00.0");
  EXPECT_EQ((*devices)[1].numa_node, 0);
  EXPECT_EQ((*devices)[2].vendor_id, 0x15b3);
}

TEST(PciInventory, EmptyPrefixListKeepsEverything) {
  FakeSysfs sysfs;
  sysfs.AddDevice("0000:00:1f.0", "0x8086", "0xa1c1", "0x060100");
  auto devices = Scan({sysfs.root(), {}});
  ASSERT_TRUE(devices) << devices.error();
  EXPECT_EQ(devices->size(), 1u);
  EXPECT_EQ(devices->front().numa_node, -1) << "no numa_node file means unknown";
}

TEST(PciInventory, MissingTreeIsAnErrorNotAnExit) {
  auto devices = Scan({"/nonexistent-sysfs-root", {}});
  ASSERT_FALSE(devices);
  EXPECT_NE(devices.error().find("/nonexistent-sysfs-root/bus/pci"), std::string::npos)
      << devices.error();
}

TEST(PciInventory, MalformedEntryIsAnErrorNotAnExit) {
  FakeSysfs sysfs;
  sysfs.AddDevice("0000:3b:00.0", "0x10de", "0x2335", "0x030200");
  fs::create_directories(sysfs.path() / "bus/pci/devices/not-a-bus-id");
  auto devices = Scan({sysfs.root(), {}});
  ASSERT_FALSE(devices);
  EXPECT_NE(devices.error().find("not-a-bus-id is not a PCI bus id"), std::string::npos)
      << devices.error();

  // The process survived and libpci still works afterwards.
  FakeSysfs good;
  good.AddDevice("0000:3b:00.0", "0x10de", "0x2335", "0x030200");
  EXPECT_TRUE(Scan({good.root(), {}}));
}

TEST(PciInventory, DeviceMissingARequiredFileIsAnError) {
  FakeSysfs sysfs;
  sysfs.AddDevice("0000:3b:00.0", "0x10de", "0x2335", "0x030200");
  fs::remove(sysfs.path() / "bus/pci/devices/0000:3b:00.0/vendor");
  auto devices = Scan({sysfs.root(), {}});
  ASSERT_FALSE(devices);
  EXPECT_NE(devices.error().find("device 0000:3b:00.0 has no readable vendor file"),
            std::string::npos)
      << devices.error();
}

TEST(PciInventory, ParsesClassPrefixes) {
  auto parsed = ParseClassPrefixes("02,03,0B,12");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(*parsed, (std::vector<std::string>{"02", "03", "0b", "12"}));
  for (const char* bad : {"", "3", "030", "0x", "03,,12", "zz"}) {
    auto result = ParseClassPrefixes(bad);
    EXPECT_FALSE(result) << "accepted '" << bad << "'";
    if (!result) {
      EXPECT_NE(result.error().find("two hex digits"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace gpustack::pci
