// The real binary against plugins that crash, hang, exit or are missing, and against bad flags:
// the exit status and stderr must tell the truth, and a crash must be named and remembered.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Outcome {
  int status = -1;  // the exit status, or 128 + the signal that ended it
  std::string out;
  std::string err;
};

// Runs `command` through sh with stderr captured; `timeout` keeps a regression that hangs from
// hanging the suite (it then exits 124, which no assertion below accepts).
Outcome Shell(const std::string& command, const fs::path& scratch) {
  const fs::path err = scratch / "stderr.txt";
  // In a sanitizer build, ASan's own SEGV and abort handlers would turn a plugin's crash into
  // its report and exit status 1: the host's reporter and the signal's status are what is tested.
  const std::string full =
      "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:handle_segv=0:handle_abort=0\" timeout -s KILL 60 sh -c '" +
      command + "' 2>'" + err.string() + "'";
  Outcome run;
  FILE* pipe = ::popen(full.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer;
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    run.out.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err);
  run.err.assign(std::istreambuf_iterator<char>(in), {});
  return run;
}

const json* FindPlugin(const json& report, const std::string& name) {
  for (const json& p : report["plugins"]) {
    if (p["name"] == name) return &p;
  }
  return nullptr;
}

// A private copy of the configurable fake (so its file can change), a state directory, and a
// node config that says how the plugin misbehaves.
class Faults : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = fs::path(::testing::TempDir()) /
               ("faults-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(scratch_);
    fs::create_directories(scratch_ / "plugins");
    fs::create_directories(scratch_ / "state");
    for (const char* file : {"libgpustack_plugin_configurable.so", "configurable.json"}) {
      fs::copy_file(fs::path(GPUSTACK_FAKES_DIR) / "configurable" / file,
                    scratch_ / "plugins" / file);
    }
  }
  void TearDown() override { fs::remove_all(scratch_); }

  void Misbehave(const std::string& how) {
    json config = {{"plugins", {{"configurable", {{"enable", "on"}, {"config", json::object()}}}}}};
    if (!how.empty()) config["plugins"]["configurable"]["config"]["misbehave"] = how;
    std::ofstream(scratch_ / "node.json") << config.dump();
  }
  Outcome Detect(const std::string& extra = "") {
    return Shell(std::string("exec ") + GPUSTACK_BINARY + " device-manager detect -o json " +
                     Flags() + " " + extra,
                 scratch_);
  }
  std::string Flags() const {
    return "--sysfs-root " + std::string(GPUSTACK_NODE_TREES_DIR) + "/cpu-only/sys --plugin-dir " +
           (scratch_ / "plugins").string() + " --node-config " + (scratch_ / "node.json").string() +
           " --state-dir " + (scratch_ / "state").string();
  }
  fs::path scratch_;
};

TEST_F(Faults, ACrashingPluginIsNamedThenQuarantinedUntilItsFileChanges) {
  Misbehave("crash");
  const Outcome crashed = Detect();
  EXPECT_EQ(crashed.status, 128 + SIGSEGV) << crashed.err;
  EXPECT_NE(crashed.err.find("fatal signal 11 (SIGSEGV) in plugin configurable during its "
                             "discover hook"),
            std::string::npos)
      << crashed.err;

  // The next start does not load it, even behaving, and says why.
  Misbehave("");
  const Outcome next = Detect();
  EXPECT_EQ(next.status, 1) << next.err;
  const json report = json::parse(next.out);
  const json* plugin = FindPlugin(report, "configurable");
  ASSERT_NE(plugin, nullptr) << next.out;
  EXPECT_EQ((*plugin)["state"], "quarantined");
  EXPECT_NE((*plugin)["error"]["message"].get<std::string>().find("during its discover hook"),
            std::string::npos)
      << plugin->dump();
  EXPECT_NE(next.err.find("quarantined"), std::string::npos) << next.err;

  // A new file (the vendor's fix) lifts it.
  std::ofstream(scratch_ / "plugins" / "libgpustack_plugin_configurable.so", std::ios::app) << '\0';
  const Outcome fixed = Detect();
  EXPECT_EQ(fixed.status, 0) << fixed.err;
  const json after = json::parse(fixed.out);
  ASSERT_NE(FindPlugin(after, "configurable"), nullptr) << fixed.out;
  EXPECT_EQ((*FindPlugin(after, "configurable"))["state"], "running");
}

