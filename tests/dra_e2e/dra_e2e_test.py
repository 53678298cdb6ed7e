#!/usr/bin/env python3
"""The DRA front end on a real kubelet (CTest label dra-e2e; docs/dra.md).

A real-node testbed whose node runs containerd 2 with CDI, the real scheduler and the
controller-manager (its ResourceClaim controller), and `device-manager serve --dra` on the 4×T4
fixture's fake NVML, as a process on the node (as node-e2e runs it); the alpha gates
DRAConsumableCapacity and DRAPartitionableDevices are on. The chart's DeviceClasses come from
`helm template`. Checked:

  - the kubelet registers the driver; the node's ResourceSlice lists the four cards;
  - a claim for one T4 is allocated by the scheduler, prepared, and reaches the container as a
    CDI device (NVIDIA_VISIBLE_DEVICES of its card); the device plugin's tokens show the card
    taken; deleting the Pod unprepares it and the card comes back;
  - the two front ends never share a card: a device-plugin Pod's card leaves the slice, claims
    get only the others, a fifth request of either kind waits; then random mixed requests and
    deletions, every card held by at most one of them after each step;
  - kill -9 of the daemon right after a prepare: the record restores the claim, the Pod runs on
    the card it was prepared, nothing is charged twice, the unprepare frees it;
  - an XID on a card takes it out of the slice; discovery brings it back;
  - two claims for 20 % of a T4's memory at 40 % of its compute share one card, each container
    with CUDA_DEVICE_MEMORY_LIMIT_0 and CUDA_DEVICE_SM_LIMIT of its share; a whole-card claim
    on that card then waits;
  - on the 8×H100 fixture, a 1g.10gb claim gets a MIG partition made at prepare and destroyed
    at unprepare.
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import testbed  # noqa: E402
from testbed import kubectl, wait  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
BINARY = os.path.join(BUILD, "bin", "gpustack-operator")
NODE = "testbed-node"
NS = "default"
FIXTURE = "nvidia-t4x4"
WORK = os.path.join(BUILD, "tests", "dra_e2e", "run")
SLICE = f"{NODE}-nvidia.gpustack.ai"
with open(os.path.join(REPO, "tests/fixtures/nodes", FIXTURE + ".json")) as f:
    UUIDS = [c["uuid"] for c in json.load(f)["nvml"]["devices"]]


def say(line):
    print(f"[dra-e2e] {line}", flush=True)


def get(*args):
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


class Daemon:
    """`device-manager serve --dra` on the testbed node, on a fixture's fake hardware."""

    def __init__(self, fixture=FIXTURE):
        work = os.path.join(WORK, fixture)
        os.makedirs(work, exist_ok=True)
        self.log_path = os.path.join(work, "daemon.log")
        self.events = os.path.join(work, "nvml-events")
        self.process = None
        open(self.log_path, "w").close()
        open(self.events, "w").close()
        config = os.path.join(work, "node-config.json")
        with open(config, "w") as f:
            json.dump({"plugins": {"nvidia": {"config": {"state_dir": work + "/nvidia"}}}}, f)
        self.args = [BINARY, "--log-level", "info", "device-manager", "serve",
                     "--node-name", NODE,
                     "--sysfs-root", os.path.join(BUILD, "fixtures/nodes", fixture, "sys"),
                     "--pod-resources-socket",
                     os.path.join(testbed.DIR, "node/kubelet/pod-resources/kubelet.sock"),
                     "--node-config", config, "--secure-port", "0",
                     "--state-dir", os.path.join(work, "state"), "--discover-period", "20",
                     "--dra", "--kubelet-dir", os.path.join(testbed.DIR, "node/kubelet")]
        vendor = os.path.join(BUILD, "tests/fakes/vendor")
        self.env = {"GPUSTACK_FAKE_FIXTURE": os.path.join(REPO, "tests/fixtures/nodes",
                                                          fixture + ".json"),
                    "GPUSTACK_NVIDIA_LIBRARY": os.path.join(vendor, "libnvidia-ml.so.1"),
                    "GPUSTACK_FAKE_NVML_EVENTS": self.events,
                    "GPUSTACK_STATE_DIR": os.path.join(work, "state"),
                    "GPUSTACK_DATA_DIR": os.path.join(work, "data"),
                    "KUBECONFIG": testbed.KUBECONFIG, "PATH": "/usr/bin:/bin"}

    def start(self):
        self.process = subprocess.Popen(self.args, env=self.env, stdout=open(self.log_path, "a"),
                                        stderr=subprocess.STDOUT)
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(sig)
        code = self.process.wait(timeout=30)
        return code

    def log(self):
        with open(self.log_path) as f:
            return f.read()


