#!/usr/bin/env python3
"""The local cluster's walkthrough (scripts/run.sh): Pods of each shape through the five gates,
one that finds no card queued until another finishes, then where each landed and what it got;
then the Quick Start's sliced Instance, its own figures (the simulated card told, through
PROCESSES, that its container's process uses 1,200 MiB and 40 % of the cores), and an Instance
with an SSH sidecar, with the ssh command that reaches it (its key made in KEY_DIR).

  scripts/walkthrough.py KUBECTL KUBECONFIG KEY_DIR PROCESSES
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from tools import host_pid  # noqa: E402  (shared with the metrics end-to-end test)

KUBECTL, KUBECONFIG, KEY_DIR, PROCESSES = sys.argv[1:5]
NS = "walkthrough"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ALLOCATED = "device.gpustack.ai/accelerator.allocated"
MODES = {1: "exclusive", 2: "shared", 3: "sliced", 4: "partitioned"}


def kubectl(*args, stdin=None, check=True):
    done = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, *args], input=stdin,
                          capture_output=True, text=True)
    if check and done.returncode != 0:
        raise SystemExit(f"walkthrough: kubectl {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def get_json(*args):
    return json.loads(kubectl(*args, "-o", "json"))


def say(line):
    print(f"    {line}", file=sys.stderr, flush=True)


def pool_entrances():
    """(T4 pool entrance, CPU pool entrance) from the InstanceTypes."""
    t4 = cpu = None
    for it in get_json("get", "instancetypes")["items"]:
        spec, status = it.get("spec", {}), it.get("status", {})
        group = spec.get("acceleratorGroup", "") or ""
        if "t4" in group.lower() and not it["metadata"]["name"].startswith("gpustack-aware"):
            t4 = status.get("entrance")
        elif not group and "aware" not in it["metadata"]["name"]:
            cpu = cpu or status.get("entrance")
    if not t4 or not cpu:
        raise SystemExit("walkthrough: no T4 or CPU pool with an entrance yet")
    return t4, cpu


def t4_pool():
    for it in get_json("get", "instancetypes")["items"]:
        group = it.get("spec", {}).get("acceleratorGroup", "") or ""
        if "t4" in group.lower() and not it["metadata"]["name"].startswith("gpustack-aware"):
            return it["metadata"]["name"]
    raise SystemExit("walkthrough: no T4 pool")


def wait_instance(name, ns, ready=lambda status: True, seconds=180):
    deadline = time.time() + seconds
    status = {}
    while time.time() < deadline:
        status = get_json("get", "instances", "-n", ns, name).get("status", {})
        if status.get("phase") == "Ready" and ready(status):
            return status
        time.sleep(1)
    raise SystemExit(f"walkthrough: Instance {ns}/{name} is not Ready: {json.dumps(status)}")


def instances():
    """The Quick Start's step 3 Instance (its type the T4 pool, its image the node's busybox), and
    one with an SSH sidecar."""
    t4 = t4_pool()
    quick_start = {
        "apiVersion": "worker.gpustack.ai/v1", "kind": "Instance",
        "metadata": {"name": "sliced-demo", "namespace": "default"},
        "spec": {"type": t4, "image": "docker.io/library/busybox:local",
                 "command": ["sleep", "86400"],
                 "resources": {"accelerator": "1", "acceleratorSlicedMemoryPercentage": 20,
                               "acceleratorSlicedCoresPercentage": 100},
                 "volume": {"ephemeral": {"capacity": "1Gi"}}}}
    say(f"sliced-demo: the Quick Start's Instance, 20 % of a T4's memory (InstanceType {t4})")
    kubectl("apply", "-f", "-", stdin=json.dumps(quick_start))
    wait_instance("sliced-demo", "default")
    env = [line for line in kubectl("exec", "-n", "default", "sliced-demo", "--", "env").splitlines()
           if line.startswith(("CUDA_DEVICE_", "NVIDIA_VISIBLE_DEVICES"))]
    say("kubectl exec sliced-demo -- env: " + " ".join(sorted(env)))
    # What binds that budget: the node's enforcer (here the HAMi-core test double), preloaded.
    preload = kubectl("exec", "-n", "default", "sliced-demo", "--", "cat", "/etc/ld.so.preload",
                      check=False).strip()
    say(f"kubectl exec sliced-demo -- cat /etc/ld.so.preload: {preload or '(none)'}")
    node = kubectl("get", "pod", "-n", "default", "sliced-demo", "-o",
                   "jsonpath={.spec.nodeName}").strip()
    for c in get_json("get", "devices", node).get("status", {}).get("conditions", []):
        if c.get("type") == "SlicesEnforced":
            say(f"Devices {node} SlicesEnforced={c['status']}: {c.get('message', '')}")
    slice_figures()

    key = os.path.join(KEY_DIR, "id_ed25519")
    if not os.path.exists(key):
        os.makedirs(KEY_DIR, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    with open(key + ".pub") as f:
        public_key = f.read().strip()
    kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "InstanceSSHPublicKey",
        "metadata": {"name": "walkthrough", "namespace": "default"},
        "spec": {"publicKey": public_key}}))
    ssh_demo = json.loads(json.dumps(quick_start))
    ssh_demo["metadata"]["name"] = "ssh-demo"
    ssh_demo["spec"]["sshPublicKey"] = {"name": "walkthrough"}
    say("ssh-demo: a 20 % slice with an SSH sidecar (its key: InstanceSSHPublicKey walkthrough)")
    kubectl("apply", "-f", "-", stdin=json.dumps(ssh_demo))
    status = wait_instance("ssh-demo", "default", lambda s: s.get("ports") and s.get("hostIPs"))
    port = next(p["nodePort"] for p in status["ports"] if p["port"] == 22)
    return (f"ssh -i {key} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
            f"-p {port} root@{status['hostIPs'][0]['ip']}")


def slice_figures():
    """sliced-demo's own figures: the simulated card runs one process of its, whose use the
    node daemon attributes to it and reads against its 20 % slice."""
    uid = get_json("get", "pod", "-n", "default", "sliced-demo")["metadata"]["uid"]
    status = get_json("get", "instances", "-n", "default", "sliced-demo")["status"]
    card = status["allocations"][0]["accelerators"][0]["id"]
    pid = host_pid(uid, "sleep")
    if pid is None:
        raise SystemExit("walkthrough: sliced-demo's process is not on this host")
    with open(PROCESSES) as f:
        rows = json.load(f)
    rows[card] = [{"pid": pid, "used_mib": 1200, "sm_util": 40}]
    with open(PROCESSES + ".tmp", "w") as f:
        json.dump(rows, f)
    os.replace(PROCESSES + ".tmp", PROCESSES)
    say(f"sliced-demo's process (host pid {pid}) uses 1200 MiB and 40 % of card {card}'s cores")
    path = "/apis/worker.gpustack.ai/v1/namespaces/default/instances/sliced-demo/metrics"
    deadline = time.time() + 90
    while True:
        sample = json.loads(kubectl("get", "--raw", path))["sample"]
        grants = sample.get("accelerators") or []
        if grants and grants[0].get("memoryUsedMiB") == 1200:
            break
        if time.time() > deadline:
            raise SystemExit(f"walkthrough: sliced-demo's figures never showed: {sample}")
        time.sleep(2)
    g = grants[0]
    say(f"kubectl get --raw {path}: {g['memoryUsedMiB']:.0f} of its {g['memoryTotalMiB']} MiB, "
        f"{g['coresUtilizationPercent']:.0f} % of its cores allowance; CPU "
        f"{sample.get('cpuUsedMilliCores', '?')}/{sample['cpuTotalMilliCores']} m, memory "
        f"{sample.get('memoryUsedMiB', '?')}/{sample['memoryTotalMiB']} MiB")


def pod(name, queue, limits):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "docker.io/library/busybox:local",
                                     "imagePullPolicy": "Never", "command": ["sleep", "3600"],
                                     "resources": {"limits": limits, "requests": limits}}]}}


def wait_running(names, seconds=120):
    deadline = time.time() + seconds
    while True:
        pods = {p["metadata"]["name"]: p for p in get_json("get", "pods", "-n", NS)["items"]}
        phases = {n: pods.get(n, {}).get("status", {}).get("phase") for n in names}
        if all(p == "Running" for p in phases.values()):
            return
        if time.time() > deadline:
            raise SystemExit(f"walkthrough: not running after {seconds}s: {phases}")
        time.sleep(1)


def events_of(name):
    items = get_json("get", "events", "-n", NS, "--field-selector",
                     f"involvedObject.name={name}")["items"]
    return [e for e in items if e.get("reason") == "NoCardFits"]


def main():
    t4, cpu = pool_entrances()
    kubectl("create", "namespace", NS, check=False)
    # Entrances reach every namespace: wait for this one's.
    deadline = time.time() + 60
    while t4 not in kubectl("get", "localqueues", "-n", NS, "-o", "name"):
        if time.time() > deadline:
            raise SystemExit(f"walkthrough: no entrance {t4} in namespace {NS}")
        time.sleep(1)
    shapes = [
        ("cpu", cpu, {"cpu": "500m"}, "a CPU-only Pod through the CPU pool"),
        ("whole", t4, {"nvidia.com/gpu": "1"}, "a whole card"),
        ("shared", t4, {"nvidia.com/gpu.shared": "2"}, "two of a card's ten shared slots"),
        ("slice", t4, {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "25"},
         "a 25 % memory slice"),
        ("whole-2", t4, {"nvidia.com/gpu": "1"}, "the last free card"),
    ]
    for name, queue, limits, what in shapes:
        say(f"{name}: {what} ({', '.join(f'{k}={v}' for k, v in limits.items())}, queue {queue})")
        kubectl("apply", "-f", "-", stdin=json.dumps(pod(name, queue, limits)))
    wait_running([s[0] for s in shapes])
    say("whole-3: one more whole card: Kueue has the credits, but no card is free (gate 3)")
    kubectl("apply", "-f", "-", stdin=json.dumps(pod("whole-3", t4, {"nvidia.com/gpu": "1"})))
    deadline = time.time() + 60
    while not events_of("whole-3"):
        if time.time() > deadline:
            raise SystemExit("walkthrough: whole-3 was not held back by gpustack-node-devices")
        time.sleep(1)
    message = events_of("whole-3")[-1]["message"]
    say("whole-3 waits: " + (message if len(message) <= 300 else message[:300] + " …"))
    say("deleting whole: its card goes back, and gate 3 admits whole-3 on its next try")
    kubectl("delete", "pod", "-n", NS, "whole", "--wait=true")
    wait_running(["whole-3"], 90)
    say("whole-3 admitted and running")

    print()
    print(kubectl("get", "instancetypes"))
    rows = [("POD", "NODE", "PHASE", "GRANTED")]
    for p in get_json("get", "pods", "-n", NS)["items"]:
        granted = p["metadata"].get("annotations", {}).get(ALLOCATED)
        what = "-"
        if granted:
            # {container: {"accelerators": [{"id", "mode", "allocated", ...}]}} (host/ledger/model.h)
            parts = []
            for container, allocation in json.loads(granted).items():
                for a in allocation.get("accelerators", []):
                    mode = MODES.get(a.get("mode"), str(a.get("mode")))
                    extra = (f" {a['sharedSlots']} slots" if a.get("sharedSlots") else "") + \
                            (f" {a['allocated']} units" if mode == "sliced" else "")
                    parts.append(f"{container}: {mode} {a.get('id', '?')}{extra}")
            what = "; ".join(parts) or "-"
        rows.append((p["metadata"]["name"], p["spec"].get("nodeName", "-"),
                     p["status"].get("phase", "-"), what))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]:<{width[2]}}  {r[3]}")

    print(file=sys.stderr)
    ssh = instances()
    print()
    print(kubectl("get", "instances", "-n", "default"))
    print("Log into ssh-demo (a shell in its main container, no capability, its slice's cap):")
    print(f"  {ssh}")


if __name__ == "__main__":
    main()
