// gpustack-ssh-enter (see enter.h). Single-threaded on purpose: joining a mount namespace
// (setns CLONE_NEWNS) is refused to a multi-threaded process.
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "host/ssh_enter/enter.h"

namespace {

using gpustack::ssh_enter::Process;

int Fail(const std::string& what) {
  std::fprintf(stderr, "gpustack-ssh-enter: %s\n", what.c_str());
  return 1;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string LinkOf(const std::string& path) {
  char target[PATH_MAX];
  const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

std::vector<Process> Processes() {
  std::vector<Process> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    out.push_back({static_cast<int>(pid), LinkOf("/proc/" + std::string(entry->d_name) + "/ns/mnt")});
  }
  closedir(proc);
  return out;
}

// Every capability gone for good: the bounding set (so an exec of a setuid or root-owned file
// regains none), the ambient, inheritable, permitted and effective sets; and no_new_privs.
bool DropPrivileges(std::string* why) {
  for (int cap = 0; cap <= 63; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      *why = Errno("prctl(PR_CAPBSET_DROP)");
      return false;
    }
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    *why = Errno("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    return false;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    *why = Errno("prctl(PR_SET_NO_NEW_PRIVS)");
    return false;
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capset, &header, data) != 0) {
    *why = Errno("capset");
    return false;
  }
  return true;
}

}  // namespace

int main() {
  const std::string own = LinkOf("/proc/self/ns/mnt");
  const auto target = gpustack::ssh_enter::MainProcess(Processes(), own);
  if (!target)
    return Fail("the Instance's main container is not running (no process of it in the Pod)");
  const std::string base = "/proc/" + std::to_string(*target);
  std::ifstream environ_file(base + "/environ", std::ios::binary);
  std::stringstream environ_text;
  environ_text << environ_file.rdbuf();
  const std::vector<std::string> environment =
      gpustack::ssh_enter::SessionEnvironment(environ_text.str(), std::getenv("TERM"));
  const char* original_command = std::getenv("SSH_ORIGINAL_COMMAND");
  std::string command = original_command != nullptr ? original_command : "";
  const char* mount_path = std::getenv("VOLUME_MOUNT_PATH");
  std::string workdir = mount_path != nullptr ? mount_path : "";

  // Open everything first: once in main's mount namespace, /proc/<pid> may not be ours to read.
  const int root = open((base + "/root").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return Fail(Errno("open " + base + "/root"));
  struct Join {
    const char* name;
    int type;
    int fd = -1;
  };
  std::vector<Join> joins = {{"cgroup", CLONE_NEWCGROUP}, {"ipc", CLONE_NEWIPC},
                             {"uts", CLONE_NEWUTS},       {"net", CLONE_NEWNET},
                             {"mnt", CLONE_NEWNS}};  // the mount namespace last
  for (Join& j : joins) {
    const std::string theirs = base + "/ns/" + j.name;
    if (LinkOf(theirs) == LinkOf(std::string("/proc/self/ns/") + j.name)) continue;
    j.fd = open(theirs.c_str(), O_RDONLY | O_CLOEXEC);
    if (j.fd < 0) return Fail(Errno("open " + theirs));
  }
  for (const Join& j : joins) {
    if (j.fd >= 0 && setns(j.fd, j.type) != 0) return Fail(Errno(std::string("setns ") + j.name));
  }
  if (fchdir(root) != 0 || chroot(".") != 0) return Fail(Errno("entering main's root"));
  if (workdir.empty() || chdir(workdir.c_str()) != 0) {
    if (chdir("/") != 0) return Fail(Errno("chdir /"));
  }
  std::string why;
  if (!DropPrivileges(&why)) return Fail(why);

  std::string shell = access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
  const std::vector<std::string> args = gpustack::ssh_enter::ShellArguments(
      shell, command.empty() ? nullptr : command.c_str());
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  execve(shell.c_str(), argv.data(), envp.data());
  return Fail(Errno("exec " + shell + " in the main container"));
}
