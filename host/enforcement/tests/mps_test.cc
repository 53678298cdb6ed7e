// The MPS lifecycle against a fake nvidia-cuda-mps-control (tests/fakes/mps), and MPS as a
// plugin's slicing setting.
#include "host/enforcement/mps.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "host/enforcement/enforcement.h"

namespace gpustack::enforcement {
namespace {

namespace fs = std::filesystem;

TEST(MpsRules, TheSlicingSettingIsOneOfFourAndAutoPrefersTheLibraryThenMps) {
  EXPECT_EQ(*ParseSlicing(""), Slicing::kAuto);
  EXPECT_EQ(*ParseSlicing("mps"), Slicing::kMps);
  auto bad = ParseSlicing("MPS");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("none of auto, preload, mps, none"), std::string::npos);
  EXPECT_EQ(ResolveSlicing(Slicing::kAuto, true, true), Slicing::kPreload);
  EXPECT_EQ(ResolveSlicing(Slicing::kAuto, false, true), Slicing::kMps);
  EXPECT_EQ(ResolveSlicing(Slicing::kAuto, false, false), Slicing::kNone);
  EXPECT_EQ(ResolveSlicing(Slicing::kNone, true, true), Slicing::kNone);
  EXPECT_EQ(ResolveSlicing(Slicing::kMps, true, false), Slicing::kMps);  // and then refused
}

TEST(MpsRules, AContainerGetsItsPinnedMemoryAndThreadShareForItsDeviceZero) {
  auto env = MpsEnv(3276, 50);
  ASSERT_EQ(env.size(), 3u);
  EXPECT_EQ(env[0].key, "CUDA_MPS_PIPE_DIRECTORY");
  EXPECT_EQ(env[0].value, kMpsPipeMount);
  EXPECT_EQ(env[1].key, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
  EXPECT_EQ(env[1].value, "0=3276M");
  EXPECT_EQ(env[2].key, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  EXPECT_EQ(env[2].value, "50");
  EXPECT_EQ(MpsEnv(1024, 100).size(), 2u);  // the whole card's threads: nothing to limit
}

class MpsLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("mps-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    MpsDaemons(GPUSTACK_FAKE_MPS_CONTROL, root_).Sync({});  // no sleeping daemon left behind
    fs::remove_all(root_);
  }
  // The fake's record of the calls made for `card`.
  std::vector<std::string> Calls(const std::string& card) {
    std::ifstream in(root_ / "operator/mps" / card / "log/fake-control.log");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  // A /proc whose init is in the IPC namespace `ipc` ("ipc:[N]"), or in this process's.
  fs::path HostProc(std::string ipc = "") {
    if (ipc.empty()) ipc = fs::read_symlink("/proc/self/ns/ipc").string();
    const fs::path proc = root_ / ("proc-" + ipc.substr(5, ipc.size() - 6));
    fs::create_directories(proc / "1/ns");
    fs::create_symlink(ipc, proc / "1/ns/ipc");
    return proc;
  }
  fs::path Script(const std::string& name, const std::string& body) {
    const fs::path path = root_ / name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path, fs::perms(0755));
    return path;
  }
  fs::path root_;
};

TEST_F(MpsLifecycle, TheFirstSliceStartsACardsDaemonARestartAdoptsItAndTheLastStopsIt) {
  MpsDaemons mps(GPUSTACK_FAKE_MPS_CONTROL, root_);
  EXPECT_FALSE(mps.Running("GPU-0"));
  ASSERT_TRUE(mps.Ensure("GPU-0"));
  EXPECT_TRUE(mps.Running("GPU-0"));
  EXPECT_EQ(mps.PipeDir("GPU-0"), root_ / "operator/mps/GPU-0/pipe");
  ASSERT_TRUE(mps.Ensure("GPU-0"));  // running: nothing started twice
  auto calls = Calls("GPU-0");
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "-d devices=GPU-0"), 1) << calls.size();

