#include "host/enforcement/enforcement.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace gpustack::enforcement {
namespace {

namespace fs = std::filesystem;

client::EnforcerDeclaration HamiCore() {
  client::EnforcerDeclaration e;
  e.name = "hami-core";
  e.files = {"libvgpu.so", "helper.so"};
  e.preload = {"libvgpu.so"};
  e.variant = GPUSTACK_ENFORCER_VARIANT_RUNTIME_MAJOR;
  e.variant_prefix = "cuda-";
  e.default_env = {{"LIBCUDA_LOG_LEVEL", "0"}, {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/x/c"}};
  return e;
}

Json PodWith(Json container, Json pod_security = nullptr) {
  Json pod = {{"metadata", {{"uid", "uid-1"}, {"namespace", "ns"}, {"name", "p"}}},
              {"spec", {{"containers", Json::array({container})}}}};
  if (!pod_security.is_null()) pod["spec"]["securityContext"] = pod_security;
  return pod;
}

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void Write(const fs::path& path, const std::string& text, fs::perms perms = fs::perms(0755)) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  fs::permissions(path, perms);
}

TEST(Rules, AVariantIsTheRuntimeMajorUnderItsPrefixAndNoneWithoutVariants) {
  EXPECT_EQ(*VariantOf(HamiCore(), "12.4"), "cuda-12");
  EXPECT_EQ(*VariantOf(HamiCore(), "13"), "cuda-13");
  auto none = VariantOf(HamiCore(), "");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("names none"), std::string::npos) << none.error();
  EXPECT_FALSE(VariantOf(HamiCore(), "v12"));
  client::EnforcerDeclaration flat = HamiCore();
  flat.variant = GPUSTACK_ENFORCER_VARIANT_NONE;
  EXPECT_EQ(*VariantOf(flat, "whatever"), "");
}

TEST(Rules, ThePreloadFileNamesThePreloadedFilesAtTheirContainerPath) {
  client::EnforcerDeclaration e = HamiCore();
  e.preload = {"a.so", "b.so"};
  EXPECT_EQ(PreloadText("thead", e),
            "/usr/local/gpustack/thead/a.so\n/usr/local/gpustack/thead/b.so\n");
}

TEST(Rules, DefaultEnvIsGivenOnlyWhereNeitherTheContainerNorTheGrantSetsTheKey) {
  const Json pod = PodWith(
      {{"name", "main"}, {"env", Json::array({{{"name", "LIBCUDA_LOG_LEVEL"}, {"value", "4"}}})}});
  auto env = DefaultEnvFor(HamiCore(), pod, "main", {});
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0].first, "CUDA_DEVICE_MEMORY_SHARED_CACHE");
  // Another container's env says nothing about this one.
  EXPECT_EQ(DefaultEnvFor(HamiCore(), pod, "other", {}).size(), 2u);
  // The plugin's own edit wins over the declaration's default.
  std::vector<sdk::ContainerEdit> granted = {
      {.kind = GPUSTACK_EDIT_ENV, .key = "CUDA_DEVICE_MEMORY_SHARED_CACHE", .value = "/y"}};
  EXPECT_TRUE(DefaultEnvFor(HamiCore(), pod, "main", granted).empty());
  // Init containers are looked up too.
  Json init = PodWith({{"name", "main"}});
  init["spec"]["initContainers"] =
      Json::array({{{"name", "setup"}, {"env", Json::array({{{"name", "LIBCUDA_LOG_LEVEL"}}})}}});
  EXPECT_EQ(DefaultEnvFor(HamiCore(), init, "setup", {}).size(), 1u);
}

