"""The worker-gateway over three real control planes (label gateway-e2e). Each testbed runs
etcd, kube-apiserver, the controller-manager, Kueue and kwok, with a worker of its own serving
the v1 API through the aggregator (--api-address, as api-e2e does); their kwok fleets differ:
  gw-a10g  one node with 1 x A10G
  gw-h100  one node with 8 x H100, MIG mixed (GPUs 0-2 partitioned)
  gw-t4    one node with 4 x T4 and one with 2 x A10G
The gateway reads the three through their kubeconfigs (loopback mode) and serves on a unix
socket. The tests run in order: each builds on what the previous one left."""
import http.client
import json
import os
import queue
import shutil
import signal
import statistics
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from testbed import KUBECTL, run, wait  # noqa: E402
from worker_process import UnixConnection, Worker, api_available, unix_get  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
BINARY = os.environ["GPUSTACK_BINARY"]
TESTBED = os.path.join(REPO, "scripts", "testbed", "testbed.sh")
DIRS = dict(zip(["gw-a10g", "gw-h100", "gw-t4"], os.environ["GPUSTACK_GATEWAY_TESTBEDS"].split(":")))
A10G = "gpustack--nvidia-a10g-linux-amd64"
T4 = "gpustack--nvidia-tesla-t4-linux-amd64"
H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
WORK = tempfile.mkdtemp(prefix="gateway-e2e-")
SOCKET = os.path.join(WORK, "gateway.sock")
CONFIG = os.path.join(WORK, "clusters.yaml")
LOG = os.path.join(BUILD, "gateway-e2e-gateway.log")


def kubectl(cluster, *args, **kw):
    return run(KUBECTL, "--kubeconfig", os.path.join(DIRS[cluster], "kubeconfig"), *args, **kw)


def gateway(path):
    """(status, parsed body) of a GET on the gateway's socket."""
    return unix_get(SOCKET, path)


def get(path):
    status, body = gateway(path)
    assert status == 200, f"GET {path}: {status} {body}"
    return body


def clusters():
    return {c["name"]: c for c in get("/apis/clusters")["items"]}


def aggregated(name):
    for item in get("/apis/instancetypes?aggregated=true")["items"]:
        if item["name"] == name:
            return item
    return None


def fixture(name):
    with open(os.path.join(REPO, "tests", "fixtures", "nodes", "expected", name + ".devices.json")) as f:
        return json.load(f)


def two_a10g():
    """The A10G fixture with a second card (index 1, its own UUID and bus)."""
    spec = fixture("nvidia-a10g")
    group = spec["groups"][0]
    second = json.loads(json.dumps(group["accelerators"][0]))
    second["index"] = 1
    second["physicalIndexes"] = [1]
    second["id"] = second["id"][:-1] + "1"
    second["topology"]["pciBusId"] = "0000:00:1f.0"
    group["accelerators"].append(second)
    return spec


def publish(cluster, node, spec, cards):
    """A kwok node's cards, as its node daemon would publish them (kwok runs none), and the
    capacity its kubelet would report."""
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(cards)}
    kubectl(cluster, "patch", "node", node, "--subresource=status", "--type=merge", "-p",
            json.dumps({"status": {"capacity": capacity, "allocatable": capacity}}))
    kubectl(cluster, "apply", "--server-side", "--field-manager", "gpustack-tests", "-f", "-",
            stdin=json.dumps({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
                              "metadata": {"name": node}, "spec": spec}))


WORKERS = {c: Worker(BINARY, BUILD, os.path.join(d, "kubeconfig"), c,
                     os.path.join(BUILD, f"gateway-e2e-worker-{c}.log"), run)
           for c, d in DIRS.items()}
GATEWAY = None


def write_config(extra=""):
    text = "clusters:\n" + "".join(
        f"- name: {c}\n  kubeconfig: {os.path.join(d, 'kubeconfig')}\n" for c, d in DIRS.items()) + extra
    with open(CONFIG + ".tmp", "w") as f:
        f.write(text)
    os.replace(CONFIG + ".tmp", CONFIG)  # as an editor saves: never half-written


