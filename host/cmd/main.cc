// gpustack-operator: one binary, subcommands. Which subcommands exist and the logging flag; each
// subcommand's flags and start-up are in a file of its own (command.h), the work in libraries.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "host/cmd/command.h"
#include "host/common/logging.h"
#include "host/common/process_stop.h"
#include "host/common/text.h"
#include "host/runtime/watchdog.h"

namespace gpustack::cmd {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

// On the signal thread (ReceiveStopSignals), before the process stop is asked.
void OnSignal(int signal) {
  g_signal = signal;
  g_stop = true;
}

}  // namespace

const std::atomic<bool>& StopRequested() { return g_stop; }
int ReceivedSignal() { return g_signal; }
int Finish(int status) { return g_signal != 0 ? 128 + g_signal : status; }
int FinishDaemon(int status) {
  return g_signal == SIGTERM || g_signal == SIGINT ? status : Finish(status);
}

std::string Env(const std::string& name) {
  const char* value = secure_getenv(name.c_str());
  return value == nullptr ? std::string() : std::string(value);
}

std::chrono::milliseconds Milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

std::unique_ptr<kube::Client> ConnectToKubernetes(const kube::ClientOptions& options) {
  auto client = kube::Client::FromEnvironment(options);
  if (!client) {
    std::cerr << "error: cannot reach the Kubernetes API: " << Printable(client.error()) << "\n";
    return nullptr;
  }
  return std::move(*client);
}

}  // namespace gpustack::cmd

int main(int argc, char** argv) {
  namespace cmd = gpustack::cmd;
  // First of all: a stop asked for while starting (a DaemonSet rolled at once) is still clean.
  gpustack::ReceiveStopSignals(cmd::OnSignal);
  CLI::App app{"GPUStack Operator: share accelerators between Kubernetes workloads"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->envname("GPUSTACK_LOG_LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  CLI::App* manager = app.add_subcommand("device-manager", "The per-node device manager");
  manager->require_subcommand(1);
  const cmd::Command commands[] = {cmd::AddDetect(*manager),    cmd::AddMonitor(*manager),
                                   cmd::AddPreflight(*manager), cmd::AddServe(*manager),
                                   cmd::AddCleanup(app),        cmd::AddWorker(app),
                                   cmd::AddWorkerGateway(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);  // help on stdout, status 0
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and a hint
    return cmd::kBadInput;
  }
  gpustack::InitLogging(log_level);
  for (const cmd::Command& command : commands) {
    if (!command.app->parsed()) continue;
    const int status = command.run();
    if (gpustack::runtime::AbandonedThreads() > 0) {
      // A thread is still inside a plugin (docs/decisions.md D23): exit() could wait forever on
      // the loader lock a hanging library constructor holds. Flush, then end without it.
      std::cout.flush();
      std::cerr.flush();
      std::fflush(nullptr);
      std::_Exit(status);
    }
    return status;
  }
  return 0;
}
