#!/usr/bin/env python3
"""Churn on the real node, with faults (CTest label churn-e2e; docs/decisions.md D20).

The chart installed as the local cluster installs it (scripts/local-cluster.sh values: 4 T4s
simulated on the testbed's real kubelet, Kueue, the worker's gates), then a stream of random Pods
from a seeded generator: whole cards, 1-3 shared slots, 10-60 % slices, living 5-60 s, one in
five deleted early. Meanwhile the four faults the product must survive: an apiserver restart, a
kubelet restart, `kill -9` of the device manager and of the leading worker. After every step the
invariants are checked:

  - no card is over-committed or held in two modes (from the Pods' allocation records);
  - no Pod that Kueue and gate 3 let through was refused by the kubelet or by gate 5 (a Pod
    bound to the node that failed with UnexpectedAdmissionError or a kubelet predicate);
  - save one refusal no gate can foresee: for the seconds between the device manager's death (a
    `kill -9`, or a kubelet restart before it registers again) and its return, the kubelet holds
    every card of its resources unhealthy and refuses any Pod bound then ("no healthy devices
    present"), a Pod gate 3 placed a moment before included. Such a refusal, within
    PLUGIN_GONE_SECONDS of that fault, must be put back in the queue (docs/decisions.md D20): its
    replacement `<pod>-requeued-1` must appear within REQUEUE_SECONDS. It is reported, and not
    counted against CHURN_MAX_REFUSALS.

At the end every Pod is deleted and every card must come back (nothing leaked). The report
(refusal rate, each refusal with the faults before it) goes to stdout and to
$GPUSTACK_BUILD_DIR/churn-report.json.

Environment: CHURN_SECONDS (default 150), CHURN_SEED (default 1), CHURN_LIVE (most Pods alive at
once, default 10), CHURN_FAULTS (comma list of apiserver, kubelet, daemon, worker, repeated as
wanted; default one of each, spread evenly), CHURN_MAX_REFUSALS (default 0: the test fails
above it). `scripts/churn.sh` runs the longer benchmark mode on a local cluster of its own.
"""
import json
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import testbed  # noqa: E402
from testbed import DIR, KUBECONFIG, KUBECTL  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
SECONDS = float(os.environ.get("CHURN_SECONDS", "150"))
SEED = int(os.environ.get("CHURN_SEED", "1"))
LIVE = int(os.environ.get("CHURN_LIVE", "10"))
FAULTS = [f for f in os.environ.get("CHURN_FAULTS", "apiserver,kubelet,daemon,worker").split(",")
          if f]
MAX_REFUSALS = int(os.environ.get("CHURN_MAX_REFUSALS", "0"))
INSTALL = os.environ.get("CHURN_INSTALL", "1") == "1"  # 0: the chart is installed already

NS = "churn"
NODE = "testbed-node"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ALLOCATED = "device.gpustack.ai/accelerator.allocated"
CARD_CREDITS = 1_600_000
# What the kubelet or gate 5 says when it turns a bound Pod away.
REFUSAL_REASONS = ("UnexpectedAdmissionError", "NodeAffinity", "OutOfnvidia.com/gpu",
                   "OutOfnvidia.com/gpu.shared", "OutOfnvidia.com/gpu.sliced", "NodeSelector")
# The kubelet's words for a resource whose device plugin is gone (no endpoint, or not yet back).
PLUGIN_GONE = ("no healthy devices present", "cannot allocate unhealthy devices")
PLUGIN_GONE_FAULTS = ("device manager killed", "kubelet restarted")
PLUGIN_GONE_SECONDS = 30
REQUEUE_SECONDS = 90  # the requeuer's first delay is 5 s; a worker killed meanwhile must recover
REQUEUE_OF_UID = "gpustack.ai/requeue-of-uid"
START = time.time()


def say(line):
    print(f"[{time.time() - START:7.1f}s] {line}", flush=True)


def run(*args, timeout=120, **kw):
    return testbed.run(*args, timeout=timeout, **kw)


def kubectl(*args, **kw):
    return run(KUBECTL, "--kubeconfig", KUBECONFIG, "--request-timeout=20s", *args, **kw)


def get(*args):
    """The object or list as JSON; None while the apiserver does not answer (a fault)."""
    done = kubectl("get", *args, "-o", "json", check=False)
    if done.returncode != 0:
        return None
    return json.loads(done.stdout)