TEST(Rules, TheContainersUserComesFromItsSecurityContextOverThePods) {
  EXPECT_FALSE(RunAsOf(PodWith({{"name", "main"}}), "main"));
  EXPECT_FALSE(RunAsOf(PodWith({{"name", "main"}}, {{"runAsGroup", 5}}), "main"));
  auto pods =
      RunAsOf(PodWith({{"name", "main"}}, {{"runAsUser", 1000}, {"runAsGroup", 5}}), "main");
  ASSERT_TRUE(pods);
  EXPECT_EQ(pods->uid, 1000u);
  EXPECT_EQ(*pods->gid, 5u);
  auto own = RunAsOf(
      PodWith({{"name", "main"}, {"securityContext", {{"runAsUser", 7}}}}, {{"runAsUser", 1000}}),
      "main");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->uid, 7u);
  EXPECT_FALSE(own->gid);
}

class Staging : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("enforcement-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "data");
    fs::permissions(root_, fs::perms(0755));
    source_ = root_ / "source";
    Write(source_ / "libvgpu.so", "flat build");
    Write(source_ / "helper.so", "helper");
  }
  void TearDown() override { fs::remove_all(root_); }

  runtime::PluginStatus Nvidia(std::optional<client::EnforcerDeclaration> enforcer,
                               std::string runtime_version = "12.4") const {
    runtime::PluginStatus status;
    status.name = "nvidia";
    status.state = runtime::PluginState::kRunning;
    status.library_path = (root_ / "plugins" / "libgpustack_nvidia.so").string();
    runtime::PluginIdentity id;
    id.manufacturer = "nvidia";
    id.capabilities = GPUSTACK_CAP_LOGICAL_SLICING;
    id.enforcer = std::move(enforcer);
    status.identity = id;
    sdk::AcceleratorGroup group;
    group.runtime_version = std::move(runtime_version);
    group.accelerators = {{.id = "GPU-0"}, {.id = "GPU-1"}};
    status.groups = {group};
    return status;
  }
  runtime::PluginStatus WithSource(runtime::PluginStatus status) const {
    status.settings[kEnforcerDirSetting] = source_.string();
    return status;
  }
  SliceEnforcement Make() const {
    return SliceEnforcement({.data_dir = root_ / "data", .host_data_dir = "/host/gpustack"});
  }

  fs::path root_, source_;
};

const sdk::ContainerEdit* MountAt(const std::vector<sdk::ContainerEdit>& edits,
                                  const std::string& container_path) {
  for (const auto& e : edits) {
    if (e.kind == GPUSTACK_EDIT_MOUNT && e.container_path == container_path) return &e;
  }
  return nullptr;
}

TEST_F(Staging, AStagedEnforcerIsMountedReadOnlyWithItsPreloadFileAndAWorkingDirectory) {
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({WithSource(Nvidia(HamiCore()))});
  const fs::path stage = root_ / "data/operator/lib/nvidia/cuda-12";
  EXPECT_EQ(Read(stage / "libvgpu.so"), "flat build");
  EXPECT_EQ(Read(stage / "helper.so"), "helper");
  EXPECT_EQ(Read(stage / "ld.so.preload"), "/usr/local/gpustack/nvidia/libvgpu.so\n");
  ASSERT_EQ(enforcement.States().size(), 1u);
  EXPECT_EQ(enforcement.States()[0].binding, Binding::kBound) << enforcement.States()[0].message;
  EXPECT_EQ(enforcement.States()[0].enforcer, "hami-core");

  auto edits =
      enforcement.EditsForSlice("nvidia", "GPU-1", PodWith({{"name", "main"}}), "main", {});
  ASSERT_TRUE(edits) << edits.error();
  const auto* libs = MountAt(*edits, "/usr/local/gpustack/nvidia");
  ASSERT_NE(libs, nullptr);
  EXPECT_EQ(libs->host_path, "/host/gpustack/operator/lib/nvidia/cuda-12");
  EXPECT_TRUE(libs->read_only);
  const auto* preload = MountAt(*edits, "/etc/ld.so.preload");
  ASSERT_NE(preload, nullptr);
  EXPECT_EQ(preload->host_path, "/host/gpustack/operator/lib/nvidia/cuda-12/ld.so.preload");
  EXPECT_TRUE(preload->read_only);
  const auto* work = MountAt(*edits, kWorkdirMount);
  ASSERT_NE(work, nullptr);
  EXPECT_EQ(work->host_path, "/host/gpustack/operator/pods/uid-1/main");
  EXPECT_FALSE(work->read_only);
  const fs::path workdir = root_ / "data/operator/pods/uid-1/main";
  EXPECT_TRUE(fs::is_directory(workdir));
  EXPECT_EQ(fs::status(workdir).permissions() & fs::perms::all, fs::perms(0777));
  // Root's alone above it: no user of the node reaches a 0777 directory a container filled.
  EXPECT_EQ(fs::status(workdir.parent_path()).permissions() & fs::perms::all, fs::perms(0700));
  EXPECT_EQ(fs::status(root_ / "data/operator/pods").permissions() & fs::perms::all,
            fs::perms(0700));
  int env = 0;
  for (const auto& e : *edits) env += e.kind == GPUSTACK_EDIT_ENV ? 1 : 0;
  EXPECT_EQ(env, 2);  // the two defaults; no workdir_env declared
}

