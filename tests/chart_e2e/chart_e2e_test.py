#!/usr/bin/env python3
"""The chart on the test control plane with a real node (CTest label chart-e2e).

`helm install` of charts/gpustack-operator with the images built here imported into the node's
containerd and the values of scripts/local-cluster.sh: the DaemonSet and the worker become
Ready, the third-party example plugin's image is copied in and its cards appear in the node's
Devices; a node label turns a plugin off; `helm upgrade` keeps a running Pod's card; the
ServiceAccounts may do what tests/chart_e2e/expected-permissions.txt says and no more; bad
values are refused by the schema; `helm uninstall` with and without cleanupOnUninstall.
The tests run in order: each builds on the cluster the previous one left.
"""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from testbed import DIR, helm, kubectl, run, wait  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
CHART = os.path.join(REPO, "charts", "gpustack-operator")
NS = "gpustack-system"
RELEASE = "gpustack-operator"
NODE = "testbed-node"


def get(*args):
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def cards(node):
    """{manufacturer: number of cards} in the node's Devices spec."""
    counts = {}
    for g in get("devices", node).get("spec", {}).get("groups", []):
        counts[g["manufacturer"]] = counts.get(g["manufacturer"], 0) + len(g.get("accelerators", []))
    return counts


def plugin_states(node):
    return {p["name"]: p for p in get("devices", node).get("status", {}).get("plugins", [])}


def logs_tail():
    out = []
    for component in ("device-manager", "worker"):
        done = kubectl("-n", NS, "logs", "--tail", "30", "-l", f"app.kubernetes.io/component={component}",
                       "--all-containers", check=False)
        out.append(f"--- {component} ---\n{done.stdout}{done.stderr}")
    return "\n".join(out)


def install(*extra):
    started = time.time()
    done = helm("install", RELEASE, CHART, "-n", NS, "--create-namespace", "-f", VALUES,
                "--wait", "--timeout", "4m", *extra, check=False)
    if done.returncode != 0:
        raise AssertionError(f"helm install failed:\n{done.stderr}\n{logs_tail()}")
    # helm's --wait can pass before the DaemonSet controller has counted the node: wait for it.
    def ready():
        ds = get("daemonset", "-n", NS, f"{RELEASE}-device-manager")["status"]
        deploy = get("deployment", "-n", NS, f"{RELEASE}-worker")["status"]
        return (ds.get("desiredNumberScheduled", 0) > 0 and ds.get("numberReady") == ds["desiredNumberScheduled"]
                and deploy.get("readyReplicas", 0) >= 1)
    try:
        wait("the device manager and the worker Ready", ready, 180)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{logs_tail()}")
    return time.time() - started


def whole_card_pod(name):
    # No queue label: straight to the scheduler and the node's device plugin (gates 4 and 5).
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"nodeName": NODE, "restartPolicy": "Never",
                                "terminationGracePeriodSeconds": 1,
                                "containers": [{"name": "main", "image": "docker.io/library/busybox:local",
                                                "imagePullPolicy": "Never", "command": ["sleep", "3600"],
                                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})


VALUES = os.path.join(DIR, "chart-values.yaml")


