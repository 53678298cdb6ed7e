// The crash journal, across real process deaths: a child process runs a "hook" and dies inside
// it; the journal it leaves names the plugin and hook, and only a dead process's journal counts.
#include "host/runtime/crash_journal.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpustack::runtime {
namespace {

namespace fs = std::filesystem;

class CrashJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpustack-journal-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `body` in a child process that has opened a journal and entered discover of plugin
  // "acme"; returns the child's wait status and what it wrote to stderr.
  template <class Body>
  std::pair<int, std::string> InChild(Body body) {
    int pipe_fds[2];
    EXPECT_EQ(::pipe(pipe_fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(pipe_fds[1], STDERR_FILENO);
      ::close(pipe_fds[0]);
      auto journal = CrashJournal::Open(dir_);
      if (!journal) ::_exit(99);
      CrashJournal::Slot* slot =
          (*journal)->Claim("acme", "/opt/acme/libgpustack_plugin_acme.so", {1, 2, 3, 4});
      (*journal)->Enter(slot, Hook::kDiscover);
      body(**journal, slot);
      ::_exit(0);
    }
    ::close(pipe_fds[1]);
    std::string output;
    char buffer[512];
    ssize_t n;
    while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) output.append(buffer, n);
    ::close(pipe_fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return {status, output};
  }

  fs::path dir_;
};

TEST_F(CrashJournalTest, AFaultOnTheHooksThreadNamesThePluginAndHook) {
  auto [status, output] = InChild([](CrashJournal&, CrashJournal::Slot*) { ::raise(SIGSEGV); });
  ASSERT_TRUE(WIFSIGNALED(status));
  std::vector<std::string> problems;
  const std::vector<CrashRecord> records = CrashJournal::Collect(dir_, &problems);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].attributed);
  EXPECT_EQ(records[0].plugin, "acme");
  EXPECT_EQ(records[0].hook, "discover");
  EXPECT_EQ(records[0].library, "/opt/acme/libgpustack_plugin_acme.so");
  EXPECT_EQ(records[0].library_identity, (FileIdentity{1, 2, 3, 4}));
  EXPECT_GT(records[0].pid, 0);
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(CrashJournal::Collect(dir_, &problems).empty()) << "collected journals are removed";
}

TEST_F(CrashJournalTest, ADeathFromElsewhereIsRecordedButNotBlamedOnTheHook) {
  // SIGKILL, or a fault on another thread, while acme's hook runs: acme was not the cause.
  auto [killed, killed_output] =
      InChild([](CrashJournal&, CrashJournal::Slot*) { ::raise(SIGKILL); });
  ASSERT_TRUE(WIFSIGNALED(killed));
  auto [other, other_output] =
      InChild([](CrashJournal&, CrashJournal::Slot*) { std::thread([] { std::abort(); }).join(); });
  ASSERT_TRUE(WIFSIGNALED(other));
  EXPECT_EQ(other_output.find("in plugin acme"), std::string::npos) << other_output;
  std::vector<std::string> problems;
  const std::vector<CrashRecord> records = CrashJournal::Collect(dir_, &problems);
  ASSERT_EQ(records.size(), 2u);
  for (const CrashRecord& r : records) {
    EXPECT_FALSE(r.attributed);
    EXPECT_EQ(r.hook, "discover");
  }
}

TEST_F(CrashJournalTest, AFatalSignalIsReportedAtOnceOnStderr) {
  auto [status, output] = InChild([](CrashJournal&, CrashJournal::Slot*) { std::abort(); });
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NE(output.find("gpustack-operator: fatal signal 6 (SIGABRT) in plugin acme during its "
                        "discover hook (/opt/acme/libgpustack_plugin_acme.so); it will be "
                        "quarantined at the next start until that file changes"),
            std::string::npos)
      << output;
  std::vector<std::string> problems;
  const std::vector<CrashRecord> records = CrashJournal::Collect(dir_, &problems);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].attributed);
}

TEST_F(CrashJournalTest, AnExitCalledInsideAHookIsNotASuccess) {
  auto [status, output] = InChild([](CrashJournal&, CrashJournal::Slot*) { std::exit(0); });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 70) << output;
  EXPECT_NE(output.find("gpustack-operator: exit() was called in plugin acme during its discover "
                        "hook"),
            std::string::npos)
      << output;
  std::vector<std::string> problems;
  const std::vector<CrashRecord> records = CrashJournal::Collect(dir_, &problems);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].attributed);
}

TEST_F(CrashJournalTest, AnOrderlyEndOrAHungCallIsNoCrash) {
  auto [left, left_output] = InChild([](CrashJournal& journal, CrashJournal::Slot* slot) {
    journal.Leave(slot);
    ::raise(SIGKILL);  // dies, but outside any hook
  });
  auto [hung, hung_output] = InChild([](CrashJournal& journal, CrashJournal::Slot* slot) {
    journal.MarkHung(slot);
    std::exit(0);  // a hung call at exit: the process ends normally
  });
  EXPECT_TRUE(WIFEXITED(hung) && WEXITSTATUS(hung) == 0) << hung_output;
  auto [disarmed, disarmed_output] = InChild([](CrashJournal& journal, CrashJournal::Slot*) {
    journal.Disarm();
    ::raise(SIGKILL);
  });
  std::vector<std::string> problems;
  EXPECT_TRUE(CrashJournal::Collect(dir_, &problems).empty());
}

TEST_F(CrashJournalTest, ALiveProcessJournalIsLeftAlone) {
  auto journal = CrashJournal::Open(dir_);
  ASSERT_TRUE(journal) << journal.error();
  CrashJournal::Slot* slot = (*journal)->Claim("acme", "/x.so", {});
  (*journal)->Enter(slot, Hook::kGrant);
  std::vector<std::string> problems;
  EXPECT_TRUE(CrashJournal::Collect(dir_, &problems).empty());
  EXPECT_TRUE(fs::exists((*journal)->path()));
  (*journal)->Leave(slot);
  const fs::path path = (*journal)->path();
  journal->reset();
  EXPECT_FALSE(fs::exists(path)) << "an orderly end removes the journal";
}

}  // namespace
}  // namespace gpustack::runtime