def setUpModule():
    global GATEWAY
    open(LOG, "w").close()
    for cluster in DIRS:
        kubectl(cluster, "apply", "-f", os.path.join(REPO, "crds") + "/")
        kubectl(cluster, "delete", "apiservice", "v1.worker.gpustack.ai", "v1.gpustack.ai",
                "--ignore-not-found")
    publish("gw-a10g", "kwok-node-0", fixture("nvidia-a10g"), 1)
    publish("gw-h100", "kwok-node-0", fixture("nvidia-h100x8-mig-mixed"), 5)
    publish("gw-t4", "kwok-node-0", fixture("nvidia-t4x4"), 4)
    publish("gw-t4", "kwok-node-1", two_a10g(), 2)
    for worker in WORKERS.values():
        worker.start()
    for cluster in DIRS:
        wait(f"{cluster}'s v1 API to be Available",
             lambda: api_available(lambda *a, **k: kubectl(cluster, *a, **k)), 180)
    write_config()
    log = open(LOG, "a")
    GATEWAY = subprocess.Popen(
        [BINARY, "--log-level", "info", "worker-gateway", "--cluster-config", CONFIG,
         "--bind-unix-path", SOCKET],
        stdout=log, stderr=subprocess.STDOUT)
    log.close()
    wait("the gateway to answer on its socket", answers, 30)


def answers():
    """True once the gateway answers /readyz (plain text) on its socket."""
    connection = UnixConnection(SOCKET)
    try:
        connection.request("GET", "/readyz")
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def tearDownModule():
    if GATEWAY and GATEWAY.poll() is None:
        GATEWAY.send_signal(signal.SIGTERM)
        try:
            code = GATEWAY.wait(timeout=30)
        except subprocess.TimeoutExpired:
            GATEWAY.kill()
            code = "killed after 30 s"
        if code != 0:
            print(f"the gateway exited {code}; log in {LOG}", file=sys.stderr)
    for cluster, worker in WORKERS.items():
        code = worker.stop(lambda *a, **k: kubectl(cluster, *a, **k))
        if code not in (0, None):
            print(f"{cluster}'s worker exited {code}", file=sys.stderr)
    shutil.rmtree(WORK, ignore_errors=True)


def a10g_ready():
    item = aggregated(A10G)
    return item if item and len(item["status"]["tiers"]) == 2 and \
        item["status"]["remaining"]["accelerator"] == 3 else None