def wait(what, predicate, seconds=180):
    return testbed.wait(what, predicate, seconds)


def t4_entrance():
    for it in get("instancetypes")["items"]:
        if "t4" in (it.get("spec", {}).get("acceleratorGroup") or "").lower():
            return it.get("status", {}).get("entrance")
    return None


SHAPES = (["whole"] * 2) + (["shared"] * 3) + (["sliced"] * 3)


def limits_of(rng, shape):
    if shape == "whole":
        return {"nvidia.com/gpu": "1"}
    if shape == "shared":
        return {"nvidia.com/gpu.shared": str(rng.randint(1, 3))}
    return {"nvidia.com/gpu.sliced": "1",
            "nvidia.com/gpu.sliced.memory-percentage": str(rng.randrange(10, 61, 5))}


def pod_object(name, queue, limits, lifetime):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "docker.io/library/busybox:local",
                                     "imagePullPolicy": "Never",
                                     "command": ["sleep", str(lifetime)],
                                     "resources": {"limits": limits, "requests": limits}}]}}


def fault(kind):
    """Injects one fault; returns what it did, for the report."""
    if kind == "apiserver":
        run(os.path.join(REPO, "scripts/testbed/testbed.sh"), "restart", "--dir", DIR,
            "kube-apiserver", timeout=300)
        return "apiserver restarted"
    if kind == "kubelet":
        run(os.path.join(REPO, "scripts/testbed/kubelet.sh"), "restart", "--dir", DIR,
            timeout=300)
        return "kubelet restarted"
    if kind == "daemon":
        done = run("pkill", "-9", "-f", "gpustack-operator.*device-manager serve", check=False)
        return f"device manager killed (pkill {done.returncode})"
    if kind == "worker":
        # The chart's workers only ("worker --namespace=..."): a worker another test runs on this
        # machine beside its own control plane must not die of this one's fault.
        done = run("pkill", "-9", "-f", "gpustack-operator worker --namespace=", check=False)
        return f"worker killed (pkill {done.returncode})"
    raise AssertionError(f"unknown fault {kind}")


def charges(pod):
    """[(card, mode, credits)] the Pod's allocation record holds."""
    text = pod["metadata"].get("annotations", {}).get(ALLOCATED)
    if not text:
        return []
    out = []
    for allocation in json.loads(text).values():
        for a in allocation.get("accelerators", []):
            out.append((a["id"], a["mode"], a["allocated"]))
    return out


def check_cards(pods):
    """The over-commitments the live Pods' records show, one line each (none: [])."""
    per_card = {}
    for p in pods:
        if p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for card, mode, credits in charges(p):
            entry = per_card.setdefault(card, {"modes": set(), "credits": 0, "pods": []})
            entry["modes"].add(mode)
            entry["credits"] += credits
            entry["pods"].append(p["metadata"]["name"])
    problems = []
    for card, e in per_card.items():
        if len(e["modes"]) > 1:
            problems.append(f"{card} held in modes {sorted(e['modes'])} by {e['pods']}")
        if e["credits"] > CARD_CREDITS:
            problems.append(f"{card} over-committed: {e['credits']} credits by {e['pods']}")
    return problems


def refusal_of(pod):
    """(reason, message) when the kubelet or gate 5 turned this bound Pod away, else None."""
    status = pod.get("status", {})
    if status.get("phase") != "Failed" or not pod["spec"].get("nodeName"):
        return None
    reason = status.get("reason", "")
    if reason in REFUSAL_REASONS or reason.startswith("OutOf"):
        return reason, status.get("message", "")
    return None


def plugin_gone(refusal, faults_before):
    """True when `refusal` is the kubelet's "plugin gone" word shortly after a fault that takes
    the device manager away: a refusal to be re-queued, not a disagreement of the gates."""
    _, message = refusal
    return any(w in message for w in PLUGIN_GONE) and any(
        f.startswith(PLUGIN_GONE_FAULTS) for f in faults_before)


