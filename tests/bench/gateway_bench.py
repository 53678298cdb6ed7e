"""The worker-gateway's figures (scripts/bench-gateway.sh starts the testbed): a cluster of N kwok
nodes of 8 x H100, its worker, then a gateway whose config names that cluster K times (K members,
each its own informers and connections), for each K given: the time until every member is Ready,
the gateway's RSS and CPU while idle, and the latency from a Devices change to the gateway's
watch event. Stops at the first K where that p99 exceeds a second. Prints figures; asserts
nothing. Every member, the worker and the apiserver share this machine's cores."""
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from testbed import KUBECONFIG, kubectl, run, wait  # noqa: E402
from worker_process import UnixConnection, Worker, api_available, unix_get  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
BINARY = os.environ["GPUSTACK_BINARY"]
H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def publish_fleet(nodes):
    with open(os.path.join(REPO, "tests/fixtures/nodes/expected/nvidia-h100x8-mig-off.devices.json")) as f:
        spec = json.load(f)
    items = [{"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
              "metadata": {"name": f"kwok-node-{i}"}, "spec": spec} for i in range(nodes)]
    for start in range(0, nodes, 200):
        kubectl("apply", "--server-side", "--field-manager", "gpustack-bench", "-f", "-",
                stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items[start:start + 200]}))


def pool_remaining():
    item = json.loads(kubectl("get", "instancetypes.v1alpha1.worker.gpustack.ai", H100, "-o", "json",
                              check=False).stdout or "{}")
    return item.get("status", {}).get("accelerator", {}).get("remaining")


def measure(members, nodes, work):
    socket_path = os.path.join(work, f"gateway-{members}.sock")
    config = os.path.join(work, f"clusters-{members}.yaml")
    with open(config, "w") as f:
        f.write("clusters:\n" + "".join(f"- name: m{i}\n  kubeconfig: {KUBECONFIG}\n"
                                        for i in range(members)))
    log = open(os.path.join(BUILD, "gateway-bench.log"), "a")
    started = time.monotonic()
    gateway = subprocess.Popen([BINARY, "--log-level", "warn", "worker-gateway", "--cluster-config",
                                config, "--bind-unix-path", socket_path],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        wait("the socket", lambda: os.path.exists(socket_path), 30)

        def ready():
            _, body = unix_get(socket_path, "/apis/clusters")
            return len(body["items"]) == members and all(c["state"] == "Ready" for c in body["items"])
        wait(f"{members} Ready members", ready, 600)
        ready_s = time.monotonic() - started
        time.sleep(10)
        cpu0, t0 = cpu_seconds(gateway.pid), time.monotonic()
        time.sleep(30)
        idle_cpu_ms = (cpu_seconds(gateway.pid) - cpu0) * 1000
        idle_s = time.monotonic() - t0
        rss = rss_mb(gateway.pid)

        connection = UnixConnection(socket_path, timeout=120)
        connection.request("GET", "/apis/instancetypes?aggregated=true&watch=true")
        response = connection.getresponse()
        events = queue.Queue()

        def read():
            try:
                for line in iter(response.readline, b""):
                    events.put((time.monotonic(), json.loads(line)))
            except Exception:  # noqa: BLE001 - the connection closes at the end
                pass
        threading.Thread(target=read, daemon=True).start()
        lower, upper = [], []
        cpu1 = cpu_seconds(gateway.pid)
        for i in range(10):
            unhealthy = i % 2 == 0
            want = members * (8 * nodes - (1 if unhealthy else 0))
            sent = time.monotonic()
            kubectl("patch", "devices.v1alpha1.worker.gpustack.ai", "kwok-node-0", "--type=json", "-p",
                    json.dumps([{"op": "replace", "path": "/spec/groups/0/accelerators/0/status/unhealthy",
                                 "value": unhealthy}]))
            patched = time.monotonic()
            while True:
                at, event = events.get(timeout=120)
                item = event["object"]
                if item.get("name") == H100 and item["status"]["remaining"]["accelerator"] == want:
                    lower.append(max(0.0, at - patched) * 1000)
                    upper.append((at - sent) * 1000)
                    break
        change_cpu_ms = (cpu_seconds(gateway.pid) - cpu1) * 1000 / 10
        connection.close()
        lower.sort()
        upper.sort()
        p99 = upper[-1]  # 10 samples: the largest stands for p99
        print(f"{members:4d} members: all Ready {ready_s:6.1f} s | RSS {rss:6.1f} MB | idle CPU "
              f"{idle_cpu_ms / idle_s * 60:6.0f} ms/min | change -> watch event p50 "
              f"{statistics.median(lower):5.0f}-{statistics.median(upper):5.0f} ms, max "
              f"{lower[-1]:5.0f}-{p99:5.0f} ms | gateway CPU per change {change_cpu_ms:5.0f} ms")
        return p99
    finally:
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(timeout=60)
        log.close()


def main():
    nodes = int(sys.argv[1])
    counts = [int(c) for c in sys.argv[2:]]
    kubectl("apply", "-f", os.path.join(REPO, "crds") + "/")
    made = time.monotonic()
    publish_fleet(nodes)
    print(f"fleet: {nodes} kwok nodes x 8 H100, Devices published in {time.monotonic() - made:.1f} s")
    worker = Worker(BINARY, BUILD, KUBECONFIG, "gateway-bench", os.path.join(BUILD, "gateway-bench-worker.log"), run)
    worker.start()
    try:
        wait("the member's v1 API", lambda: api_available(kubectl), 300)
        wait("the H100 pool over the whole fleet", lambda: pool_remaining() == 8 * nodes, 600)
        work = tempfile.mkdtemp(prefix="gateway-bench-")
        print("latency: from kubectl patch's return - from its start (the change lands between); "
              "p99 of 10 changes = the largest")
        for members in counts:
            if measure(members, nodes, work) > 1000:
                print(f"a change took more than 1 s with {members} members: stopping here")
                break
    finally:
        worker.stop(kubectl)


if __name__ == "__main__":
    main()
