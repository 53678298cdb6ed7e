// What every subcommand of the one binary shares: how it is registered (its flags on a CLI11
// subcommand, and what runs when it was chosen), the exit statuses, the stop a signal asks for,
// and the environment defaults. Each subcommand's flags and start-up live in a file of its own.
//
// Exit status, for every subcommand: 0 when everything asked for worked; 1 when something did
// not (a plugin failed, discovery failed, a check failed: stdout's report and stderr say what);
// 2 for bad input (a flag, an environment value, the node config, an unreadable sysfs tree);
// 128+N when signal N ended it.
#ifndef GPUSTACK_HOST_CMD_COMMAND_H_
#define GPUSTACK_HOST_CMD_COMMAND_H_

#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "host/kube/client.h"

namespace gpustack::cmd {

inline constexpr int kBadInput = 2;

// A subcommand: its CLI11 node, and what runs once the command line chose it (after parsing, so
// flags are final) and logging is set up. Returns the exit status.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command AddDetect(CLI::App& device_manager);
Command AddMonitor(CLI::App& device_manager);
Command AddPreflight(CLI::App& device_manager);
Command AddServe(CLI::App& device_manager);
Command AddWorker(CLI::App& root);
Command AddCleanup(CLI::App& root);
Command AddWorkerGateway(CLI::App& root);

// Set by SIGINT and SIGTERM.
const std::atomic<bool>& StopRequested();
int ReceivedSignal();  // 0 when none
// An interrupted command ends with the shell's status for its signal (130, 143), whatever else.
int Finish(int status);
// A daemon's status: a SIGTERM or SIGINT is how it is asked to stop, so that is a clean exit.
int FinishDaemon(int status);

// An environment default, read with secure_getenv: ignored when the process is setuid.
std::string Env(const std::string& name);

// Seconds from a flag as milliseconds.
std::chrono::milliseconds Milliseconds(double seconds);

// The Kubernetes API client from the kubeconfig or the Pod's service account; on failure the
// reason is printed ("cannot reach the Kubernetes API: ...") and nullptr returned.
std::unique_ptr<kube::Client> ConnectToKubernetes(const kube::ClientOptions& options = {});

}  // namespace gpustack::cmd

#endif  // GPUSTACK_HOST_CMD_COMMAND_H_
