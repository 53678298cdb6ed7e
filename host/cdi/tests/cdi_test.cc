#include "host/cdi/cdi.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace gpustack::cdi {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNvidiaSpecYaml = R"(cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}
  - name: GPU-aaaa
    containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}
  - name: all
containerEdits: {env: [NVIDIA_VISIBLE_DEVICES=void]}
)";

Engine Containerd(const std::string& version, const std::string& config) {
  Engine engine{.runtime_version = "containerd://" + version};
  ReadContainerdConfig(config, engine);
  return engine;
}

Grant NvidiaGrant(std::vector<std::string> cards = {"GPU-aaaa"}) {
  return {.kind = "nvidia.com/gpu", .cards = std::move(cards), .vendor_runtime = "nvidia"};
}

Specs SpecsOf(const char* text) {
  Specs specs;
  ReadSpec(text, "nvidia.yaml", specs);
  return specs;
}

TEST(Strategy, ParsesTheThreeNamesAndRefusesOthers) {
  EXPECT_EQ(*ParseStrategy(""), Strategy::kEnvvar);
  EXPECT_EQ(*ParseStrategy("cdi-annotations"), Strategy::kCdiAnnotations);
  EXPECT_EQ(*ParseStrategy("auto"), Strategy::kAuto);
  auto bad = ParseStrategy("cdi");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("none of envvar, cdi-annotations, auto"), std::string::npos);
  EXPECT_EQ(StrategyVariable("nvidia"), "GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY");
  EXPECT_EQ(StrategyVariable("t-head"), "GPUSTACK_T_HEAD_DEVICE_INJECTION_STRATEGY");
}

TEST(Specs, AYamlOrJsonSpecNamesItsDevicesUnderItsKind) {
  Specs specs = SpecsOf(kNvidiaSpecYaml);
  EXPECT_EQ(specs.devices, (std::set<std::string>{"nvidia.com/gpu=0", "nvidia.com/gpu=GPU-aaaa",
                                                  "nvidia.com/gpu=all"}));
  ReadSpec(R"({"cdiVersion": "0.6.0", "kind": "example.com/accel", "devices": [{"name": "x"}]})",
           "example.json", specs);
  EXPECT_EQ(specs.devices.count("example.com/accel=x"), 1u);
  EXPECT_TRUE(specs.problems.empty());
  ReadSpec("kind: nokind\ndevices: []", "a.yaml", specs);
  ReadSpec("{not: [yaml", "b.yaml", specs);
  ReadSpec("kind: v.com/c", "c.yaml", specs);
  ASSERT_EQ(specs.problems.size(), 3u);
  EXPECT_NE(specs.problems[0].find("a.yaml: no kind"), std::string::npos);
  EXPECT_NE(specs.problems[1].find("b.yaml"), std::string::npos);
  EXPECT_NE(specs.problems[2].find("c.yaml: no devices"), std::string::npos);
}

