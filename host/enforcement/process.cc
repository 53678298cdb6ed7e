#include "host/enforcement/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "host/common/process_stop.h"

namespace gpustack::enforcement {
namespace {

constexpr size_t kMaxOutput = 64 << 10;

std::vector<char*> Pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// A descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const std::string& input,
                                 std::chrono::milliseconds timeout) {
  if (argv.empty()) return Error{"no program to run"};
  // stdin: a file holding `input`; stdout and stderr: another. Both unlinked at once.
  char in_name[] = "/tmp/gpustack-run-in-XXXXXX";
  char out_name[] = "/tmp/gpustack-run-out-XXXXXX";
  Fd in{::mkstemp(in_name)};
  if (in.fd < 0)
    return Error{std::string("cannot create a temporary file: ") + std::strerror(errno)};
  ::unlink(in_name);
  Fd out{::mkstemp(out_name)};
  if (out.fd < 0)
    return Error{std::string("cannot create a temporary file: ") + std::strerror(errno)};
  ::unlink(out_name);
  if (::write(in.fd, input.data(), input.size()) != static_cast<ssize_t>(input.size()) ||
      ::lseek(in.fd, 0, SEEK_SET) != 0) {
    return Error{std::string("cannot write the input of ") + argv[0]};
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.fd, STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Its own process group, so a timeout kills what it started in the foreground too; and the
  // stop signals unblocked, which the daemon's threads keep blocked (host/common/process_stop.h).
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t mask;
  UnblockedSignalMask(&mask);
  posix_spawnattr_setsigmask(&attributes, &mask);
  auto args = Pointers(argv);
  auto environment = Pointers(env);
  pid_t pid = 0;
  const int spawned =
      ::posix_spawn(&pid, argv[0].c_str(), &actions, &attributes, args.data(), environment.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) return Error{"cannot run " + argv[0] + ": " + std::strerror(spawned)};

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return Error{"cannot wait for " + argv[0]};
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return Error{argv[0] + " did not finish within " + std::to_string(timeout.count()) + " ms",
                   Code::kDeadlineExceeded};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ProcessResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::string text(kMaxOutput, '\0');
  const ssize_t n = ::pread(out.fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  result.output = std::move(text);
  return result;
}

}  // namespace gpustack::enforcement