def claim(name, device_class="nvidia.gpustack.ai", capacity=None, selector=None):
    """A claim for one device of `device_class`; `capacity`: what a share consumes (a slice)."""
    exactly = {"deviceClassName": device_class}
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def pod(name, claim_name=None, gpus=0):
    """A Pod that prints the card it sees: through a claim, or through the device plugin."""
    container = {"name": "main", "image": "docker.io/library/busybox:local",
                 "imagePullPolicy": "Never",
                 "command": ["sh", "-c", 'echo "memory=$CUDA_DEVICE_MEMORY_LIMIT_0"; '
                             'echo "cores=$CUDA_DEVICE_SM_LIMIT"; '
                             'echo "visible=$NVIDIA_VISIBLE_DEVICES"; exec sleep 3600']}
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "containers": [container]}
    if claim_name:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": spec}


def apply(*objects):
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                   "items": list(objects)}))


def printed(name):
    """What a running Pod's container printed (memory, cores, visible); None until it did."""
    p = get("pod", "-n", NS, name)
    if p["status"].get("phase") != "Running":
        return None
    out = kubectl("logs", "-n", NS, name, check=False).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return values if "visible" in values else None


def visible(name):
    """The card a running Pod's container printed; None until it did."""
    values = printed(name)
    return values["visible"] if values else None


def slice_devices():
    s = get("resourceslice", SLICE)
    return {d["attributes"]["uuid"]["string"] for d in s["spec"].get("devices") or []}


def held_cards():
    """The cards the node's ledger charges, from its Devices status."""
    status = get("devices", NODE).get("status", {})
    return {a["id"] for g in status.get("groups", []) for a in g["accelerators"]
            if a.get("allocated", 0) > 0}


def allocatable_gpus():
    return int(get("node", NODE)["status"]["allocatable"].get("nvidia.com/gpu", "0"))


def delete(*names):
    if names:
        kubectl("delete", "pod", "-n", NS, *names, "--ignore-not-found", "--wait=true",
                timeout=180)


def delete_claims(*names):
    if names:
        kubectl("delete", "resourceclaim", "-n", NS, *names, "--ignore-not-found",
                "--wait=true", timeout=120)


def pending_reason(name):
    p = get("pod", "-n", NS, name)
    if p["status"].get("phase") != "Pending":
        return None
    for c in p["status"].get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return c.get("message", "unschedulable")
    return None