// The kubelet puts the Pod's env after the device plugin's: a budget the container sets itself
// would win, so a slice whose container does is refused, naming the variable.
TEST_F(Staging, AContainerThatSetsItsOwnBudgetIsRefusedAndTheSameValueIsNot) {
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({WithSource(Nvidia(HamiCore()))});
  const std::vector<sdk::ContainerEdit> granted = {
      {.kind = GPUSTACK_EDIT_ENV, .key = "CUDA_DEVICE_MEMORY_LIMIT_0", .value = "3276m"},
      {.kind = GPUSTACK_EDIT_ENV, .key = "CUDA_DEVICE_ORDER", .value = "PCI_BUS_ID"}};
  auto with_env = [&](Json env) {
    return enforcement.EditsForSlice(
        "nvidia", "GPU-1", PodWith({{"name", "main"}, {"env", std::move(env)}}), "main", granted);
  };
  auto raised = with_env({{{"name", "CUDA_DEVICE_MEMORY_LIMIT_0"}, {"value", "80000m"}}});
  ASSERT_FALSE(raised);
  EXPECT_EQ(raised.failure().code, Code::kFailedPrecondition);
  EXPECT_NE(raised.error().find("CUDA_DEVICE_MEMORY_LIMIT_0"), std::string::npos) << raised.error();
  auto referenced = with_env({{{"name", "CUDA_DEVICE_MEMORY_LIMIT_0"},
                               {"valueFrom", {{"fieldRef", {{"fieldPath", "x"}}}}}}});
  EXPECT_FALSE(referenced) << "a value it cannot see is taken as another";
  auto same = with_env({{{"name", "CUDA_DEVICE_ORDER"}, {"value", "PCI_BUS_ID"}},
                        {{"name", "LIBCUDA_LOG_LEVEL"}, {"value", "4"}}});
  EXPECT_TRUE(same) << same.error();  // the same value, and a default the container may set
}

TEST_F(Staging, AVariantDirectoryInTheSourceWinsOverItsFlatFiles) {
  Write(source_ / "cuda-12" / "libvgpu.so", "cuda 12 build");
  Write(source_ / "cuda-12" / "helper.so", "helper 12");
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({WithSource(Nvidia(HamiCore()))});
  EXPECT_EQ(Read(root_ / "data/operator/lib/nvidia/cuda-12/libvgpu.so"), "cuda 12 build");
}