def evidence(names, tag, system_ns="gpustack-system"):
    """The lines the device manager and the workers logged about a refused Pod or its cards
    (their current and previous containers): printed with a failure, so that a CI log alone
    explains it. Every log goes whole to $GPUSTACK_BUILD_DIR/churn-logs/<tag>/."""
    folder = os.path.join(BUILD, "churn-logs", tag)
    os.makedirs(folder, exist_ok=True)
    lines = []
    pods = get("pods", "-n", system_ns) or {"items": []}
    for p in pods["items"]:
        pod = p["metadata"]["name"]
        if "device-manager" not in pod and "-worker-" not in pod:
            continue
        for previous in (True, False):
            done = kubectl("logs", "-n", system_ns, pod, "--all-containers",
                           f"--previous={str(previous).lower()}", check=False)
            if done.returncode != 0:
                continue
            with open(os.path.join(folder, f"{pod}{'.previous' if previous else ''}.log"),
                      "w") as f:
                f.write(done.stdout)
            lines += [f"{pod}{' (previous)' if previous else ''}: {line}"
                      for line in done.stdout.splitlines() if any(n in line for n in names)]
    return lines


def devices_allocated():
    devices = get("devices", NODE)
    if devices is None:
        return None
    return {a["id"]: a.get("allocated", 0)
            for g in devices.get("status", {}).get("groups", [])
            for a in g.get("accelerators", [])}