TEST_F(Faults, ACrashOnAThreadThePluginStartedIsNamedByItsCodeAndQuarantined) {
  Misbehave("thread_crash");
  // discover returns at once; the plugin's own thread faults a second later, during the rounds.
  const Outcome crashed = Shell(std::string("exec ") + GPUSTACK_BINARY +
                                    " device-manager monitor " + Flags() + " -i 0.1 -c 50",
                                scratch_);
  EXPECT_EQ(crashed.status, 128 + SIGILL) << crashed.err;
  EXPECT_NE(crashed.err.find("fatal signal 4 (SIGILL) in plugin configurable on a thread it "
                             "started (outside any hook)"),
            std::string::npos)
      << crashed.err;
  Misbehave("");
  const Outcome next = Detect();
  const json report = json::parse(next.out);
  const json* plugin = FindPlugin(report, "configurable");
  ASSERT_NE(plugin, nullptr) << next.out;
  EXPECT_EQ((*plugin)["state"], "quarantined");
  EXPECT_NE((*plugin)["error"]["message"].get<std::string>().find("on a thread it started"),
            std::string::npos)
      << plugin->dump();
}

TEST_F(Faults, AHungPluginIsMarkedHungAndTheCommandStillReturns) {
  Misbehave("hang");
  const Outcome run = Detect("--hook-timeout 0.5");
  EXPECT_EQ(run.status, 1) << run.err;
  const json report = json::parse(run.out);
  const json* plugin = FindPlugin(report, "configurable");
  ASSERT_NE(plugin, nullptr) << run.out;
  EXPECT_EQ((*plugin)["state"], "hung");
  EXPECT_NE(run.err.find("configurable"), std::string::npos) << run.err;
}

TEST_F(Faults, SigtermDuringAHungHookEndsTheCommand) {
  Misbehave("hang");
  // The hook would be given an hour; SIGTERM a second in must still end the process.
  const Outcome run =
      Shell(std::string(GPUSTACK_BINARY) + " device-manager detect -o json " + Flags() +
                " --hook-timeout 3600 & pid=$!; sleep 1; kill -TERM $pid; wait $pid",
            scratch_);
  EXPECT_EQ(run.status, 128 + SIGTERM) << run.err;
}

TEST_F(Faults, ALibraryConstructorThatHangsEndsAtTheDeadlineAndOnSigterm) {
  Misbehave("");
  // Loading never finishes: the command reports the plugin hung at the deadline, then ends (the
  // loader lock the constructor holds would keep exit() waiting forever).
  const Outcome run = Shell("FAKE_HANG_IN_CONSTRUCTOR=1 exec " + std::string(GPUSTACK_BINARY) +
                                " device-manager detect -o json " + Flags() + " --hook-timeout 0.5",
                            scratch_);
  EXPECT_EQ(run.status, 1) << run.err;
  const json report = json::parse(run.out);
  const json* plugin = FindPlugin(report, "configurable");
  ASSERT_NE(plugin, nullptr) << run.out;
  EXPECT_EQ((*plugin)["state"], "hung");
  EXPECT_NE(run.err.find("loading did not finish"), std::string::npos) << run.err;
  // With an hour's deadline, SIGTERM ends it.
  const Outcome stopped =
      Shell("FAKE_HANG_IN_CONSTRUCTOR=1 " + std::string(GPUSTACK_BINARY) +
                " device-manager detect -o json " + Flags() +
                " --hook-timeout 3600 & pid=$!; sleep 1; kill -TERM $pid; wait $pid",
            scratch_);
  EXPECT_EQ(stopped.status, 128 + SIGTERM) << stopped.err;
}

