// gpustack-ssh-enter: what an SSH login into an Instance runs (sshd's ForceCommand in the
// gpustack-ssh-server image; docs/behaviour.md §7). The sidecar shares the Pod's process namespace,
// so the login finds `main`'s first process, joins its mount (and any other differing) namespaces
// and root, takes its environment, drops every capability, sets no_new_privs and runs the shell:
// the session sees exactly what `main` sees (its cards, its slice's limits) with no privilege the
// sidecar needed to get there. The pure part (which process, which environment, which command)
// is here; main.cc makes the system calls.
#ifndef GPUSTACK_HOST_SSH_ENTER_ENTER_H_
#define GPUSTACK_HOST_SSH_ENTER_ENTER_H_

#include <optional>
#include <string>
#include <vector>

namespace gpustack::ssh_enter {

// One process of the shared PID namespace, as /proc shows it.
struct Process {
  int pid = 0;
  std::string mount_namespace;  // readlink /proc/<pid>/ns/mnt ("mnt:[4026532210]")
};

// The main container's first process: the lowest pid other than 1 (the sandbox's pause) whose
// mount namespace is not the sidecar's own. nullopt when main is not running.
std::optional<int> MainProcess(const std::vector<Process>& processes,
                               const std::string& own_mount_namespace);

// NUL-separated /proc/<pid>/environ to entries ("NAME=value"), with the session's TERM added
// when main's own environment has none (a terminal needs it; nothing else of the session leaks
// in).
std::vector<std::string> SessionEnvironment(const std::string& environ, const char* term);

// The shell's arguments: `sh -c <command>` for `ssh host command` (SSH_ORIGINAL_COMMAND), else
// an interactive login shell.
std::vector<std::string> ShellArguments(const std::string& shell, const char* original_command);

}  // namespace gpustack::ssh_enter

#endif  // GPUSTACK_HOST_SSH_ENTER_ENTER_H_