class Dra(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        subprocess.run(["pkill", "-KILL", "-f", f"^{BINARY} .*device-manager serve"], check=False)
        kubectl("apply", "--server-side", "-f",
                os.path.join(REPO, "crds/worker.gpustack.ai_devices.yaml"))
        classes = testbed.helm("template", "gpustack-operator",
                               os.path.join(REPO, "charts/gpustack-operator"),
                               "--set", "deviceManager.dra.enabled=true", "--show-only",
                               "templates/device-manager/deviceclasses.yaml").stdout
        kubectl("apply", "-f", "-", stdin=classes)
        cls.daemon = Daemon().start()
        cls.addClassCleanup(cls.daemon.stop)
        wait("the kubelet to register the driver",
             lambda: "the kubelet registered DRA driver gpustack.ai" in cls.daemon.log(), 60)

    def tearDown(self):
        pods = [p["metadata"]["name"] for p in get("pods", "-n", NS)["items"]]
        delete(*pods)
        claims = [c["metadata"]["name"] for c in get("resourceclaims", "-n", NS)["items"]]
        delete_claims(*claims)
        if self.daemon.process.poll() is not None:  # a test that killed it
            self.daemon.start()
        wait("every card free", lambda: not held_cards() and len(slice_devices()) == 4, 60)

    def test_1_the_slice_lists_every_card(self):
        s = get("resourceslice", SLICE)
        self.assertEqual(s["spec"]["driver"], "gpustack.ai")
        self.assertEqual(s["spec"]["nodeName"], NODE)
        self.assertEqual(s["spec"]["pool"]["name"], f"{NODE}/nvidia")
        names = sorted(d["name"] for d in s["spec"]["devices"])
        self.assertEqual(names, ["card-0", "card-1", "card-2", "card-3"])
        self.assertEqual(slice_devices(), set(UUIDS))
        owner = s["metadata"]["ownerReferences"][0]
        self.assertEqual((owner["kind"], owner["name"]), ("Node", NODE))
        say(f"slice {SLICE}: {names}, generation {s['spec']['pool']['generation']}")

    def test_2_a_claim_gets_a_whole_card_through_cdi(self):
        apply(claim("one-t4"), pod("dra-a", claim_name="one-t4"))
        card = wait("dra-a's card", lambda: visible("dra-a"), 120)
        allocated = get("resourceclaim", "-n", NS, "one-t4")["status"]["allocation"]
        device = allocated["devices"]["results"][0]["device"]
        say(f"claim one-t4: {device}, the container sees {card}")
        self.assertEqual(card, UUIDS[int(device.split("-")[1])])
        self.assertEqual(wait("the ledger to hold it", held_cards, 30), {card})
        wait("the device plugin to offer 3 cards", lambda: allocatable_gpus() == 3, 60)
        self.assertIn("claim default/one-t4 prepared", self.daemon.log())
        delete("dra-a")
        wait("the unprepare", lambda: "claim default/one-t4 unprepared" in self.daemon.log(), 60)
        wait("the card back", lambda: not held_cards() and allocatable_gpus() == 4, 60)

    def test_3_the_front_ends_never_share_a_card(self):
        apply(pod("plugin-a", gpus=1))
        plugin_card = wait("plugin-a's card", lambda: visible("plugin-a"), 120)
        wait("its card out of the slice", lambda: slice_devices() == set(UUIDS) - {plugin_card},
             30)
        names = [f"c{i}" for i in range(4)]
        apply(*[claim(n) for n in names], *[pod(f"claim-{n}", claim_name=n) for n in names])
        wait("three claims running",
             lambda: sum(1 for n in names if visible(f"claim-{n}")) == 3, 180)
        cards = {n: visible(f"claim-{n}") for n in names}
        waiting = [n for n, c in cards.items() if c is None]
        self.assertEqual(len(waiting), 1, cards)
        given = [c for c in cards.values() if c]
        self.assertEqual(len(set(given)), 3, cards)
        self.assertNotIn(plugin_card, given)
        self.assertTrue(wait("the fourth claim unschedulable",
                             lambda: pending_reason(f"claim-{waiting[0]}"), 60))
        # The other way round: a second device-plugin Pod finds no card, once the kubelet has
        # published what the device plugin offers (without gate 3 the scheduler reads that).
        wait("the device plugin to offer plugin-a's card only", lambda: allocatable_gpus() == 1,
             60)
        apply(pod("plugin-b", gpus=1))
        reason = wait("plugin-b unschedulable", lambda: pending_reason("plugin-b"), 60)
        say(f"plugin-b waits: {reason}")
        self.assertIn("nvidia.com/gpu", reason)
        self.assertEqual(held_cards(), set(UUIDS))
        # The device plugin's card freed: the waiting claim gets exactly it.
        delete("plugin-a", "plugin-b")
        self.assertEqual(wait("the fourth claim's card", lambda: visible(f"claim-{waiting[0]}"),
                              180), plugin_card)

    def test_4_random_mixed_requests_never_share_a_card(self):
        rng = random.Random(int(os.environ.get("GPUSTACK_DRA_SEED", "29")))
        live = {}  # pod name -> its claim's name or None
        for step in range(int(os.environ.get("GPUSTACK_DRA_STEPS", "100"))):
            if live and (len(live) >= 5 or rng.random() < 0.35):
                name = rng.choice(sorted(live))
                delete(name)
                delete_claims(*[c for c in [live.pop(name)] if c])
                action = f"delete {name}"
            elif rng.random() < 0.5:
                name = f"r{step}"
                apply(claim(name), pod(f"claim-{name}", claim_name=name))
                live[f"claim-{name}"] = name
                action = f"claim {name}"
            else:
                # The scheduler counts device-plugin Pods against the Node's allocatable, which
                # the kubelet publishes every 10 s: wait for it to show the claims' cards taken
                # (with Kueue, gate 3 reads the ledger itself; here nothing stands in between).
                claimed = sum(1 for n, c in live.items() if c and visible(n))
                wait("the device plugin's offer", lambda: allocatable_gpus() == 4 - claimed, 60)
                name = f"plugin-r{step}"
                apply(pod(name, gpus=1))
                live[name] = None
                action = f"device plugin {name}"
            # Settled: every Pod either runs with its card or waits unscheduled.
            def state():
                now = {n: visible(n) or pending_reason(n) for n in live}
                return (now,) if all(now.values()) else None
            (settled,) = wait(f"step {step} ({action}) to settle", state, 180)
            cards = [c for c in settled.values() if c and c.startswith("GPU-")]
            self.assertEqual(len(cards), len(set(cards)), f"step {step}: {settled}")
            self.assertLessEqual(set(cards), held_cards(), f"step {step}: {settled}")
        say(f"{step + 1} random steps, {len(live)} Pods left")

    def test_5_kill_9_after_a_prepare_loses_nothing_and_charges_nothing_twice(self):
        apply(claim("k9"), pod("claim-k9", claim_name="k9"))
        wait("the prepare", lambda: "claim default/k9 prepared" in self.daemon.log(), 120)
        self.assertEqual(self.daemon.stop(signal.SIGKILL), -signal.SIGKILL)
        self.daemon.start()
        wait("the restore", lambda: "1 prepared ResourceClaim(s) restored" in self.daemon.log(),
             60)
        card = wait("claim-k9's card", lambda: visible("claim-k9"), 120)
        device = get("resourceclaim", "-n", NS, "k9")["status"]["allocation"]["devices"][
            "results"][0]["device"]
        self.assertEqual(card, UUIDS[int(device.split("-")[1])])
        self.assertEqual(wait("the ledger to hold it", held_cards, 30), {card})
        wait("the device plugin to offer 3 cards", lambda: allocatable_gpus() == 3, 60)
        self.assertEqual(slice_devices(), set(UUIDS))  # a claim's card stays offered
        delete("claim-k9")
        wait("the card back", lambda: not held_cards() and allocatable_gpus() == 4, 60)

    def test_6_an_xid_takes_a_card_out_of_the_slice(self):
        time.sleep(1)  # the event set is registered
        path = f"/apis/resource.k8s.io/v1/resourceslices/{SLICE}"

        def offered():
            code, body = testbed.api_get(path)
            return {d["attributes"]["uuid"]["string"] for d in body["spec"]["devices"] or []}
        written = time.monotonic()
        with open(self.daemon.events, "a") as f:
            f.write(f"{UUIDS[2]} 79\n")
        while offered() != set(UUIDS) - {UUIDS[2]}:
            self.assertLess(time.monotonic() - written, 30, "card 2 still offered after 30 s")
            time.sleep(0.01)
        say(f"XID event written -> the slice without the card: "
            f"{(time.monotonic() - written) * 1000:.0f} ms")
        self.assertIn("XID 79", self.daemon.log())
        wait("discovery to bring it back", lambda: slice_devices() == set(UUIDS), 60)

    def test_7_shares_of_one_card_are_slices_with_their_budgets(self):
        # 20 % of a T4's memory (floor(16384 MiB x 20 %)) at 40 % of its compute, twice, on card 1.
        on_card_1 = 'device.attributes["gpustack.ai"].index == 1'
        share = {"memory": "3276Mi", "cores": "40"}
        # One after the other: the 1.35 scheduler (the gate is alpha) was seen to leave a second
        # share created in the same instant unschedulable until its periodic retry.
        apply(claim("s1", capacity=share, selector=on_card_1), pod("share-1", claim_name="s1"))
        first = wait("share-1's budget", lambda: printed("share-1"), 120)
        apply(claim("s2", capacity=share, selector=on_card_1), pod("share-2", claim_name="s2"))
        second = wait("share-2's budget", lambda: printed("share-2"), 120)
        say(f"two shares of card 1: {first}, {second}")
        for values in (first, second):
            self.assertEqual(values["visible"], UUIDS[1])
            self.assertEqual(values["memory"], "3276m")
            self.assertEqual(values["cores"], "40")
        card = next(a for g in get("devices", NODE)["status"]["groups"]
                    for a in g["accelerators"] if a["id"] == UUIDS[1])
        self.assertEqual((card["mode"], card["allocatedSlices"]), (3, 2), card)
        # The card's remaining room is what the scheduler sees: a whole-card claim on it waits.
        apply(claim("w1", selector=on_card_1), pod("whole-1", claim_name="w1"))
        self.assertTrue(wait("the whole card unschedulable", lambda: pending_reason("whole-1"),
                             60))
        wait("the device plugin to offer 3 cards", lambda: allocatable_gpus() == 3, 60)

    def test_8_figures(self):
        """Not a check: how long the prepares of this run took, from the daemon's log."""
        times = sorted(float(m) for m in re.findall(r"prepared in ([0-9.]+) ms",
                                                    self.daemon.log()))
        self.assertTrue(times)
        def pct(p):
            return times[min(len(times) - 1, int(round(p / 100 * (len(times) - 1))))]
        say(f"NodePrepareResources, {len(times)} claims: p50 {pct(50):.1f} ms, "
            f"p99 {pct(99):.1f} ms, max {times[-1]:.1f} ms")


class DraMig(unittest.TestCase):
    """A MIG partition claimed on the 8×H100 fixture (3 cards in MIG mode): created at prepare,
    destroyed at unprepare."""

    @classmethod
    def setUpClass(cls):
        subprocess.run(["pkill", "-KILL", "-f", f"^{BINARY} .*device-manager serve"], check=False)
        cls.daemon = Daemon("nvidia-h100x8-mig-mixed").start()
        cls.addClassCleanup(cls.daemon.stop)
        wait("the kubelet to register the driver",
             lambda: "the kubelet registered DRA driver gpustack.ai" in cls.daemon.log(), 60)

    def test_a_1g_10gb_claim_gets_a_partition_made_for_it(self):
        wait("the partition slices", lambda: any(
            s["metadata"]["name"] == f"{NODE}-nvidia-card-0.gpustack.ai"
            for s in get("resourceslices")["items"]), 30)
        apply(claim("mig", device_class="nvidia-partition.gpustack.ai",
                    selector='device.attributes["gpustack.ai"].profile == "1g.10gb"'),
              pod("mig-a", claim_name="mig"))
        card = wait("mig-a's partition", lambda: visible("mig-a"), 120)
        device = get("resourceclaim", "-n", NS, "mig")["status"]["allocation"]["devices"][
            "results"][0]["device"]
        say(f"claim mig: {device}, the container sees {card}")
        self.assertTrue(card.startswith("MIG-"), card)
        self.assertIn("1g-10gb", device)
        profiles = [p for g in get("devices", NODE)["status"]["groups"] for a in g["accelerators"]
                    for p in a.get("allocatedProfiles", [])]
        self.assertEqual(profiles, [{"name": "1g.10gb", "count": 1}])
        delete("mig-a")
        wait("the partition destroyed", lambda: f"destroyed partition {card}" in self.daemon.log(),
             60)
        wait("the ledger free", lambda: not held_cards(), 30)
        delete_claims("mig")


if __name__ == "__main__":
    unittest.main(verbosity=2)