TEST(Specs, TheSpecDirectoriesAreReadAndOtherFilesIgnored) {
  const fs::path root = fs::temp_directory_path() / ("cdi-test-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "etc");
  fs::create_directories(root / "run");
  std::ofstream(root / "etc/nvidia.yaml") << kNvidiaSpecYaml;
  std::ofstream(root / "run/other.json")
      << R"({"kind": "example.com/accel", "devices": [{"name": "x"}]})";
  std::ofstream(root / "run/README") << "not a spec";
  Specs specs = ReadSpecs({root / "etc", root / "run", root / "absent"});
  EXPECT_EQ(specs.devices.size(), 4u);
  EXPECT_TRUE(specs.problems.empty());
  fs::remove_all(root);
}

TEST(Containerd, TheConfigSaysWhetherCdiIsOnAndWhichRuntimeIsTheDefault) {
  Engine one = Containerd("1.7.24", R"(version = 2
[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "nvidia"
)");
  EXPECT_TRUE(one.config_read);
  EXPECT_EQ(one.enable_cdi, true);
  EXPECT_EQ(one.default_runtime, "nvidia");
  Engine two = Containerd("2.4.2", R"(version = 3
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = false
)");
  EXPECT_EQ(two.enable_cdi, false);
  EXPECT_EQ(two.default_runtime, "runc");
  Engine broken = Containerd("2.4.2", "version = [");
  EXPECT_FALSE(broken.config_read);
  EXPECT_NE(broken.config_problem.find("not valid TOML"), std::string::npos);
  Engine missing{.runtime_version = "containerd://2.4.2"};
  ReadContainerdConfigDir("/nonexistent-containerd", missing);
  EXPECT_FALSE(missing.config_read);
  EXPECT_NE(missing.config_problem.find("GPUSTACK_CONTAINERD_CONFIG_DIR"), std::string::npos);
}

// Every auto rule, each the one that keeps the variable.
TEST(Auto, EachRuleKeepsTheVariableAndSaysWhy) {
  const Specs specs = SpecsOf(kNvidiaSpecYaml);
  const Engine v2 = Containerd("2.4.2", "version = 3\n");
  auto reason = [&](const Grant& grant, const Engine& engine, const Specs& s) {
    Decision d = Decide(Strategy::kAuto, grant, engine, s);
    EXPECT_EQ(d.strategy, Strategy::kEnvvar) << d.reason;
    return d.reason;
  };
  Grant runtime_class = NvidiaGrant();
  runtime_class.pod_names_runtime_class = true;
  EXPECT_NE(reason(runtime_class, v2, specs).find("RuntimeClass"), std::string::npos);
  Grant partition = NvidiaGrant();
  partition.partition = true;
  EXPECT_NE(reason(partition, v2, specs).find("partition"), std::string::npos);
  EXPECT_EQ(reason(NvidiaGrant(), Containerd("1.6.20~ds1", "version = 2\n"), specs),
            "containerd 1.6 has no CDI");
  // 1.6 whatever its config says, even unreadable: the version decides.
  Engine old_unreadable{.runtime_version = "containerd://1.6.20"};
  ReadContainerdConfigDir("/nonexistent-containerd", old_unreadable);
  EXPECT_EQ(reason(NvidiaGrant(), old_unreadable, specs), "containerd 1.6 has no CDI");
  EXPECT_NE(
      reason(NvidiaGrant(), Containerd("1.7.24", "version = 2\n"), specs).find("enable_cdi = true"),
      std::string::npos);
  Engine unreadable{.runtime_version = "containerd://2.4.2"};
  ReadContainerdConfigDir("/nonexistent-containerd", unreadable);
  EXPECT_NE(reason(NvidiaGrant(), unreadable, specs).find("cannot be read"), std::string::npos);
  EXPECT_NE(reason(NvidiaGrant(),
                   Containerd("2.4.2",
                              "version = 3\n[plugins.'io.containerd.cri.v1.runtime'."
                              "containerd]\ndefault_runtime_name = 'nvidia'\n"),
                   specs)
                .find("default runtime is nvidia"),
            std::string::npos);
  EXPECT_NE(reason(NvidiaGrant(),
                   Containerd("2.4.2",
                              "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n"
                              "enable_cdi = false\n"),
                   specs)
                .find("enable_cdi = false"),
            std::string::npos);
  EXPECT_NE(reason(NvidiaGrant({"GPU-aaaa", "GPU-bbbb"}), v2, specs)
                .find("names nvidia.com/gpu=GPU-bbbb"),
            std::string::npos);
  EXPECT_NE(reason(NvidiaGrant(), Engine{.runtime_version = "docker://27.0"}, specs)
                .find("not one whose CDI support is known"),
            std::string::npos);
}

TEST(Auto, CdiWhenEveryRulePassesOnContainerdTwoOneSevenWithCdiAndCriO) {
  const Specs specs = SpecsOf(kNvidiaSpecYaml);
  for (const Engine& engine :
       {Containerd("2.4.2", "version = 3\n"), Containerd("v2.0.0", ""),
        Containerd("1.7.24",
                   "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n"),
        Engine{.runtime_version = "cri-o://1.30.0"}}) {
    Decision d = Decide(Strategy::kAuto, NvidiaGrant(), engine, specs);
    EXPECT_EQ(d.strategy, Strategy::kCdiAnnotations) << engine.runtime_version << ": " << d.reason;
  }
}

TEST(Explicit, EnvvarAndCdiAnnotationsAreTakenAsSaidButPartitionsStayOnTheVariable) {
  const Engine old = Containerd("1.6.20", "");
  EXPECT_EQ(Decide(Strategy::kCdiAnnotations, NvidiaGrant(), old, {}).strategy,
            Strategy::kCdiAnnotations);
  EXPECT_EQ(
      Decide(Strategy::kEnvvar, NvidiaGrant(), Containerd("2.4.2", ""), SpecsOf(kNvidiaSpecYaml))
          .strategy,
      Strategy::kEnvvar);
  Grant partition = NvidiaGrant();
  partition.partition = true;
  EXPECT_EQ(Decide(Strategy::kCdiAnnotations, partition, old, {}).strategy, Strategy::kEnvvar);
}

TEST(Annotation, NamesEveryCardFullyQualified) {
  EXPECT_EQ(AnnotationKey("nvidia"), "cdi.k8s.io/gpustack-nvidia");
  EXPECT_EQ(AnnotationValue(NvidiaGrant({"GPU-a", "GPU-b"})),
            "nvidia.com/gpu=GPU-a,nvidia.com/gpu=GPU-b");
}

}  // namespace
}  // namespace gpustack::cdi
