#!/usr/bin/env python3
"""Instances on the real node (CTest label instance-e2e; docs/behaviour.md §7).

The chart installed as the local cluster installs it (scripts/local-cluster.sh values: 4 T4s
simulated on the testbed's real kubelet, kube-proxy for NodePorts, Kueue, the worker's gates,
a kwok node holding 8 H100 in MIG mode), then, through the v1 API with the real kubectl:

  - the Quick Start's step 3 Instance, verbatim apart from the type (the T4 pool) and the image
    (one the node has): Ready, the 20 % cap in `kubectl exec ... env`, the pool's SL view moving
    and coming back on delete;
  - an Instance with an SSH key: `ssh -p <nodePort> root@<host IP>` lands in main with no
    capability, main's cards and cap, mknod refused; a wrong key refused;
  - stop (the card freed in the node's Devices status) and start again; resources refused while
    running; a drained queue and a deleted InstanceType stop it;
  - a partition Instance on the MIG kwok node admitted by gate 3 (its Workload);
  - `kill -9` of the worker in the middle of creates: no duplicate Pod or Service.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import testbed  # noqa: E402
from testbed import KUBECONFIG, KUBECTL  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
NODE = "testbed-node"
MIG_NODE = "kwok-node-0"
NS = "default"  # the Quick Start's
IMAGE = "docker.io/library/busybox:local"
ALLOCATED = "device.gpustack.ai/accelerator.allocated"
START = time.time()


def say(line):
    print(f"[{time.time() - START:7.1f}s] {line}", flush=True)


def kubectl(*args, check=True, timeout=120, stdin=None):
    return testbed.run(KUBECTL, "--kubeconfig", KUBECONFIG, "--request-timeout=30s", *args,
                       check=check, timeout=timeout, stdin=stdin)


def get(*args):
    done = kubectl("get", *args, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def apply(obj):
    kubectl("apply", "-f", "-", stdin=json.dumps(obj))


def wait(what, predicate, seconds=180):
    return testbed.wait(what, predicate, seconds)


def instance(name):
    return get("instances.v1.worker.gpustack.ai", "-n", NS, name)


def phase_of(name):
    i = instance(name)
    return (i or {}).get("status", {}).get("phase")


def wait_phase(name, phase, seconds=180):
    def reached():
        i = instance(name) or {}
        status = i.get("status", {})
        return status if status.get("phase") == phase else None
    try:
        return wait(f"instance {name} {phase}", reached, seconds)
    except AssertionError:
        i = instance(name)
        pod = get("pod", "-n", NS, name)
        raise AssertionError(f"instance {name} never reached {phase}: status "
                             f"{json.dumps((i or {}).get('status'))}; pod status "
                             f"{json.dumps((pod or {}).get('status'))[:1500]}")


def quick_start(type_name, name="sliced-demo", **extra):
    spec = {"type": type_name, "image": IMAGE, "command": ["sleep", "86400"],
            "resources": {"accelerator": "1", "acceleratorSlicedMemoryPercentage": 20,
                          "acceleratorSlicedCoresPercentage": 100},
            "volume": {"ephemeral": {"capacity": "1Gi"}}}
    spec.update(extra)
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "Instance",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def delete_instance(name):
    kubectl("delete", "instances.v1.worker.gpustack.ai", "-n", NS, name, "--ignore-not-found",
            "--wait=true", "--timeout=120s", timeout=150)


def sl_view(type_name):
    """The SL (logically sliced) pair of the pool's EX/SH/SL/PT column ("100/400")."""
    t = get("instancetypes", type_name)
    return t["status"]["columns"]["accelerator"].split()[2]


def card_allocations():
    """{card id: allocated credits} from the node's Devices status."""
    devices = get("devices", NODE)
    return {a["id"]: a.get("allocated", 0)
            for g in devices.get("status", {}).get("groups", [])
            for a in g.get("accelerators", [])}


def pool_named(predicate):
    for t in get("instancetypes")["items"]:
        if predicate(t):
            return t["metadata"]["name"]
    return None