  MpsDaemons restarted(GPUSTACK_FAKE_MPS_CONTROL, root_);  // a new node daemon process
  EXPECT_TRUE(restarted.Running("GPU-0"));
  EXPECT_TRUE(restarted.Sync({"GPU-0", "GPU-1"}).empty());
  calls = Calls("GPU-0");
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "-d devices=GPU-0"), 1);  // adopted
  EXPECT_TRUE(restarted.Running("GPU-1"));
  EXPECT_TRUE(restarted.Sync({"GPU-1"}).empty());  // GPU-0's last slice went
  EXPECT_FALSE(restarted.Running("GPU-0"));
  calls = Calls("GPU-0");
  EXPECT_NE(std::find(calls.begin(), calls.end(), "quit devices=GPU-0"), calls.end());
  EXPECT_TRUE(restarted.Sync({}).empty());
  EXPECT_FALSE(restarted.Running("GPU-1"));
}

TEST_F(MpsLifecycle, AControlProgramThatFailsOrHangsIsReportedAndNeverWaitedOnForever) {
  MpsDaemons broken(Script("broken", "echo 'MPS is not supported on this GPU' >&2; exit 1"), root_);
  auto refused = broken.Ensure("GPU-0");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("cannot start the MPS control daemon of card GPU-0"),
            std::string::npos)
      << refused.error();
  EXPECT_NE(refused.error().find("MPS is not supported on this GPU"), std::string::npos);
  EXPECT_EQ(refused.failure().code, Code::kUnavailable);

  MpsDaemons hung(Script("hung", "exec sleep 30"), root_, std::chrono::milliseconds(200));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(hung.Ensure("GPU-0"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_FALSE(broken.Ensure("../x"));  // never a directory outside its own
}

runtime::PluginStatus NvidiaWith(std::map<std::string, std::string> settings,
                                 std::string manufacturer = "nvidia") {
  runtime::PluginStatus status;
  status.name = manufacturer;
  status.state = runtime::PluginState::kRunning;
  runtime::PluginIdentity id;
  id.manufacturer = manufacturer;
  id.capabilities = GPUSTACK_CAP_LOGICAL_SLICING;
  client::EnforcerDeclaration e;
  e.name = "hami-core";
  e.files = {"libvgpu.so"};
  e.preload = {"libvgpu.so"};
  id.enforcer = e;
  status.identity = id;
  sdk::AcceleratorGroup group;
  group.runtime_version = "12.4";
  group.accelerators = {{.id = "GPU-0"}};
  status.groups = {group};
  status.settings = std::move(settings);
  return status;
}

TEST_F(MpsLifecycle, UnderMpsASliceGetsItsCardsDaemonAndBudgetAndNeedsTheHostsIpc) {
  SliceEnforcement enforcement(
      {.data_dir = root_, .host_data_dir = "/host", .proc_root = HostProc()});
  enforcement.Prepare(
      {NvidiaWith({{"slicing", "mps"}, {"mps_control", GPUSTACK_FAKE_MPS_CONTROL}})});
  ASSERT_EQ(enforcement.States().at(0).binding, Binding::kBound) << enforcement.States()[0].message;
  EXPECT_NE(enforcement.States()[0].message.find("NVIDIA MPS"), std::string::npos);
  Json pod = {{"metadata", {{"uid", "u1"}}},
              {"spec", {{"containers", Json::array({{{"name", "main"}}})}}}};
  auto refused = enforcement.EditsForSlice("nvidia", "GPU-0", pod, "main", {}, {3276, 50});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.failure().code, Code::kFailedPrecondition);
  EXPECT_NE(refused.error().find("hostIPC"), std::string::npos);
  pod["spec"]["hostIPC"] = true;
  auto edits = enforcement.EditsForSlice("nvidia", "GPU-0", pod, "main", {}, {3276, 50});
  ASSERT_TRUE(edits) << edits.error();
  std::map<std::string, std::string> env, mounts;
  for (const auto& e : *edits) {
    if (e.kind == GPUSTACK_EDIT_ENV) env[e.key] = e.value;
    if (e.kind == GPUSTACK_EDIT_MOUNT) mounts[e.container_path] = e.host_path;
  }
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=3276M");
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
  EXPECT_EQ(mounts[kMpsPipeMount], "/host/operator/mps/GPU-0/pipe");
  EXPECT_EQ(mounts.count("/etc/ld.so.preload"), 0u);  // no library under MPS
  MpsDaemons mps(GPUSTACK_FAKE_MPS_CONTROL, root_);
  EXPECT_TRUE(mps.Running("GPU-0"));
  enforcement.SyncMps([] { return std::map<std::string, std::set<std::string>>{}; });
  EXPECT_FALSE(mps.Running("GPU-0"));  // the last slice is gone
}

