#!/usr/bin/env python3
"""Instances' figures (README "Instances"; scripts/instance-bench.sh brings up the testbed):

  - create -> Ready of the Quick Start's sliced Instance on the real node (the image present, no
    pull), RUNS times one after another: from `kubectl create` to the watch event that says
    Ready, p50 and p99;
  - the controller at COUNT Instances: COUNT CPU Instances pinned round-robin to the kwok nodes
    (kwok plays their Pods), the time until every one is Ready (a list a second), the controller's
    own reconcile
    quantiles (its /metrics), and the worker's RSS before and after.

Environment: BENCH_RUNS (default 20), BENCH_COUNT (default 1000), BENCH_SKIP_READY=1 (the second
part only).
"""
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import testbed  # noqa: E402
from testbed import KUBECONFIG, KUBECTL  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
RUNS = int(os.environ.get("BENCH_RUNS", "20"))
COUNT = int(os.environ.get("BENCH_COUNT", "1000"))
NS = "bench"
IMAGE = "docker.io/library/busybox:local"
V1 = "instances.v1.worker.gpustack.ai"


def kubectl(*args, stdin=None, check=True, timeout=300):
    return testbed.run(KUBECTL, "--kubeconfig", KUBECONFIG, *args, stdin=stdin, check=check,
                       timeout=timeout)