def main():
    rng = random.Random(SEED)
    if INSTALL:
        say("installing the chart (the local cluster's values)")
        testbed.install_local_chart(REPO, BUILD, ["gpustack-operator", "gpustack-plugin-example"])
    try:
        wait("the node's Devices with 4 T4s",
             lambda: len([a for g in get("devices", NODE)["spec"]["groups"]
                          if g["manufacturer"] == "nvidia" for a in g["accelerators"]]) == 4)
    except AssertionError:
        # Why the node published nothing: the system Pods as they are, and what they logged.
        print(kubectl("get", "pods", "-n", "gpustack-system", "-o", "wide", check=False).stdout)
        for line in evidence(["warn", "error"], "no-devices")[-60:]:
            print(line)
        raise
    queue = wait("the T4 pool's entrance", t4_entrance)
    kubectl("create", "namespace", NS, check=False)
    wait(f"the entrance {queue} in {NS}",
         lambda: queue in kubectl("get", "localqueues", "-n", NS, "-o", "name").stdout)

    fault_at = [SECONDS * (i + 1) / (len(FAULTS) + 1) for i in range(len(FAULTS))]
    faults_done = []  # (t, what)
    planned = {}  # name -> {"shape", "limits", "delete_at"}
    refused = {}  # name -> (t, reason, message, shape, faults in the 60 s before)
    awaiting_requeue = {}  # refused Pod's uid -> (name, deadline): left to the worker's requeuer
    requeued = {}  # refused Pod's name -> its replacement's name
    evidence_of = {}  # refused Pod's name -> log lines about it, taken when it was refused
    bound = set()
    violations = []
    checks = 0
    seq = 0
    say(f"churn for {SECONDS:.0f} s, seed {SEED}, at most {LIVE} Pods alive, faults {FAULTS}")
    began = time.time()

    def step(now):
        """One look at the Pods: the invariants, the refusals, the requeues; the Pods' phases."""
        nonlocal checks
        pods = get("pods", "-n", NS)
        if pods is None:
            return None
        items = pods["items"]
        checks += 1
        for problem in check_cards(items):
            violations.append((now, problem))
            say(f"VIOLATION {problem}")
        for p in items:
            uid = p["metadata"].get("annotations", {}).get(REQUEUE_OF_UID)
            if uid in awaiting_requeue:
                original, _ = awaiting_requeue.pop(uid)
                requeued[original] = p["metadata"]["name"]
                say(f"requeued {original} as {p['metadata']['name']}")
        for uid, (original, deadline) in list(awaiting_requeue.items()):
            if now > deadline:
                awaiting_requeue.pop(uid)
                violations.append((now, f"{original} refused and not requeued"))
                say(f"VIOLATION {original} refused {REQUEUE_SECONDS} s ago and not requeued")
                kubectl("delete", "pod", "-n", NS, original, "--wait=false", check=False)
        alive = 0
        for p in items:
            name = p["metadata"]["name"]
            if p["spec"].get("nodeName"):
                bound.add(name)
            phase = p.get("status", {}).get("phase")
            if phase not in ("Succeeded", "Failed"):
                alive += 1
            r = refusal_of(p)
            if r and name not in refused:
                recent = [w for t, w in faults_done if now - t < 60]
                refused[name] = (now - began, r[0], r[1], planned.get(name, {}).get("shape"),
                                 recent)
                gone = plugin_gone(r, [w for t, w in faults_done if now - t < PLUGIN_GONE_SECONDS])
                if gone:
                    awaiting_requeue[p["metadata"]["uid"]] = (name, now + REQUEUE_SECONDS)
                if not gone:  # the logs now, before a later fault restarts what wrote them
                    cards = re.findall(r"GPU-[0-9a-f-]+", r[1])
                    evidence_of[name] = evidence([name] + cards, tag=name)
                say(f"REFUSED {name} ({planned.get(name, {}).get('limits')}): {r[0]}: {r[1]}"
                    + (f" [after: {', '.join(recent)}]" if recent else " [steady state]")
                    + (" (the device manager was gone: waiting for its requeue)" if gone else ""))
            if r and any(n == name for n, _ in awaiting_requeue.values()):
                continue  # the requeuer deletes it once its replacement exists
            if phase in ("Succeeded", "Failed") or (
                    name in planned and planned[name]["delete_at"] and
                    now >= planned[name]["delete_at"]):
                kubectl("delete", "pod", "-n", NS, name, "--wait=false", check=False)
                planned.pop(name, None)
        return alive

    while time.time() - began < SECONDS:
        now = time.time()
        if fault_at and now - began >= fault_at[0]:
            fault_at.pop(0)
            what = fault(FAULTS[len(faults_done)])
            faults_done.append((now, what))
            say(what)
        alive = step(now)
        if alive is None:
            time.sleep(1)
            continue
        if alive < LIVE:
            shape = rng.choice(SHAPES)
            limits = limits_of(rng, shape)
            lifetime = rng.randint(5, 60)
            early = rng.random() < 0.2
            name = f"c{seq:04d}-{shape}"
            seq += 1
            planned[name] = {"shape": shape, "limits": limits,
                             "delete_at": now + rng.uniform(2, lifetime) if early else None}
            kubectl("apply", "-f", "-", stdin=json.dumps(pod_object(name, queue, limits, lifetime)),
                    check=False)
        time.sleep(0.5)

    while awaiting_requeue:
        say(f"waiting for the requeue of {sorted(n for n, _ in awaiting_requeue.values())}")
        step(time.time())
        time.sleep(1)
    say("deleting every Pod; every card must come back")
    kubectl("delete", "pods", "-n", NS, "--all", "--wait=true", timeout=300, check=False)
    leaked = None
    try:
        wait("every card free", lambda: (lambda a: a is not None and not any(a.values()))(
            devices_allocated()), seconds=120)
    except AssertionError:
        leaked = devices_allocated()

    steady = [n for n, r in refused.items() if not r[4]]
    counted = [n for n in refused if n not in requeued]
    report = {
        "seconds": SECONDS, "seed": SEED, "faults": [w for _, w in faults_done],
        "pods_created": seq, "pods_bound": len(bound), "pods_refused": len(refused),
        "refusal_rate": (len(refused) / len(bound)) if bound else 0.0,
        "refused_in_steady_state": len(steady), "checks": checks,
        "refused_while_the_device_manager_was_gone_and_requeued": requeued,
        "violations": [v for _, v in violations], "leaked": leaked,
        "refusals": [{"pod": n, "t": round(r[0], 1), "reason": r[1], "message": r[2],
                      "shape": r[3], "after": r[4]} for n, r in sorted(refused.items())],
    }
    with open(os.path.join(BUILD, "churn-report.json"), "w") as f:
        json.dump(report, f, indent=2)
    say(f"{seq} Pods created, {len(bound)} bound to the node, {len(refused)} refused there "
        f"({report['refusal_rate'] * 100:.1f} %, {len(steady)} in steady state, "
        f"{len(requeued)} while the device manager was gone, requeued); "
        f"{len(violations)} violations (an over-commitment, a refusal not requeued) in {checks} "
        f"checks; leaked: {leaked or 'nothing'}")
    failures = []
    if violations:
        failures.append(f"{len(violations)} violations: {[v for _, v in violations]}")
    if leaked:
        failures.append(f"cards still allocated after every Pod is gone: {leaked}")
    if len(counted) > MAX_REFUSALS:
        failures.append(f"{len(counted)} admitted Pods refused at the node (at most "
                        f"{MAX_REFUSALS} allowed): {counted}")
        for name in counted:
            for line in evidence_of.get(name, [])[-80:]:
                print(line, file=sys.stderr)
    if failures:
        print("FAILED: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