TEST_F(Staging, AChangedSourceIsStagedAgainAndAnUnchangedOneIsLeftAlone) {
  SliceEnforcement enforcement = Make();
  const auto plugin = WithSource(Nvidia(HamiCore()));
  enforcement.Prepare({plugin});
  const fs::path staged = root_ / "data/operator/lib/nvidia/cuda-12/libvgpu.so";
  const auto first = fs::last_write_time(staged);
  struct stat before {
  }, after{};
  ASSERT_EQ(::stat((staged.parent_path() / "ld.so.preload").c_str(), &before), 0);
  enforcement.Prepare({plugin});
  EXPECT_EQ(fs::last_write_time(staged), first);
  ASSERT_EQ(::stat((staged.parent_path() / "ld.so.preload").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // the file running containers hold is left alone
  Write(source_ / "libvgpu.so", "a newer build");
  enforcement.Prepare({plugin});
  EXPECT_EQ(Read(staged), "a newer build");
}

TEST_F(Staging, WithoutASourceSlicesAreCountedNotEnforcedAndTheConditionSaysHowToFixIt) {
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({Nvidia(HamiCore())});
  ASSERT_EQ(enforcement.States().size(), 1u);
  EXPECT_EQ(enforcement.States()[0].binding, Binding::kCountedOnly);
  EXPECT_NE(enforcement.States()[0].message.find("plugins.config.nvidia.enforcer"),
            std::string::npos)
      << enforcement.States()[0].message;
  auto edits =
      enforcement.EditsForSlice("nvidia", "GPU-0", PodWith({{"name", "main"}}), "main", {});
  ASSERT_TRUE(edits) << edits.error();
  EXPECT_EQ(MountAt(*edits, "/etc/ld.so.preload"), nullptr);  // nothing to preload
  EXPECT_NE(MountAt(*edits, kWorkdirMount), nullptr);  // an enforcer in the image can still use it
}

TEST_F(Staging, AMissingOrWritableByOthersSourceFileIsRefusedAndNamed) {
  fs::remove(source_ / "helper.so");
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({WithSource(Nvidia(HamiCore()))});
  ASSERT_EQ(enforcement.States().size(), 1u);
  EXPECT_EQ(enforcement.States()[0].binding, Binding::kCountedOnly);
  EXPECT_NE(enforcement.States()[0].message.find("helper.so"), std::string::npos)
      << enforcement.States()[0].message;
  auto edits =
      enforcement.EditsForSlice("nvidia", "GPU-0", PodWith({{"name", "main"}}), "main", {});
  ASSERT_TRUE(edits);
  EXPECT_EQ(MountAt(*edits, "/usr/local/gpustack/nvidia"), nullptr);  // no half-staged library

  Write(source_ / "helper.so", "helper", fs::perms(0777));
  enforcement.Prepare({WithSource(Nvidia(HamiCore()))});
  EXPECT_EQ(enforcement.States()[0].binding, Binding::kCountedOnly);
  EXPECT_NE(enforcement.States()[0].message.find("not trusted"), std::string::npos)
      << enforcement.States()[0].message;
}

TEST_F(Staging, ThePackagesOwnDirectoryIsTheSourceWhenNoSettingGivesOne) {
  client::EnforcerDeclaration e = HamiCore();
  e.package_dir = "enforcer";
  e.variant = GPUSTACK_ENFORCER_VARIANT_NONE;
  Write(root_ / "plugins/enforcer/libvgpu.so", "packaged");
  Write(root_ / "plugins/enforcer/helper.so", "packaged helper");
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({Nvidia(e)});
  ASSERT_EQ(enforcement.States()[0].binding, Binding::kBound) << enforcement.States()[0].message;
  EXPECT_EQ(Read(root_ / "data/operator/lib/nvidia/libvgpu.so"), "packaged");
}

TEST_F(Staging, ARuntimeVersionWithoutAMajorLeavesThoseCardsUnenforcedAndSaysWhy) {
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({WithSource(Nvidia(HamiCore(), "unknown"))});
  EXPECT_EQ(enforcement.States()[0].binding, Binding::kCountedOnly);
  EXPECT_NE(enforcement.States()[0].message.find("\"unknown\""), std::string::npos);
}

TEST_F(Staging, APluginWithoutADeclarationIsUnknownAndOneWithoutSlicesIsNotListed) {
  SliceEnforcement enforcement = Make();
  runtime::PluginStatus whole = Nvidia(std::nullopt);
  whole.identity->manufacturer = "amd";
  whole.identity->capabilities = GPUSTACK_CAP_SHARED;
  enforcement.Prepare({Nvidia(std::nullopt), whole});
  ASSERT_EQ(enforcement.States().size(), 1u);
  EXPECT_EQ(enforcement.States()[0].binding, Binding::kUnknown);
  runtime::PluginStatus configured = WithSource(Nvidia(std::nullopt));
  enforcement.Prepare({configured});  // a source for a plugin with nothing to stage: said
  EXPECT_NE(enforcement.States()[0].message.find("enforcer_dir is ignored"), std::string::npos)
      << enforcement.States()[0].message;
  enforcement.Prepare({Nvidia(std::nullopt), whole});
  auto edits =
      enforcement.EditsForSlice("nvidia", "GPU-0", PodWith({{"name", "main"}}), "main", {});
  ASSERT_TRUE(edits);
  EXPECT_TRUE(edits->empty());
}

TEST_F(Staging, TheWorkingDirectoryBelongsToTheContainersUserAndItsEnvNamesIt) {
  client::EnforcerDeclaration e = HamiCore();
  e.workdir_env = "VROCM_LEDGER_PATH";
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({WithSource(Nvidia(e))});
  auto edits = enforcement.EditsForSlice(
      "nvidia", "GPU-0", PodWith({{"name", "main"}}, {{"runAsUser", 4242}, {"runAsGroup", 4243}}),
      "main", {});
  ASSERT_TRUE(edits) << edits.error();
  const fs::path workdir = root_ / "data/operator/pods/uid-1/main";
  struct stat info {};
  ASSERT_EQ(::stat(workdir.c_str(), &info), 0);
  EXPECT_EQ(info.st_uid, 4242u);
  EXPECT_EQ(info.st_gid, 4243u);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  bool named = false;
  for (const auto& edit : *edits)
    named |= edit.kind == GPUSTACK_EDIT_ENV && edit.key == "VROCM_LEDGER_PATH" &&
             edit.value == kWorkdirMount;
  EXPECT_TRUE(named);
}

TEST_F(Staging, AHostileUidOrContainerNameCannotNameADirectoryOutsideThePods) {
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({WithSource(Nvidia(HamiCore()))});
  Json pod = PodWith({{"name", "main"}});
  pod["metadata"]["uid"] = "..";
  auto refused = enforcement.EditsForSlice("nvidia", "GPU-0", pod, "main", {});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.failure().code, Code::kInvalidArgument);
  EXPECT_FALSE(enforcement.EditsForSlice("nvidia", "GPU-0", PodWith({{"name", "a/b"}}), "a/b", {}));
}

TEST_F(Staging, GonePodsLoseTheirWorkingDirectoriesAndKeptOnesStay) {
  SliceEnforcement enforcement = Make();
  enforcement.Prepare({WithSource(Nvidia(HamiCore()))});
  for (const char* uid : {"a", "b", "c"}) {
    Json pod = PodWith({{"name", "main"}});
    pod["metadata"]["uid"] = uid;
    ASSERT_TRUE(enforcement.EditsForSlice("nvidia", "GPU-0", pod, "main", {}));
  }
  const fs::path pods = root_ / "data/operator/pods";
  EXPECT_EQ(enforcement.Reclaim([](const std::string& uid) { return uid != "b"; }), 1u);
  EXPECT_TRUE(fs::exists(pods / "a"));
  EXPECT_FALSE(fs::exists(pods / "b"));
  enforcement.Forget({"a", ".."});
  EXPECT_FALSE(fs::exists(pods / "a"));
  EXPECT_TRUE(fs::exists(pods / "c"));
  EXPECT_TRUE(fs::exists(root_ / "data/operator/lib"));  // ".." was not followed
  // A daemon that starts again reclaims what the previous one left.
  SliceEnforcement restarted = Make();
  EXPECT_EQ(restarted.Reclaim([](const std::string&) { return false; }), 1u);
  EXPECT_FALSE(fs::exists(pods / "c"));
}

}  // namespace
}  // namespace gpustack::enforcement