TEST_F(MpsLifecycle, WithoutMpsOrALibraryTheNodeSaysItsSlicesAreOnlyCounted) {
  SliceEnforcement enforcement(
      {.data_dir = root_, .host_data_dir = root_, .proc_root = HostProc()});
  auto message = [&](std::map<std::string, std::string> settings,
                     std::string manufacturer = "nvidia") {
    enforcement.Prepare({NvidiaWith(std::move(settings), std::move(manufacturer))});
    EXPECT_EQ(enforcement.States().at(0).binding, Binding::kCountedOnly);
    return enforcement.States().at(0).message;
  };
  EXPECT_NE(message({{"slicing", "none"}}).find("slicing is none"), std::string::npos);
  EXPECT_NE(message({{"slicing", "sometimes"}}).find("\"sometimes\" is none of"),
            std::string::npos);
  EXPECT_NE(message({{"slicing", "mps"}, {"mps_control", (root_ / "absent").string()}})
                .find("nvidia-cuda-mps-control is not here"),
            std::string::npos);
  EXPECT_NE(message({{"slicing", "mps"}}, "iluvatar").find("MPS is NVIDIA's"), std::string::npos);
  EXPECT_NE(message({{"slicing", "preload"}}).find("has no source"), std::string::npos);
  // auto: no library source, and MPS is here: MPS.
  enforcement.Prepare({NvidiaWith({{"mps_control", GPUSTACK_FAKE_MPS_CONTROL}})});
  EXPECT_EQ(enforcement.States().at(0).binding, Binding::kBound);
}

// An MPS server started outside the host's IPC namespace is out of reach of the Pods' clients
// (which would run unbounded): `auto` does not take MPS there, and `mps` says why it cannot.
TEST_F(MpsLifecycle, OutsideTheHostsIpcNamespaceMpsIsNotTakenAndTheNodeSaysWhy) {
  const fs::path proc = HostProc("ipc:[1]");  // the host's init, in another namespace
  EXPECT_EQ(HostIpcOf(proc), HostIpc::kSeparate);
  EXPECT_EQ(HostIpcOf(HostProc()), HostIpc::kShared);
  // Without the host's init to compare with, only the kernel's initial namespace is known to be
  // the host's.
  const bool initial = fs::read_symlink("/proc/self/ns/ipc") == kInitialIpcNamespace;
  EXPECT_EQ(HostIpcOf(root_ / "no-proc"), initial ? HostIpc::kShared : HostIpc::kUnknown);

  SliceEnforcement enforcement({.data_dir = root_, .host_data_dir = root_, .proc_root = proc});
  enforcement.Prepare({NvidiaWith({{"mps_control", GPUSTACK_FAKE_MPS_CONTROL}})});
  EXPECT_EQ(enforcement.States().at(0).binding, Binding::kCountedOnly);
  EXPECT_NE(enforcement.States()[0].message.find("deviceManager.hostIPC"), std::string::npos)
      << enforcement.States()[0].message;
  enforcement.Prepare(
      {NvidiaWith({{"slicing", "mps"}, {"mps_control", GPUSTACK_FAKE_MPS_CONTROL}})});
  EXPECT_EQ(enforcement.States().at(0).binding, Binding::kCountedOnly);
  EXPECT_NE(enforcement.States()[0].message.find("IPC namespace"), std::string::npos)
      << enforcement.States()[0].message;
}

}  // namespace
}  // namespace gpustack::enforcement
