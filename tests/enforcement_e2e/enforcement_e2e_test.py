#!/usr/bin/env python3
"""Slice budgets bind inside the container, on the real node (CTest label enforcement-e2e;
docs/enforcement.md).

On the chart the local cluster installs (4 T4s simulated on the testbed's real kubelet; the nvidia
plugin's enforcer, HAMi-core, is given as the test double tests/fakes/enforcement builds, through
plugins.config.nvidia.enforcer.hostPath), with a test image holding a program that allocates
through a fake libcuda.so.1:

  - the node's Devices condition SlicesEnforced names hami-core and where it was staged from (and
    is Unknown, not True, because the example plugin slices with no enforcer declared);
  - two Pods with a 20 % slice each: under the budget an allocation succeeds, one MiB past it is
    out of memory, cuMemGetInfo reports the budget; /etc/ld.so.preload names the staged library;
  - each Pod's working directory holds only its own ledger, on the host and in the container;
  - a container's own env wins over the enforcer's default (LIBCUDA_LOG_LEVEL);
  - GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY=auto keeps the visible-devices variable on the test
    node's containerd 1.6, and the device manager's log says why;
  - a deleted Pod's working directory goes; one deleted while the node daemon was down goes when
    it starts again, and a running Pod's stays.
"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "instance_e2e"))
import testbed  # noqa: E402
from instance_e2e_test import get, kubectl, pool_named, say, wait  # noqa: E402
from testbed import DIR  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
NODE = "testbed-node"
NS = "default"
IMAGE = "docker.io/gpustack/enforcement-test:local"
PODS_DIR = os.path.join(DIR, "node", "gpustack", "operator", "pods")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

# What each Pod reports, then it stays up for the host-side checks.
SCRIPT = r"""
B=${CUDA_DEVICE_MEMORY_LIMIT_0%m}
echo "budget=$B"
cuda_alloc $((B - 16)); echo "under_rc=$?"
cuda_alloc $((B + 1)); echo "over_rc=$?"
echo "preload=$(cat /etc/ld.so.preload)"
echo "workdir=" $(ls -A /var/run/gpustack/enforcer)
echo "loglevel=$LIBCUDA_LOG_LEVEL"
echo "visible=$NVIDIA_VISIBLE_DEVICES"
echo "done"
exec sleep 3600
"""


def libraries_of(*elves):
    """The shared libraries the dynamic loader maps for `elves`, as ldd names them."""
    out = subprocess.run(["ldd", *elves], capture_output=True, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        m = re.search(r"=> (/\S+)", line) or re.match(r"\s+(/\S+)", line)
        if m:
            found.add(m.group(1))
    return sorted(found)


def build_image():
    """The test image: busybox, cuda_alloc and the fake libcuda.so.1 where a driver puts it."""
    cuda_alloc = os.environ["GPUSTACK_CUDA_ALLOC"]
    libcuda = os.environ["GPUSTACK_FAKE_LIBCUDA"]
    enforcer = os.path.join(BUILD, "tests", "fakes", "enforcement", "hami-core", "libvgpu.so")
    archive = os.path.join(BUILD, "images", "enforcement-test.tar")
    os.makedirs(os.path.dirname(archive), exist_ok=True)
    args = ["python3", os.path.join(REPO, "scripts/images/oci_image.py"), "--ref", IMAGE,
            "--out", archive, "--entrypoint", "/bin/sh", "--env", "PATH=/bin:/usr/local/bin",
            "--file", "/bin/busybox:/bin/busybox:0755",
            "--file", f"{cuda_alloc}:/usr/local/bin/cuda_alloc:0755",
            "--file", f"{libcuda}:/usr/lib/x86_64-linux-gnu/libcuda.so.1:0755",
            "--dir", "tmp:1777", "--dir", "etc", "--dir", "proc", "--dir", "sys", "--dir", "dev"]
    for link in ("sh", "ls", "cat", "sleep"):
        args += ["--symlink", f"bin/{link}:busybox"]
    for lib in libraries_of(cuda_alloc, enforcer):
        if os.path.basename(lib).startswith("libcuda.so"):
            continue  # the fake's path in the build tree: placed above instead
        args += ["--file", f"{lib}:{lib}"]
    testbed.run(*args)
    testbed.run(os.path.join(REPO, "scripts/testbed/kubelet.sh"), "import", "--dir", DIR, archive)


def slice_pod(name, queue, env=()):
    limits = {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "20"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                     "command": ["/bin/sh", "-c", SCRIPT],
                                     "env": [{"name": k, "value": v} for k, v in env],
                                     "resources": {"limits": limits, "requests": limits}}]}}


def t4_entrance():
    """The LocalQueue the T4 pool admits through, once it exists in NS."""
    t4 = wait("the T4 pool", lambda: pool_named(
        lambda t: "t4" in (t.get("spec", {}).get("acceleratorGroup") or "").lower()
        and t.get("status", {}).get("entrance")))
    queue = get("instancetypes", t4)["status"]["entrance"]
    wait(f"the entrance {queue} in {NS}",
         lambda: queue in kubectl("get", "localqueues", "-n", NS, "-o", "name").stdout)
    return queue


def report_of(name):
    """The Pod's `key=value` lines once it printed them all; None before."""
    done = kubectl("logs", "-n", NS, name, check=False)
    if done.returncode != 0 or "done" not in done.stdout.splitlines():
        return None
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def daemon_log():
    """Everything the node daemon logged since it started."""
    return kubectl("logs", "-n", "gpustack-system", "-l",
                   "app.kubernetes.io/component=device-manager", "--tail=-1").stdout


def slices_enforced():
    devices = get("devices", NODE) or {}
    for c in devices.get("status", {}).get("conditions", []):
        if c.get("type") == "SlicesEnforced":
            return c
    return None


