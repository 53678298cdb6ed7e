// A leader-election candidate for the hand-over test: campaigns for a Lease and prints
// "leading <identity>" when it leads; SIGTERM makes it release the Lease and exit.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "host/common/logging.h"
#include "host/kube/client.h"
#include "host/kube/leader_election.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: lease_candidate NAMESPACE LEASE IDENTITY LEASE_SECONDS\n";
    return 2;
  }
  // SIGTERM is taken by a thread with sigwait, not a handler: requesting a stop is not
  // async-signal-safe.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  std::stop_source stop;
  std::thread waiter([&] {
    int signal = 0;
    sigwait(&term, &signal);
    stop.request_stop();
  });
  waiter.detach();
  gpustack::InitLogging("info");  // to stderr: stdout is what the test reads
  auto client = gpustack::kube::Client::FromEnvironment();
  if (!client) {
    std::cerr << client.error() << "\n";
    return 1;
  }
  int seconds = std::atoi(argv[4]);
  gpustack::kube::LeaderElectionConfig config{argv[1],
                                              argv[2],
                                              argv[3],
                                              std::chrono::milliseconds(seconds * 1000),
                                              std::chrono::milliseconds(seconds * 700),
                                              std::chrono::milliseconds(seconds * 200)};
  gpustack::kube::LeaderElector elector(**client, config);
  gpustack::kube::LeaderCallbacks callbacks;
  callbacks.on_started_leading = [&](std::stop_token) {
    std::printf("leading %s\n", argv[3]);
    std::fflush(stdout);
  };
  callbacks.on_stopped_leading = [&] {
    std::printf("stopped %s\n", argv[3]);
    std::fflush(stdout);
  };
  auto status = elector.Run(stop.get_token(), callbacks);
  if (!status) {
    std::cerr << status.error() << "\n";
    return 1;
  }
  return 0;
}