class ChartE2e(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        helm("uninstall", RELEASE, "-n", NS, "--wait", check=False)  # a failed earlier run's
        run(os.path.join(REPO, "scripts", "testbed", "kubelet.sh"), "import", "--dir", DIR,
            os.path.join(BUILD, "images", "gpustack-operator.tar"),
            os.path.join(BUILD, "images", "gpustack-plugin-example.tar"))
        with open(VALUES, "w") as f:
            f.write(run(os.path.join(REPO, "scripts", "local-cluster.sh"), "values", "--dir", DIR).stdout)

    def test_1_install_runs_the_daemon_and_the_worker_and_copies_the_plugin_image_in(self):
        seconds = install()
        print(f"\nhelm install --wait: {seconds:.1f} s", file=sys.stderr)
        ds = get("daemonset", "-n", NS, f"{RELEASE}-device-manager")["status"]
        self.assertEqual(ds["desiredNumberScheduled"], 1, "one real node; kwok nodes excluded")
        self.assertEqual(ds["numberReady"], 1)
        deploy = get("deployment", "-n", NS, f"{RELEASE}-worker")["status"]
        self.assertEqual(deploy.get("readyReplicas"), 1)
        # The example plugin came from its own image through the init container.
        wait("the node's Devices with 4 T4 and the example's 2 cards",
             lambda: cards(NODE) == {"nvidia": 4, "example": 2})
        states = plugin_states(NODE)
        self.assertEqual(states["example"]["state"], "running")
        self.assertEqual(states["nvidia"]["state"], "running")
        # Its files in the daemon's plugin directory, owned by root, as the loader demands.
        pod = get("pods", "-n", NS, "-l", "app.kubernetes.io/component=device-manager")["items"][0]
        listing = kubectl("-n", NS, "exec", pod["metadata"]["name"], "-c", "device-manager", "--",
                          "/opt/gpustack/bin/gpustack-operator", "device-manager", "detect",
                          "--plugin-dir", "/opt/gpustack/plugins.d", "-o", "json", check=False)
        self.assertIn("example", listing.stdout + listing.stderr)
        # The worker identified it too: the example's counting keys are on the node.
        wait("the example plugin's counting keys on the node",
             lambda: "example.com/accel.sliced.units" in get("node", NODE)["status"]["capacity"])
        wait("the pools", lambda: any("t4" in it["metadata"]["name"]
                                      for it in get("instancetypes")["items"]))

    def test_2_each_service_account_may_do_what_the_expectation_says(self):
        with open(os.path.join(REPO, "tests", "chart_e2e", "expected-permissions.txt")) as f:
            expected = f.read()
        actual = []
        for account in (f"{RELEASE}-worker", f"{RELEASE}-device-manager"):
            listing = kubectl("auth", "can-i", "--list", "-n", NS,
                              f"--as=system:serviceaccount:{NS}:{account}").stdout
            # Leave out what every authenticated account may do (discovery, health, self-reviews).
            rows = [" ".join(line.split()) for line in listing.splitlines()[1:]]
            rows = sorted(r for r in rows if r and not r.startswith(("[/", "selfsubject")))
            actual.append(f"# {account} (kubectl auth can-i --list -n {NS})")
            actual.extend(rows)
        actual = "\n".join(actual) + "\n"
        if actual != expected:
            with open(os.path.join(DIR, "actual-permissions.txt"), "w") as f:
                f.write(actual)
        self.assertEqual(actual, expected, f"see {DIR}/actual-permissions.txt")
        # What RBAC cannot say, the node restriction policy does: a daemon changes its own node only.
        daemon = f"--as=system:serviceaccount:{NS}:{RELEASE}-device-manager"
        on_node = "--as-user-extra=authentication.kubernetes.io/node-name=" + NODE
        other = get("nodes", "-l", "type=kwok")["items"][0]["metadata"]["name"]
        done = kubectl("label", "node", other, "gpustack.test/by-daemon=x", daemon, on_node, check=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn(f"a device manager on node {NODE} may not change nodes of node {other}", done.stderr)
        done = kubectl("label", "node", NODE, "gpustack.test/by-daemon=x", daemon, check=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("the device manager's token names no node", done.stderr)
        kubectl("label", "node", NODE, "gpustack.test/by-daemon=x", daemon, on_node)
        kubectl("label", "node", NODE, "gpustack.test/by-daemon-")
        self.assertNotIn("*.*", actual, "no wildcard resources")
        self.assertNotIn("[*]", actual, "no wildcard verbs")
        for account in (f"{RELEASE}-worker", f"{RELEASE}-device-manager"):
            can = kubectl("auth", "can-i", "delete", "nodes", f"--as=system:serviceaccount:{NS}:{account}",
                          check=False).stdout.strip()
            self.assertEqual(can, "no")
        # The role a worker-gateway's identity gets on a member: it reads the six kinds through
        # the v1 API (the worker's SubjectAccessReview allows it) and nothing beneath them.
        reader = "system:serviceaccount:default:gateway-reader-probe"
        kubectl("create", "clusterrolebinding", "gateway-reader-probe",
                f"--clusterrole={RELEASE}:gateway-reader", f"--user={reader}")
        try:
            listed = wait("the v1 InstanceTypes as the gateway reader", lambda: kubectl(
                "get", "instancetypes.v1.worker.gpustack.ai", "-o", "name", f"--as={reader}",
                check=False).stdout, 120)
            self.assertIn("instancetype.worker.gpustack.ai/", listed)
            for resource in ("instancesshpublickeys.v1.worker.gpustack.ai",
                             "instancepersistentvolumetypes.v1.worker.gpustack.ai"):
                kubectl("get", resource, "-A", f"--as={reader}")
            for verb, resource in (("get", "secrets"), ("create", "instances.worker.gpustack.ai"),
                                   ("list", "devices.worker.gpustack.ai")):
                can = kubectl("auth", "can-i", verb, resource, "-A", f"--as={reader}",
                              check=False).stdout.strip()
                self.assertEqual(can, "no", f"{verb} {resource}")
        finally:
            kubectl("delete", "clusterrolebinding", "gateway-reader-probe", "--ignore-not-found")

    def test_3_the_schema_refuses_bad_values_and_the_rendered_manifests_pass_the_apiserver(self):
        self.assertEqual(helm("lint", CHART, "-f", VALUES, check=False).returncode, 0,
                         helm("lint", CHART, "-f", VALUES, check=False).stdout)
        for setting, says in [("worker.replicas=two", "/worker/replicas"),
                              ("plugins.nvidia.enabled=maybe", "/plugins/nvidia/enabled"),
                              ("plugins.defaultEnable=sometimes", "/plugins/defaultEnable"),
                              ("global.manufacturers.nvidia.resourceName=gpu", "resourceName"),
                              ("wroker.replicas=1", "wroker")]:
            done = helm("template", "x", CHART, "--set", setting, check=False)
            self.assertNotEqual(done.returncode, 0, setting)
            self.assertIn(says, done.stderr, setting)
        # An enforcer comes from a node directory or from an image's directory, never both.
        for enforcer in ['{"path": "/lib"}', '{"hostPath": "lib"}',
                         '{"hostPath": "/lib", "image": {"repository": "r", "tag": "t"}, "path": "/x"}']:
            done = helm("template", "x", CHART, "--set-json",
                        f"plugins.config.nvidia.enforcer={enforcer}", check=False)
            self.assertNotEqual(done.returncode, 0, enforcer)
            self.assertIn("/plugins/config/nvidia/enforcer", done.stderr, enforcer)
        # The defaults mount no simulated hardware; selection and certificates reach the args.
        defaults = helm("template", RELEASE, CHART, "-n", NS).stdout
        self.assertNotIn("/opt/fake", defaults)
        self.assertNotIn("--enable=", defaults)
        chosen = helm("template", RELEASE, CHART, "-n", NS, "--set",
                      "plugins.nvidia.enabled=false,plugins.amd.enabled=false,"
                      "global.certmanager.enabled=true,global.manufacturers.nvidia.pciVendorID=0x10de").stdout
        self.assertIn("--enable=amd=off,nvidia=off", chosen)
        self.assertIn("kind: Certificate", chosen)
        self.assertIn("--webhook-certificates=cert-manager", chosen)
        self.assertIn("GPUSTACK_NVIDIA_PCI_VENDOR_ID", chosen)
        rendered = helm("template", RELEASE, CHART, "-n", NS, "-f", VALUES,
                        "--set", "cleanupOnUninstall=true,deviceManager.networkPolicy.enabled=true",
                        "--set-json", 'plugins.config.amd={"enforcer": {"image": {"repository": '
                        '"example.com/vrocm", "tag": "v1"}, "path": "/vrocm"}}').stdout
        self.assertIn("enforcer-amd", rendered)  # the copying init container and its volume
        done = kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", stdin=rendered,
                       check=False)
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_4_a_node_label_turns_a_plugin_off_and_the_daemon_says_so(self):
        kubectl("label", "node", NODE, "plugins.gpustack.ai/example=off")
        try:
            states = wait("the example plugin reported off", lambda: (
                plugin_states(NODE).get("example", {}).get("state") == "disabled" and plugin_states(NODE)))
            self.assertIn("node label plugins.gpustack.ai/example", states["example"]["message"])
            wait("the example's cards gone", lambda: cards(NODE) == {"nvidia": 4})
        finally:
            kubectl("label", "node", NODE, "plugins.gpustack.ai/example-")
        wait("the example plugin back", lambda: cards(NODE) == {"nvidia": 4, "example": 2})

    def test_5_an_upgrade_keeps_what_running_pods_hold(self):
        kubectl("apply", "-f", "-", stdin=whole_card_pod("holder"))
        wait("the holder running", lambda: get("pod", "holder")["status"].get("phase") == "Running")
        before = get("pod", "holder")["metadata"]["annotations"]["device.gpustack.ai/accelerator.allocated"]
        card = json.loads(before)["main"]["accelerators"][0]["id"]
        old_pod = get("pods", "-n", NS, "-l", "app.kubernetes.io/component=device-manager")["items"][0]
        helm("upgrade", RELEASE, CHART, "-n", NS, "--reuse-values",
             "--set", "deviceManager.podAnnotations.upgraded=yes", "--wait", "--timeout", "3m")
        wait("a new device manager", lambda: all(
            p["metadata"]["uid"] != old_pod["metadata"]["uid"]
            for p in get("pods", "-n", NS, "-l", "app.kubernetes.io/component=device-manager")["items"]))
        wait("the new daemon ready", lambda: get("daemonset", "-n", NS, f"{RELEASE}-device-manager")
             ["status"].get("numberReady") == 1)
        holder = get("pod", "holder")
        self.assertEqual(holder["status"]["phase"], "Running")
        self.assertEqual(holder["metadata"]["annotations"]["device.gpustack.ai/accelerator.allocated"], before)
        # The new daemon rebuilt the ledger: three more whole cards fit, a fourth does not, and
        # none of the three is the holder's.
        for i in range(3):
            kubectl("apply", "-f", "-", stdin=whole_card_pod(f"more-{i}"))
        for i in range(3):
            wait(f"more-{i} running", lambda i=i: get("pod", f"more-{i}")["status"].get("phase") == "Running")
            granted = json.loads(get("pod", f"more-{i}")["metadata"]["annotations"]
                                 ["device.gpustack.ai/accelerator.allocated"])
            self.assertNotEqual(granted["main"]["accelerators"][0]["id"], card)
        kubectl("apply", "-f", "-", stdin=whole_card_pod("one-too-many"))
        failed = wait("one-too-many refused at the node", lambda: (
            get("pod", "one-too-many")["status"].get("phase") == "Failed" and get("pod", "one-too-many")))
        self.assertEqual(failed["status"].get("reason"), "UnexpectedAdmissionError")
        kubectl("delete", "pod", "holder", "one-too-many", "more-0", "more-1", "more-2",
                "--grace-period=1", "--wait=true")

    def test_6_uninstall_leaves_or_removes_what_the_reference_says(self):
        helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "2m")
        # Without cleanupOnUninstall: the CRDs, the pools and the webhook configurations stay.
        self.assertTrue(get("crd", "instancetypes.worker.gpustack.ai"))
        # The storage version by name: the chart took the v1 APIService away with the worker,
        # and a kubectl that discovered v1 a moment ago would still ask for it.
        self.assertTrue(get("instancetypes.v1alpha1.worker.gpustack.ai")["items"])
        wait("the v1 APIService gone", lambda: "NotFound" in kubectl(
            "get", "apiservice", "v1.worker.gpustack.ai", check=False).stderr, 60)
        self.assertTrue(get("mutatingwebhookconfiguration", "gpustack-worker-mutation"))
        wait("the release's Pods gone", lambda: get(
            "pods", "-n", NS, "-l", "app.kubernetes.io/part-of=gpustack-operator")["items"] == [], 60)
        # With it: a post-delete Job removes them.
        install("--set", "cleanupOnUninstall=true")
        wait("the webhook configurations back", lambda: get("mutatingwebhookconfiguration",
                                                            "gpustack-worker-mutation"))
        done = helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "3m", check=False)
        self.assertEqual(done.returncode, 0, done.stderr + logs_tail())
        for kind, name in [("crd", "instancetypes.worker.gpustack.ai"), ("crd", "devices.worker.gpustack.ai"),
                           ("mutatingwebhookconfiguration", "gpustack-worker-mutation"),
                           ("validatingwebhookconfiguration", "gpustack-worker-validation"),
                           ("admissionchecks.kueue.x-k8s.io", "gpustack-node-devices"),
                           ("secret -n " + NS, "gpustack-settings")]:
            args = kind.split() + [name]
            wait(f"{kind} {name} gone", lambda args=args: "NotFound" in kubectl("get", *args, check=False).stderr, 60)
        self.assertEqual([q for q in get("clusterqueues")["items"]
                          if any(m.get("manager", "").startswith("gpustack-worker")
                                 for m in q["metadata"].get("managedFields", []))], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