class Instances(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.environ.get("INSTANCE_E2E_INSTALL", "1") == "1":
            say("installing the chart (the local cluster's values)")
            testbed.install_local_chart(
                REPO, BUILD, ["gpustack-operator", "gpustack-ssh-server", "gpustack-plugin-example"])
            testbed.publish_devices(MIG_NODE, "nvidia-h100x8-mig-mixed", REPO)
        wait("the node's Devices with 4 T4s",
             lambda: len([a for g in get("devices", NODE)["spec"]["groups"]
                          if g["manufacturer"] == "nvidia" for a in g["accelerators"]]) == 4)
        cls.t4 = wait("the T4 pool", lambda: pool_named(
            lambda t: "t4" in (t.get("spec", {}).get("acceleratorGroup") or "").lower()
            and t.get("status", {}).get("entrance")))
        cls.h100 = wait("the H100 pool", lambda: pool_named(
            lambda t: "h100" in (t.get("spec", {}).get("acceleratorGroup") or "").lower()
            and t.get("status", {}).get("entrance")))
        entrance = get("instancetypes", cls.t4)["status"]["entrance"]
        wait(f"the entrance {entrance} in {NS}",
             lambda: entrance in kubectl("get", "localqueues", "-n", NS, "-o", "name").stdout)
        cls.keys = tempfile.mkdtemp(prefix="instance-e2e-")
        for key in ("id", "wrong"):
            testbed.run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        os.path.join(cls.keys, key))

    def ssh(self, status, command, key="id"):
        host = status["hostIPs"][0]["ip"]
        port = next(p["nodePort"] for p in status["ports"] if p["port"] == 22)
        return subprocess.run(
            ["ssh", "-i", os.path.join(self.keys, key), "-p", str(port),
             "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
             f"root@{host}", command],
            capture_output=True, text=True, timeout=60)

    def test_1_quick_start_slice(self):
        before = wait("the T4 pool's SL view", lambda: sl_view(self.t4))
        t0 = time.time()
        apply(quick_start(self.t4))
        self.addCleanup(delete_instance, "sliced-demo")
        status = wait_phase("sliced-demo", "Ready")
        say(f"sliced-demo Ready in {time.time() - t0:.1f} s: {json.dumps(status)}")
        self.assertEqual(status["nodeName"], NODE)
        self.assertTrue(status.get("hostIPs"), status)
        self.assertTrue(status.get("allocations"), status)
        env = dict(line.split("=", 1) for line in
                   kubectl("exec", "-n", NS, "sliced-demo", "--", "env").stdout.splitlines()
                   if "=" in line)
        card = status["allocations"][0]["accelerators"][0]["id"]
        memory = next(g["memory"] for g in get("devices", NODE)["spec"]["groups"]
                      if any(a["id"] == card for a in g["accelerators"]))
        self.assertEqual(env.get("CUDA_DEVICE_MEMORY_LIMIT_0"), f"{memory * 20 // 100}m", env)
        self.assertEqual(env.get("NVIDIA_VISIBLE_DEVICES"), card, env)
        pod = get("pod", "-n", NS, "sliced-demo")
        self.assertEqual(pod["metadata"]["ownerReferences"][0]["kind"], "Instance")
        self.assertTrue(pod["spec"]["hostIPC"] and pod["spec"]["shareProcessNamespace"])
        moved = wait("the SL view to move", lambda: sl_view(self.t4) != before and sl_view(self.t4))
        say(f"SL view {before} -> {moved}")
        # A running Instance's resources are fixed.
        done = kubectl("patch", "instances.v1.worker.gpustack.ai", "-n", NS, "sliced-demo",
                       "--type", "merge", "-p",
                       '{"spec":{"resources":{"acceleratorSlicedMemoryPercentage":30}}}',
                       check=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("stop the Instance first", done.stderr)
        delete_instance("sliced-demo")
        self.assertIsNone(get("pod", "-n", NS, "sliced-demo"))
        wait("the SL view to come back", lambda: sl_view(self.t4) == before)

    def test_2_ssh(self):
        with open(os.path.join(self.keys, "id.pub")) as f:
            public = f.read().strip()
        apply({"apiVersion": "worker.gpustack.ai/v1", "kind": "InstanceSSHPublicKey",
               "metadata": {"name": "e2e-key", "namespace": NS}, "spec": {"publicKey": public}})
        apply(quick_start(self.t4, name="ssh-demo", sshPublicKey={"name": "e2e-key"}))
        self.addCleanup(delete_instance, "ssh-demo")
        status = wait_phase("ssh-demo", "Ready")
        status = wait("the SSH node port", lambda: (instance("ssh-demo")["status"]
                                                    if instance("ssh-demo")["status"].get("ports")
                                                    else None))
        main_env = kubectl("exec", "-n", NS, "ssh-demo", "-c", "main", "--", "env").stdout
        done = wait("an SSH login", lambda: (lambda d: d if d.returncode == 0 else None)(
            self.ssh(status, "pwd; cat /proc/self/status; env; busybox mknod /tmp/node c 1 3; "
                     "echo mknod=$?")), seconds=60)
        out = done.stdout
        self.assertEqual(out.splitlines()[0], "/workspace", out)  # main's workspace
        cap_eff = next(l for l in out.splitlines() if l.startswith("CapEff:"))
        self.assertEqual(cap_eff.split()[1], "0000000000000000", out)
        self.assertIn("NoNewPrivs:\t1", out)
        for var in ("NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_MEMORY_LIMIT_0"):
            line = next(l for l in main_env.splitlines() if l.startswith(var + "="))
            self.assertIn(line, out.splitlines(), f"{var}: main has {line}")
        self.assertIn("mknod=1", out)
        wrong = self.ssh(status, "true", key="wrong")
        self.assertNotEqual(wrong.returncode, 0)
        self.assertIn("Permission denied", wrong.stderr)
        # The host key survives a stop and a start (it lives in a Secret).
        key_before = get("secret", "-n", NS, "ssh-demo-ssh-host-key")["data"]
        self.stop_and_start("ssh-demo")
        self.assertEqual(get("secret", "-n", NS, "ssh-demo-ssh-host-key")["data"], key_before)

    def stop_and_start(self, name):
        grant = instance(name)["status"]["allocations"][0]["accelerators"][0]
        card, credits = grant["id"], grant["allocated"]
        before = card_allocations()[card]
        kubectl("patch", "instances.v1.worker.gpustack.ai", "-n", NS, name, "--type", "merge",
                "-p", '{"spec":{"stop":true}}')
        wait_phase(name, "Stopped")
        self.assertIsNone(get("pod", "-n", NS, name))
        wait(f"{card}'s {credits} credits freed in the node's Devices status",
             lambda: card_allocations()[card] == before - credits)
        kubectl("patch", "instances.v1.worker.gpustack.ai", "-n", NS, name, "--type", "merge",
                "-p", '{"spec":{"stop":false}}')
        wait_phase(name, "Ready")

    def set_inactive(self, inactive):
        """An administrator's Hold (or its end) on the T4 pool: InstanceType spec.inactive, which
        the worker turns into the queue's stopPolicy."""
        kubectl("patch", "instancetypes", self.t4, "--type", "merge",
                "-p", json.dumps({"spec": {"inactive": inactive}}))
        wanted = "Hold" if inactive else "None"
        wait(f"the T4 queue's stopPolicy {wanted}",
             lambda: (get("clusterqueue", self.t4)["spec"].get("stopPolicy") or "None") == wanted)

    def test_3_drained_queue_stops_a_hold_does_not(self):
        apply(quick_start(self.t4, name="drain-demo"))
        try:
            wait_phase("drain-demo", "Ready")
            kubectl("patch", "clusterqueue", self.t4, "--type", "merge",
                    "-p", '{"spec":{"stopPolicy":"HoldAndDrain"}}')
            try:
                wait_phase("drain-demo", "Stopped")
                self.assertTrue(instance("drain-demo")["spec"]["stop"])
                events = kubectl("get", "events", "-n", NS, "--field-selector",
                                 "involvedObject.name=drain-demo,reason=Stopped").stdout
                self.assertIn("drained", events)
            finally:
                # A stop someone else put on the queue is sticky: the worker holds the type
                # until an administrator makes it active again.
                self.set_inactive(False)
            kubectl("patch", "instances.v1.worker.gpustack.ai", "-n", NS, "drain-demo",
                    "--type", "merge", "-p", '{"spec":{"stop":false}}')
            wait_phase("drain-demo", "Ready")
            # An administrator's Hold stops new admissions only.
            self.set_inactive(True)
            try:
                time.sleep(5)
                self.assertEqual(phase_of("drain-demo"), "Ready")
                self.assertFalse(instance("drain-demo")["spec"].get("stop", False))
            finally:
                self.set_inactive(False)
        finally:
            delete_instance("drain-demo")

    def test_4_partition_on_the_mig_node(self):
        apply({"apiVersion": "worker.gpustack.ai/v1", "kind": "Instance",
               "metadata": {"name": "mig-demo", "namespace": NS},
               "spec": {"type": self.h100, "image": IMAGE, "command": ["sleep", "86400"],
                        "resources": {"accelerator": "1",
                                      "acceleratorPartitionedProfile": "1g.10gb"},
                        "volume": {"ephemeral": {"capacity": "1Gi"}}}})
        self.addCleanup(delete_instance, "mig-demo")

        def admitted():
            for w in get("workloads", "-n", NS)["items"]:
                owners = w["metadata"].get("ownerReferences", [])
                if not any(o.get("name") == "mig-demo" for o in owners):
                    continue
                checks = w.get("status", {}).get("admissionChecks", [])
                ready = any(c["name"] == "gpustack-node-devices" and c["state"] == "Ready"
                            for c in checks)
                if ready and w.get("status", {}).get("admission"):
                    return w
            return None
        workload = wait("the MIG Instance's Workload admitted by gate 3", admitted)
        self.assertIn("mig", json.dumps(workload["spec"]["podSets"][0]["template"]))

    def test_5_worker_killed_mid_create(self):
        # Six Instances stored at once, then the worker killed while it makes their Pods and
        # Services (the v1 API and the webhooks go with it until it is back).
        names = [f"burst-{i}" for i in range(6)]
        cpu = pool_named(lambda t: not t.get("spec", {}).get("acceleratable"))
        kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "worker.gpustack.ai/v1", "kind": "Instance",
             "metadata": {"name": n, "namespace": NS},
             "spec": {"type": cpu, "image": IMAGE, "command": ["sleep", "86400"],
                      "resources": {"cpu": "100m", "ram": "64Mi"}, "ports": [{"port": 8080}],
                      "volume": {"ephemeral": {"capacity": "100Mi"}}}} for n in names]}))
        testbed.run("pkill", "-9", "-f", "gpustack-operator worker --namespace=", check=False)
        say("worker killed")
        for n in names:
            wait_phase(n, "Ready", seconds=300)
        pods = get("pods", "-n", NS, "-l", "worker.gpustack.ai/instance")["items"]
        services = get("services", "-n", NS, "-l", "worker.gpustack.ai/instance")["items"]
        for kind, items in (("Pod", pods), ("Service", services)):
            per = {}
            for o in items:
                per.setdefault(o["metadata"]["labels"]["worker.gpustack.ai/instance"], []).append(
                    o["metadata"]["name"])
            for n in names:
                self.assertEqual(per.get(n), [n], f"{kind}s of {n}: {per.get(n)}")
        for n in names:
            delete_instance(n)
        left = [p["metadata"]["name"] for p in
                get("pods", "-n", NS, "-l", "worker.gpustack.ai/instance")["items"]
                if p["metadata"]["name"] in names]
        self.assertEqual(left, [])
        # Each Service is owned by its Pod: the garbage collector takes it, none is orphaned.
        wait("the burst Instances' Services collected", lambda: not [
            s for s in get("services", "-n", NS, "-l", "worker.gpustack.ai/instance")["items"]
            if s["metadata"]["name"] in names], seconds=120)

    def test_6_deleted_type_stops(self):
        apply(quick_start(self.t4, name="type-demo"))
        self.addCleanup(delete_instance, "type-demo")
        wait_phase("type-demo", "Ready")
        saved = get("instancetypes", self.t4)
        kubectl("delete", "instancetypes", self.t4, "--wait=false")
        try:
            wait_phase("type-demo", "Stopped")
        finally:
            # The worker derives the pool again from the node.
            wait("the T4 pool again", lambda: get("instancetypes", self.t4) and
                 not get("instancetypes", self.t4)["metadata"].get("deletionTimestamp"),
                 seconds=180)
        self.assertIsNotNone(saved)


if __name__ == "__main__":
    unittest.main(verbosity=2)
