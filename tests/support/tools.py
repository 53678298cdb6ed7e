"""What the tests (and the local cluster's walkthrough) share without a testbed: the Go-built tools
(scripts/testbed/build-tools.sh builds one, or finds it in its cache, and prints its bin
directory), and finding a container's process on this host."""
import os
import subprocess


def tool(repo, project, binary=None):
    """The path of `binary` (default: `project`) of the cached Go-built `project`."""
    bin_dir = subprocess.run([os.path.join(repo, "scripts", "testbed", "build-tools.sh"), project],
                             capture_output=True, text=True, check=True).stdout.strip()
    return os.path.join(bin_dir, binary or project)


def host_pid(pod_uid, command):
    """The host pid of the Pod's process running `command` (found through /proc/<pid>/cgroup, as
    the node daemon places it); None when there is none."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cgroup") as f:
                if "pod" + pod_uid not in f.read():
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode()
        except OSError:
            continue
        if os.path.basename(argv0) == command:
            return int(entry)
    return None