TEST_F(Faults, AReportThatCannotBeWrittenIsAnError) {
  Misbehave("close_stdout");
  const Outcome run = Detect();
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("cannot write the output to stdout"), std::string::npos) << run.err;
}

TEST_F(Faults, AHookHandingBackMoreThanItsBoundIsRefusedAtTheBound) {
  json config = {
      {"plugins",
       {{"configurable", {{"enable", "on"}, {"config", {{"discover_emit", "flood"}}}}}}}};
  std::ofstream(scratch_ / "node.json") << config.dump();
  const Outcome run = Detect();
  EXPECT_EQ(run.status, 1) << run.err;
  const json report = json::parse(run.out);
  const json* plugin = FindPlugin(report, "configurable");
  ASSERT_NE(plugin, nullptr) << run.out;
  EXPECT_EQ((*plugin)["discovery"]["status"], "INTERNAL") << plugin->dump();
  EXPECT_NE(run.err.find("discover reported invalid output: more than 65536 values in one call"),
            std::string::npos)
      << run.err;
}

TEST_F(Faults, APluginThatExitsTheProcessIsNamed) {
  Misbehave("exit");
  const Outcome run = Detect();
  EXPECT_EQ(run.status, 70) << run.err;  // EX_SOFTWARE, never the plugin's 0
  EXPECT_NE(run.err.find("configurable"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("discover"), std::string::npos) << run.err;
}

TEST_F(Faults, AnUntrustedManifestIsRefusedLoudly) {
  Misbehave("");
  fs::permissions(scratch_ / "plugins" / "configurable.json", fs::perms::others_write,
                  fs::perm_options::add);
  const Outcome run = Detect();
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("writable by others"), std::string::npos) << run.err;
}

TEST_F(Faults, AForcedOnPluginThatIsNotInstalledFails) {
  Misbehave("");
  const Outcome run = Detect("--enable nosuch=on");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("nosuch"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("not installed"), std::string::npos) << run.err;
}

TEST_F(Faults, MonitorAfterAFailedDiscoveryExitsOne) {
  json config = {
      {"plugins", {{"configurable", {{"enable", "on"}, {"config", {{"discover_status", "14"}}}}}}}};
  std::ofstream(scratch_ / "node.json") << config.dump();
  const Outcome run = Shell(
      std::string("exec ") + GPUSTACK_BINARY + " device-manager monitor " + Flags() + " --count 1",
      scratch_);
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.err.find("fake status 14"), std::string::npos) << run.err;
}

TEST_F(Faults, BadFlagsAndValuesExitTwo) {
  Misbehave("");
  const std::string binary = std::string("exec ") + GPUSTACK_BINARY + " device-manager ";
  for (const std::string& args :
       {std::string("monitor -i nan"), std::string("monitor -i inf"), std::string("monitor -i -1"),
        std::string("monitor -i 1e-9"), std::string("monitor -i 0.005"),
        std::string("monitor -c -3"), std::string("detect --hook-timeout 0"),
        std::string("detect --bogus"), std::string("detect -o xml"),
        std::string("detect --node-config /nonexistent.json")}) {
    const Outcome run = Shell(binary + args, scratch_);
    EXPECT_EQ(run.status, 2) << args << ": " << run.err;
    EXPECT_FALSE(run.err.empty()) << args;
  }
  const Outcome env = Shell("GPUSTACK_PLUGIN_ENABLE=nvidia=maybe " + binary + "detect", scratch_);
  EXPECT_EQ(env.status, 2) << env.err;
  EXPECT_NE(env.err.find("maybe"), std::string::npos) << env.err;
  const Outcome timeout = Shell("GPUSTACK_HOOK_TIMEOUT=soon " + binary + "detect", scratch_);
  EXPECT_EQ(timeout.status, 2) << timeout.err;
}

}  // namespace
