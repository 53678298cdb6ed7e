// What the integration tests share: a client for the control plane that the CTest fixture
// started (KUBECONFIG, GPUSTACK_TESTBED_DIR), the testbed script, kubectl, and waiting.
#ifndef GPUSTACK_TESTS_KUBE_TESTBED_H_
#define GPUSTACK_TESTS_KUBE_TESTBED_H_

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "host/kube/client.h"

namespace gpustack::kube::testing {

std::string TestbedDir();
// A value from the testbed's env file (KUBE_BIN, HELM_BIN, ports ...).
std::string TestbedEnv(const std::string& key);
ClientConfig TestbedConfig();
std::unique_ptr<Client> TestbedClient(ClientOptions options = {});

// Runs `testbed.sh <command> --dir <dir> <args>`; returns its exit status.
int Testbed(const std::string& command, const std::string& args = {});
// Runs kubectl against the testbed; the output (stdout and stderr) and exit status.
std::string Kubectl(const std::string& args, int* status = nullptr);
// A shell command's output and exit status.
std::string Run(const std::string& command, int* status = nullptr);

// A fresh namespace for one test.
std::string CreateNamespace(Client& client, const std::string& prefix);
// With a controller-manager running, Pods need the namespace's default ServiceAccount.
bool WaitForDefaultServiceAccount(Client& client, const std::string& ns);
// Applies every CustomResourceDefinition of a YAML file with server-side apply.
void ApplyCrds(Client& client, const std::string& path, const std::string& field_manager);

// Polls `done` every 50 ms until it is true or `timeout` passes; returns the last answer.
bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds timeout = std::chrono::seconds(30));

Json ConfigMap(const std::string& ns, const std::string& name, Json data = Json::object());

// A child process (the operator binary under test) with its output in a log file. Everything is
// prepared before fork: the test is multi-threaded, so the child only calls execve.
class Process {
 public:
  Process(std::vector<std::string> argv, std::vector<std::string> env, std::string log_path);
  ~Process();  // kills (SIGKILL) and reaps it if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool Start();
  // Signals it and reaps it: its exit status (128 + signal when a signal ended it); -1 if none.
  int Stop(int signal = SIGTERM);
  bool Running() const { return pid_ > 0; }
  std::string Log() const;

 private:
  std::vector<std::string> argv_, env_;
  std::string log_path_;
  pid_t pid_ = -1;
};

// A loopback TCP port nobody listens on now.
int FreePort();

}  // namespace gpustack::kube::testing

#endif  // GPUSTACK_TESTS_KUBE_TESTBED_H_
