// Leader election between two processes on a real Lease: when the leader is killed with
// SIGKILL the other takes over within the lease duration (plus one retry period); a leader
// stopped with SIGTERM releases the Lease, so its successor takes over at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "host/kube/leader_election.h"
#include "tests/kube/testbed.h"

namespace gpustack::kube {
namespace {

using Clock = std::chrono::steady_clock;

class Candidate {
 public:
  Candidate(const std::string& ns, const std::string& identity, int lease_seconds) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::string seconds = std::to_string(lease_seconds);
      execl(GPUSTACK_LEASE_CANDIDATE, "lease_candidate", ns.c_str(), "election", identity.c_str(),
            seconds.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
  }
  ~Candidate() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) {
      fclose(out_);
    }
  }
  // The next line it prints, or "" once it exits.
  std::string NextLine() {
    char line[256];
    if (fgets(line, sizeof(line), out_) == nullptr) {
      return {};
    }
    std::string text(line);
    if (!text.empty() && text.back() == '\n') {
      text.pop_back();
    }
    return text;
  }
  // Waits up to `timeout` for a line; false if none came.
  bool Readable(std::chrono::milliseconds timeout) {
    fd_set set;
    FD_ZERO(&set);
    FD_SET(fileno(out_), &set);
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    return select(fileno(out_) + 1, &set, nullptr, nullptr, &tv) > 0;
  }
  void Signal(int signal) { kill(pid_, signal); }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

TEST(LeaderElection, HandOverOnKillAndOnRelease) {
  auto client = testing::TestbedClient();
  ASSERT_NE(client, nullptr);
  std::string ns = testing::CreateNamespace(*client, "leader");
  constexpr int kLeaseSeconds = 6;  // renew deadline 4.2 s, retry period 1.2 s

  Candidate first(ns, "first", kLeaseSeconds);
  ASSERT_TRUE(first.Readable(std::chrono::seconds(20)));
  ASSERT_EQ(first.NextLine(), "leading first");
  Candidate second(ns, "second", kLeaseSeconds);
  // While the first renews, the second waits.
  EXPECT_FALSE(second.Readable(std::chrono::milliseconds(kLeaseSeconds * 1000 + 1500)));

  auto lease = client->Get(resources::Leases(), ns, "election");
  ASSERT_TRUE(lease) << lease.error();
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "first");
  EXPECT_EQ((*lease)["spec"]["leaseDurationSeconds"], kLeaseSeconds);

  first.Signal(SIGKILL);
  auto killed_at = Clock::now();
  // The lease expires kLeaseSeconds after the second last saw it change, which was at most
  // one retry period before the kill; then it takes it on its next retry.
  ASSERT_TRUE(second.Readable(std::chrono::milliseconds(kLeaseSeconds * 1000 + 2 * 1000)))
      << "no hand-over within the lease duration";
  EXPECT_EQ(second.NextLine(), "leading second");
  auto handover = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at);
  std::printf("hand-over after SIGKILL: %lld ms (lease %d s)\n",
              static_cast<long long>(handover.count()), kLeaseSeconds);
  lease = client->Get(resources::Leases(), ns, "election");
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "second");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);

  // A graceful stop releases the Lease: the third leads well before the lease would expire.
  Candidate third(ns, "third", kLeaseSeconds);
  EXPECT_FALSE(third.Readable(std::chrono::milliseconds(1500)));
  second.Signal(SIGTERM);
  auto released_at = Clock::now();
  EXPECT_EQ(second.NextLine(), "stopped second");
  int status = second.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // Released: no waiting for the 6 s lease to expire, only for the next retry.
  ASSERT_TRUE(third.Readable(std::chrono::milliseconds(3500)));
  EXPECT_EQ(third.NextLine(), "leading third");
  auto takeover = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - released_at);
  std::printf("hand-over after release: %lld ms\n", static_cast<long long>(takeover.count()));
}

TEST(LeaderElection, RefusesDurationsThatCannotWork) {
  auto client = testing::TestbedClient();
  ASSERT_NE(client, nullptr);
  LeaderElector elector(*client, {"default", "x", "me", std::chrono::seconds(2),
                                  std::chrono::seconds(3), std::chrono::seconds(1)});
  auto status = elector.Run(std::stop_token(), {});
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().find("lease duration > renew deadline > retry period"),
            std::string::npos);
}

}  // namespace
}  // namespace gpustack::kube