def daemon_pid():
    done = testbed.run("pgrep", "-f", "gpustack-operator device-manager serve", check=False)
    return done.stdout.split()[0] if done.returncode == 0 else None


class Enforcement(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        installed = testbed.run(testbed.HELM, "--kubeconfig", testbed.KUBECONFIG, "status",
                                "gpustack-operator", "-n", "gpustack-system",
                                check=False).returncode == 0  # by the Instance tests
        if not installed:
            testbed.install_local_chart(
                REPO, BUILD, ["gpustack-operator", "gpustack-ssh-server", "gpustack-plugin-example"])
        say("building and importing the test image")
        build_image()
        cls.queue = t4_entrance()

    def tearDown(self):
        kubectl("delete", "pod", "-n", NS, "enforced-a", "enforced-b", "--ignore-not-found",
                "--wait=true", timeout=120, check=False)

    def test_1_the_node_says_its_slices_are_enforced_and_by_what(self):
        condition = wait("the SlicesEnforced condition", slices_enforced, 120)
        say(f"SlicesEnforced: {condition}")
        # The example plugin slices too and declares no enforcer: the node cannot say for it.
        self.assertEqual((condition["status"], condition["reason"]),
                         ("Unknown", "NoEnforcerDeclared"), condition)
        self.assertIn("nvidia: enforced by hami-core, staged from /opt/gpustack/enforcers/nvidia",
                      condition["message"])  # the chart's mount of the host directory
        self.assertIn("example: the plugin declares no enforcer", condition["message"])

    def test_2_two_slices_each_bound_to_its_budget_in_its_own_working_directory(self):
        kubectl("apply", "-f", "-", stdin=json.dumps(slice_pod("enforced-a", self.queue)))
        kubectl("apply", "-f", "-", stdin=json.dumps(
            slice_pod("enforced-b", self.queue, env=[("LIBCUDA_LOG_LEVEL", "4")])))
        card_mib = next(g["memory"] for g in get("devices", NODE)["spec"]["groups"]
                        if g["manufacturer"] == "nvidia")
        reports, uids = {}, {}
        for name in ("enforced-a", "enforced-b"):
            reports[name] = wait(f"{name}'s report", lambda n=name: report_of(n), 240)
            uids[name] = get("pod", "-n", NS, name)["metadata"]["uid"]
            say(f"{name}: {reports[name]}")
        for name, report in reports.items():
            budget = int(report["budget"])
            self.assertEqual(budget, card_mib * 20 // 100, report)  # floor(card MiB x 20 %)
            self.assertEqual(report["under_rc"], "0", f"{name}: {budget - 16} MiB under the budget")
            self.assertEqual(report["over_rc"], "3", f"{name}: {budget + 1} MiB past it is OOM")
            self.assertEqual(report["preload"], "/usr/local/gpustack/nvidia/libvgpu.so")
            self.assertEqual(report["workdir"].split(), ["cudevshr.cache"], report)
        self.assertEqual(reports["enforced-a"]["loglevel"], "0")  # the enforcer's default
        self.assertEqual(reports["enforced-b"]["loglevel"], "4")  # the container's own wins
        logs = kubectl("logs", "-n", NS, "enforced-a").stdout
        self.assertIn(f"total_mib={int(reports['enforced-a']['budget'])}", logs)
        # GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY=auto on Debian's containerd 1.6: the variable,
        # and the device manager says why.
        for name, report in reports.items():
            self.assertTrue(report["visible"].startswith("GPU-"), report)
        pod = get("pod", "-n", NS, "enforced-a")
        self.assertFalse([k for k in pod["metadata"].get("annotations", {})
                          if k.startswith("cdi.k8s.io/")])
        logs = daemon_log()
        self.assertIn("nvidia: cards reach containers through the visible-devices variable: "
                      "containerd 1.6 has no CDI (GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY=auto)",
                      logs)

        # On the host: one directory per Pod, each holding only its own Pod's ledger (one line:
        # the allocation under the budget; the refused one never reached the card).
        for name, uid in uids.items():
            cache = os.path.join(PODS_DIR, uid, "main", "cudevshr.cache")
            with open(cache) as f:
                lines = [line.split() for line in f if line.strip()]
            used = (int(reports[name]["budget"]) - 16) << 20
            self.assertEqual([int(line[1]) for line in lines], [used], f"{cache}: {lines}")

        # Deleted while the node daemon is stopped: its directory goes when the daemon starts
        # again, and the running Pod's stays. Deleted while it runs: it goes (the watch).
        workdir = {name: os.path.join(PODS_DIR, uid) for name, uid in uids.items()}
        before = daemon_pid()
        testbed.run("pkill", "-STOP", "-f", "gpustack-operator device-manager serve")
        try:
            kubectl("delete", "pod", "-n", NS, "enforced-b", "--wait=true", timeout=120)
        finally:
            testbed.run("pkill", "-9", "-f", "gpustack-operator device-manager serve", check=False)
        self.assertTrue(os.path.exists(workdir["enforced-b"]), "nobody could have removed it yet")
        wait("the node daemon back", lambda: daemon_pid() not in (None, before), 120)
        wait("enforced-b's working directory removed by the restarted daemon",
             lambda: not os.path.exists(workdir["enforced-b"]), 120)
        self.assertTrue(os.path.exists(workdir["enforced-a"]), "a running Pod's stays")
        kubectl("delete", "pod", "-n", NS, "enforced-a", "--wait=true", timeout=120)
        wait("enforced-a's working directory removed",
             lambda: not os.path.exists(workdir["enforced-a"]), 60)


if __name__ == "__main__":
    unittest.main(verbosity=2)