def get(*args):
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class ReadyWatch:
    """The first time each Instance of the namespace is seen Ready, from a kubectl watch."""

    def __init__(self):
        self.ready = {}
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(
            [KUBECTL, "--kubeconfig", KUBECONFIG, "get", V1, "-n", NS, "-w", "-o", "json",
             "--output-watch-events"], stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        decoder, buffer = json.JSONDecoder(), ""
        for line in self.proc.stdout:
            buffer += line
            while buffer.strip():
                try:
                    event, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break
                buffer = buffer.lstrip()[end:]
                obj = event.get("object", {})
                name = obj.get("metadata", {}).get("name")
                if obj.get("status", {}).get("phase") == "Ready":
                    with self.cond:
                        self.ready.setdefault(name, time.time())
                        self.cond.notify_all()

    def wait(self, names, seconds):
        deadline = time.time() + seconds
        with self.cond:
            while not all(n in self.ready for n in names):
                left = deadline - time.time()
                if left <= 0:
                    missing = [n for n in names if n not in self.ready]
                    raise SystemExit(f"bench: {len(missing)} Instances not Ready: {missing[:5]}")
                self.cond.wait(left)
            return {n: self.ready[n] for n in names}

    def stop(self):
        self.proc.terminate()


def worker_pid():
    pids = subprocess.run(["pgrep", "-f", "gpustack-operator worker --namespace="],
                          capture_output=True, text=True).stdout.split()
    return int(pids[0])


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def reconcile_quantiles():
    args = get("deploy", "-n", "gpustack-system", "gpustack-operator-worker")
    port = next(a.split("=")[1] for a in args["spec"]["template"]["spec"]["containers"][0]["args"]
                if a.startswith("--secure-port="))
    text = subprocess.run(["curl", "-sk", f"https://127.0.0.1:{port}/metrics"],
                          capture_output=True, text=True).stdout
    out = {}
    for line in text.splitlines():
        if line.startswith("gpustack_instance_reconcile_seconds{"):
            out[line.split('quantile="')[1].split('"')[0]] = float(line.split()[-1])
        elif line.startswith("gpustack_instance_reconcile_seconds_count"):
            out["count"] = int(line.split()[-1])
    return out


def delete_all():
    kubectl("delete", V1, "-n", NS, "--all", "--wait=true", "--timeout=600s", timeout=700)


def main():
    testbed.install_local_chart(REPO, BUILD, ["gpustack-operator", "gpustack-ssh-server",
                                              "gpustack-plugin-example"])
    kubectl("create", "namespace", NS, check=False)
    t4 = testbed.wait("the T4 pool", lambda: next(
        (t["metadata"]["name"] for t in get("instancetypes")["items"]
         if "t4" in (t["spec"].get("acceleratorGroup") or "").lower()
         and t.get("status", {}).get("entrance")), None), 180)
    cpu = next(t["metadata"]["name"] for t in get("instancetypes")["items"]
               if not t["spec"].get("acceleratable"))
    for pool in (t4, cpu):
        entrance = get("instancetypes", pool)["status"]["entrance"]
        testbed.wait(f"the entrance {entrance} in {NS}", lambda: entrance in kubectl(
            "get", "localqueues", "-n", NS, "-o", "name").stdout, 120)
    watch = ReadyWatch()

    latencies = []
    for i in range(RUNS if os.environ.get("BENCH_SKIP_READY") != "1" else 0):
        name = f"sliced-{i}"
        body = {"apiVersion": "worker.gpustack.ai/v1", "kind": "Instance",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"type": t4, "image": IMAGE, "command": ["sleep", "86400"],
                         "resources": {"accelerator": "1", "acceleratorSlicedMemoryPercentage": 20,
                                       "acceleratorSlicedCoresPercentage": 100},
                         "volume": {"ephemeral": {"capacity": "1Gi"}}}}
        started = time.time()
        kubectl("create", "-f", "-", stdin=json.dumps(body))
        ready = watch.wait([name], 180)[name]
        latencies.append(ready - started)
        kubectl("delete", V1, "-n", NS, name, "--wait=true", timeout=200)
    if latencies:
        print(f"create -> Ready on the real node, {RUNS} runs: "
              f"p50 {quantile(latencies, 0.5):.2f} s, p99 {quantile(latencies, 0.99):.2f} s (min {min(latencies):.2f}, "
              f"max {max(latencies):.2f})", flush=True)

    # Held: the Pods are made and stay gated in the queue.
    kubectl("patch", "instancetypes", cpu, "--type", "merge", "-p", '{"spec":{"inactive":true}}')
    testbed.wait("the CPU queue held", lambda: get("clusterqueue", cpu)["spec"].get(
        "stopPolicy") == "Hold", 60)
    pid = worker_pid()
    rss_before = rss_mib(pid)
    before = reconcile_quantiles()
    names = [f"cpu-{i:04d}" for i in range(COUNT)]
    started = time.time()
    for chunk in range(0, COUNT, 100):
        items = [{"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Instance",
                  "metadata": {"name": n, "namespace": NS},
                  "spec": {"type": cpu, "image": IMAGE, "command": ["sleep", "86400"],
                           "resources": {"cpu": "100m", "ram": "64Mi"},
                           "volume": {"ephemeral": {"capacity": "100Mi"}}}}
                 for n in names[chunk:chunk + 100]]
        kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                       "items": items}))
    created = time.time() - started
    # Polled (a list a second): a watch client printing 1,000 objects' events falls behind.
    deadline, queued = time.time() + 1800, {}
    while len(queued) < COUNT:
        if time.time() > deadline:
            raise SystemExit(f"bench: {COUNT - len(queued)} Instances have no queued Pod after "
                             "30 min")
        for i in get(V1, "-n", NS)["items"]:
            if i.get("status", {}).get("phase") == "Pending":
                queued.setdefault(i["metadata"]["name"], time.time())
        time.sleep(1)
    took = max(queued.values()) - started
    after = reconcile_quantiles()
    rss_after = rss_mib(pid)
    pods = len(get("pods", "-n", NS, "-l", "worker.gpustack.ai/instance")["items"])
    print(f"{COUNT} CPU Instances (pool held): created in {created:.1f} s; every one Pending with "
          f"its Pod {took:.1f} s after the first create ({pods} Pods)", flush=True)
    print(f"controller reconciles (the most recent 4096 at {COUNT}): p50 "
          f"{after.get('0.50', 0) * 1000:.1f} ms, p90 {after.get('0.90', 0) * 1000:.1f} ms, p99 "
          f"{after.get('0.99', 0) * 1000:.1f} ms; {after.get('count', 0)} kept "
          f"(before: p99 {before.get('0.99', 0) * 1000:.1f} ms)", flush=True)
    print(f"worker RSS: {rss_before:.1f} MiB before, {rss_after:.1f} MiB at {COUNT} Instances "
          f"(+{rss_after - rss_before:.1f} MiB)", flush=True)
    delete_all()
    kubectl("patch", "instancetypes", cpu, "--type", "merge", "-p", '{"spec":{"inactive":false}}')
    watch.stop()


if __name__ == "__main__":
    main()