class GatewayE2e(unittest.TestCase):
    def test_1_every_member_ready_and_the_socket_its_owners_alone(self):
        wait("three Ready members", lambda: all(c["state"] == "Ready" for c in clusters().values())
             and len(clusters()) == 3, 120)
        mode = stat.S_IMODE(os.stat(SOCKET).st_mode)
        self.assertEqual(mode, 0o600, oct(mode))
        status, body = gateway("/apis/nothing")
        self.assertEqual(status, 404, body)

    def test_2_the_a10g_type_over_two_members_hand_computed(self):
        # gw-a10g: one node, one idle A10G; gw-t4: one node with two. By §5.3 each member
        # reports EX once = its node's free cards, SH = cards x 10, SL = 100 a card; the gateway
        # puts them in tiers 1 and 2 and sums remaining.
        item = wait("the A10G type from both members", a10g_ready, 180)
        status = item["status"]
        tiers = status["tiers"]
        self.assertEqual([t["key"] for t in tiers], [1, 2], json.dumps(status, indent=1))
        self.assertEqual([c["cluster"] for c in tiers[0]["candidates"]], ["gw-a10g"])
        self.assertEqual([c["cluster"] for c in tiers[1]["candidates"]], ["gw-t4"])
        self.assertEqual(tiers[0]["remaining"]["accelerator"], 1)
        self.assertEqual(tiers[0]["remaining"]["acceleratorSliced"], 100)
        self.assertEqual(tiers[1]["remaining"]["accelerator"], 2)
        self.assertEqual(tiers[1]["remaining"]["acceleratorShared"], 20)
        self.assertEqual(tiers[1]["remaining"]["acceleratorSliced"], 200)
        self.assertEqual(status["remaining"]["accelerator"], 3)
        self.assertEqual(status["remaining"]["acceleratorShared"], 30)
        self.assertEqual(status["remaining"]["acceleratorSliced"], 300)
        self.assertEqual(status["remaining"]["acceleratorPartitioned"], 0)
        self.assertEqual(status["remaining"]["acceleratorPartitionedProfiles"], [])
        once = status["onceMaxRequest"]
        self.assertEqual(once["accelerator"], 2)
        self.assertEqual(once["acceleratorSliced"], 100)
        unit = item["spec"]["unitResources"]
        self.assertEqual(once["allocation"]["accelerator"], 2)
        self.assertEqual(once["allocation"]["cpu"], 2 * int(unit["cpu"]))
        self.assertEqual(status["detail"]["manufacturer"], "nvidia")
        self.assertEqual(status["staleMembers"], [])
        # Types only one member offers are aggregated too: the H100's partitions by profile.
        h100 = aggregated(H100)
        self.assertIsNotNone(h100)
        self.assertEqual([c["cluster"] for t in h100["status"]["tiers"] for c in t["candidates"]],
                         ["gw-h100"])
        own = json.loads(kubectl("gw-h100", "get", "instancetypes.v1.worker.gpustack.ai", H100,
                                 "-o", "json").stdout)["status"]["acceleratorPartitioned"]
        by_name = {p["name"]: p["count"]
                   for p in h100["status"]["remaining"]["acceleratorPartitionedProfiles"]}
        self.assertEqual(by_name, {p["name"]: p["count"] for p in own["remainingProfiles"]})
        self.assertEqual(h100["status"]["remaining"]["accelerator"], 5)

    def test_3_cluster_lists_name_their_clusters(self):
        items = get("/apis/instancetypes")["items"]
        pairs = {(i["cluster"], i["metadata"]["name"]) for i in items}
        for expected in [("gw-a10g", A10G), ("gw-t4", A10G), ("gw-t4", T4), ("gw-h100", H100)]:
            self.assertIn(expected, pairs)
        self.assertTrue(all(i["apiVersion"] == "worker.gpustack.ai/v1" for i in items))
        self.assertTrue(all("managedFields" not in i["metadata"] for i in items))
        only = get("/apis/instancetypes?cluster=gw-h100")["items"]
        self.assertEqual({i["cluster"] for i in only}, {"gw-h100"})
        # A helper kind written through one member's v1 API, listed with its cluster.
        kubectl("gw-h100", "create", "namespace", "keys", check=False)
        kubectl("gw-h100", "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "worker.gpustack.ai/v1", "kind": "InstanceSSHPublicKey",
            "metadata": {"name": "alice", "namespace": "keys"},
            "spec": {"publicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG8 alice@example"}}))
        keys = wait("the key through the gateway",
                    lambda: get("/apis/instancesshpublickeys?namespace=keys")["items"], 30)
        self.assertEqual([(k["cluster"], k["metadata"]["name"]) for k in keys], [("gw-h100", "alice")])
        self.assertEqual(get("/apis/instancesshpublickeys?namespace=other")["items"], [])
        self.assertEqual(get("/apis/instancesshpublickeys")["kind"], "ClusterInstanceSSHPublicKeyList")
        status, body = gateway("/apis/instancetypes?namespace=x")
        self.assertEqual(status, 400, body)
        status, body = gateway("/apis/instances?aggregated=true")
        self.assertEqual(status, 400, body)
        status, body = gateway("/apis/instancetypes?cluster=gw-a10g,gw-nope")
        self.assertEqual((status, body["error"]), (404, "no such member cluster: gw-nope"))

    def test_4_a_members_devices_change_moves_the_aggregate(self):
        wait("the A10G type from both members", a10g_ready, 60)
        # A watch on the aggregate: its current items first, then each change as it happens.
        connection = UnixConnection(SOCKET, timeout=60)
        connection.request("GET", "/apis/instancetypes?aggregated=true&watch=true")
        response = connection.getresponse()
        self.assertEqual(response.status, 200)
        events = queue.Queue()

        def read():
            try:
                for line in iter(response.readline, b""):
                    events.put((time.monotonic(), json.loads(line)))
            except (OSError, ValueError, http.client.HTTPException):
                pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        initial = set()
        while A10G not in initial:
            _, event = events.get(timeout=10)
            self.assertEqual(event["type"], "ADDED")
            initial.add(event["object"]["name"])
        latencies, upper = [], []
        for i in range(20):
            unhealthy = i % 2 == 0
            want = 2 if unhealthy else 3
            sent = time.monotonic()
            kubectl("gw-a10g", "patch", "devices.v1alpha1.worker.gpustack.ai", "kwok-node-0", "--type=json",
                    "-p", json.dumps([{"op": "replace",
                                       "path": "/spec/groups/0/accelerators/0/status/unhealthy",
                                       "value": unhealthy}]))
            patched = time.monotonic()
            while True:
                try:
                    at, event = events.get(timeout=30)
                except queue.Empty:
                    self.fail(f"change {i}: no event showed {want} A10Gs remaining")
                item = event["object"]
                if event["type"] == "MODIFIED" and item["name"] == A10G and \
                        item["status"]["remaining"]["accelerator"] == want:
                    latencies.append(max(0.0, at - patched) * 1000)
                    upper.append((at - sent) * 1000)
                    break
        connection.close()
        # The list agrees with what the watch said last.
        self.assertEqual(aggregated(A10G)["status"]["remaining"]["accelerator"], 3)
        # The change reached the member's apiserver between kubectl's start and its return: the
        # two bounds of the latency.
        for what, figures in (("kubectl patch's return", latencies), ("kubectl's start", upper)):
            figures.sort()
            print(f"\nmember Devices change -> gateway watch event, from {what}: "
                  f"p50 {statistics.median(figures):.0f} ms, "
                  f"p99 {figures[int(len(figures) * 0.99) - 1]:.0f} ms, max {figures[-1]:.0f} ms "
                  f"over {len(figures)} changes", file=sys.stderr)

    def test_5_a_stopped_control_plane_is_stale_the_others_served(self):
        wait("the A10G type from both members", a10g_ready, 60)
        run(TESTBED, "stop", "--dir", DIRS["gw-t4"], "kube-apiserver")
        try:
            stale = wait("gw-t4 marked stale", lambda: clusters()["gw-t4"]["state"] == "Stale"
                         and clusters()["gw-t4"], 60)
            self.assertTrue(stale["since"].endswith("Z"), stale)
            self.assertEqual(clusters()["gw-a10g"]["state"], "Ready")
            self.assertEqual(clusters()["gw-h100"]["state"], "Ready")
            item = aggregated(A10G)
            self.assertEqual(item["status"]["remaining"]["accelerator"], 1, json.dumps(item["status"]))
            self.assertEqual([m["cluster"] for m in item["status"]["staleMembers"]], ["gw-t4"])
            self.assertEqual(item["status"]["staleMembers"][0]["since"], stale["since"])
            t4 = [c for t in item["status"]["tiers"] for c in t["candidates"] if c["cluster"] == "gw-t4"]
            self.assertEqual(t4[0]["counted"], False)
            self.assertEqual(t4[0]["stale"], True)
            # Its last objects are still listed, named by cluster.
            self.assertIn(("gw-t4", T4), {(i["cluster"], i["metadata"]["name"])
                                          for i in get("/apis/instancetypes")["items"]})
            self.assertEqual(aggregated(T4)["status"]["remaining"]["accelerator"], 0)
        finally:
            run(TESTBED, "start", "--dir", DIRS["gw-t4"], "kube-apiserver")
        wait("gw-t4 Ready again", lambda: clusters()["gw-t4"]["state"] == "Ready", 180)
        wait("the A10G type from both members again", a10g_ready, 120)
        self.assertEqual(aggregated(T4)["status"]["remaining"]["accelerator"], 4)

    def test_6_a_malformed_kubeconfig_names_its_member_and_the_others_stay(self):
        bad = os.path.join(WORK, "broken.kubeconfig")
        with open(bad, "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: ftp://nope}}\n")
        write_config(f"- name: broken\n  kubeconfig: {bad}\n- name: Not_A_Label\n  kubeconfig: {bad}\n")
        members = wait("the broken member named", lambda: clusters().get("broken", {}).get("state")
                       == "Invalid" and clusters(), 30)
        self.assertEqual(members["broken"]["state"], "Invalid")
        self.assertIn("broken.kubeconfig", members["broken"]["reason"])
        self.assertEqual(members["Not_A_Label"]["state"], "Invalid")
        self.assertIn("DNS label", members["Not_A_Label"]["reason"])
        for c in DIRS:
            self.assertEqual(members[c]["state"], "Ready", members[c])
        self.assertIsNotNone(a10g_ready())
        # The kubeconfig mended in place (a rotated Secret): the member comes up, no restart.
        with open(os.path.join(DIRS["gw-a10g"], "kubeconfig")) as f:
            good = f.read()
        with open(bad + ".tmp", "w") as f:
            f.write(good)
        os.replace(bad + ".tmp", bad)
        wait("the mended member Ready", lambda: clusters()["broken"]["state"] == "Ready", 60)
        self.assertEqual(aggregated(A10G)["status"]["remaining"]["accelerator"], 4)
        # Removed from the file: gone from the views, without a restart.
        write_config()
        wait("the broken members gone", lambda: set(clusters()) == set(DIRS), 30)
        self.assertEqual(GATEWAY.poll(), None)
        with open(f"/proc/{GATEWAY.pid}/status") as f:
            rss = [l for l in f if l.startswith("VmRSS")][0].split()[1]
        print(f"\ngateway VmRSS with 3 small members: {int(rss) / 1024:.1f} MB", file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
