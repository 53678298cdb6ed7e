"""The worker.gpustack.ai/v1 and gpustack.ai/v1 APIs through the testbed's real aggregator
(label api-e2e): the worker runs as a process beside the control plane and registers its
APIServices through a Service and Endpoints of its own (--api-address). Real kubectl runs every
verb on every kind; the Quick Start's Instance is applied as the product description has it;
`kubectl --as` meets the SubjectAccessReview path; a watch outlives a worker restart; a Setting
patch flips a reconciler (and the time it takes is printed). The tests run in order: each builds
on what the previous one left."""
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from testbed import DIR, KUBECONFIG, kubectl, run, wait  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
BINARY = os.environ["GPUSTACK_BINARY"]
NS = "gpustack-system"
USER_NS = "api-e2e"
TYPE = "gpustack--nvidia-a10g-linux-amd64"  # what the worker derives from the A10G node below
LOG = os.path.join(BUILD, "api-e2e-worker.log")
QUICK_START = """apiVersion: worker.gpustack.ai/v1
kind: Instance
metadata:
  name: sliced-demo
  namespace: default
spec:
  type: gpustack--nvidia-a10g-linux-amd64      # an InstanceType name from step 2
  image: ubuntu:24.04
  command: ["sleep", "86400"]
  resources:
    accelerator: "1"
    acceleratorSlicedMemoryPercentage: 20      # 20% of its VRAM
    acceleratorSlicedCoresPercentage: 100      # and up to 100% of its compute
  volume:
    ephemeral:
      capacity: 1Gi
"""


def host_address():
    """An address of this machine the apiserver can be sent to (Endpoints refuse loopback)."""
    out = run("hostname", "-I").stdout.split()
    for address in out:
        if "." in address and not address.startswith("127."):
            return address
    raise AssertionError(f"no non-loopback IPv4 address on this machine ({out}): the aggregator "
                         "needs one to reach the worker")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Worker:
    def __init__(self):
        self.port = free_port()
        self.process = None

    def start(self, env_extra=None):
        env = {"KUBECONFIG": KUBECONFIG, "PATH": "/usr/bin:/bin",
               "GPUSTACK_NODE_MANAGEMENT_MANUAL": "true"}
        env.update(env_extra or {})
        log = open(LOG, "a")
        self.process = subprocess.Popen(
            [BINARY, "--log-level", "debug", "worker", "--identity", "api-e2e",
             "--secure-port", "0", "--webhook-port", str(self.port),
             "--webhook-url", f"https://127.0.0.1:{self.port}", "--api-address", host_address(),
             "--no-kube-leader-election", "--plugin-dir", os.path.join(BUILD, "lib", "gpustack", "plugins")],
            env=env, stdout=log, stderr=subprocess.STDOUT)

    def stop(self, sig=signal.SIGTERM):
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)
        return self.process.returncode if self.process else None


WORKER = Worker()


def apply(text, *args, **kw):
    return kubectl("apply", *args, "-f", "-", stdin=text, **kw)


def get_json(*args):
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def raw(path):
    return json.loads(kubectl("get", "--raw", path).stdout)


def api_available():
    for name in ("v1.worker.gpustack.ai", "v1.gpustack.ai"):
        status = get_json("apiservice", name)["status"]
        if not any(c["type"] == "Available" and c["status"] == "True"
                   for c in status.get("conditions", [])):
            return False
    return True


def clean_slate():
    """What an earlier run on this control plane left (the tests are meant to run again)."""
    kubectl("delete", "apiservice", "v1.worker.gpustack.ai", "v1.gpustack.ai", "--ignore-not-found")
    kubectl("delete", "namespace", USER_NS, "--ignore-not-found", "--timeout=120s")
    kubectl("delete", "instances.v1alpha1.worker.gpustack.ai", "sliced-demo", "-n", "default",
            "--ignore-not-found", check=False)
    kubectl("delete", "node", "api-e2e-plain", "--ignore-not-found")
    kubectl("delete", "storageclass", "api-e2e-local", "--ignore-not-found")
    # The settings seed again from the environment (node-management-manual=true).
    kubectl("delete", "secret", "gpustack-settings", "-n", NS, "--ignore-not-found")


def setUpModule():
    open(LOG, "w").close()
    kubectl("apply", "-f", os.path.join(REPO, "crds") + "/")  # a symlink: the slash follows it
    clean_slate()
    kubectl("create", "namespace", USER_NS)
    # A node with one A10G, as the device manager would publish it (the fixture of
    # tests/fixtures/nodes): the worker derives the Quick Start's pool from it.
    with open(os.path.join(REPO, "tests", "fixtures", "nodes", "expected", "nvidia-a10g.devices.json")) as f:
        spec = json.load(f)
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "api-e2e-a10g",
                         "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                                    "kubernetes.io/hostname": "api-e2e-a10g",
                                    "gpustack.ai/managed": "true",
                                    "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
                                    "feature.gpustack.ai/acceleratable": "true",
                                    "acceleratable.feature.gpustack.ai/nvidia": "true",
                                    "acceleratable.feature.gpustack.ai/nvidia-a10g": "true"},
                         "annotations": {"feature.gpustack.ai/cpu-name": "AMD EPYC 7R32"}}}
    apply(json.dumps(node))
    kubectl("patch", "node", "api-e2e-a10g", "--subresource=status", "--type=merge", "-p",
            json.dumps({"status": {"capacity": {"cpu": "8", "memory": "64Gi", "pods": "110",
                                                "nvidia.com/gpu": "1"},
                                   "allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110",
                                                   "nvidia.com/gpu": "1"}}}))
    apply(json.dumps({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
                      "metadata": {"name": "api-e2e-a10g"}, "spec": spec}))
    WORKER.start()
    wait("the APIServices to be Available", api_available, 120)


def tearDownModule():
    code = WORKER.stop()
    # An unavailable aggregated API would stall namespace deletion for later users of this
    # control plane: the registration goes with the worker.
    kubectl("delete", "apiservice", "v1.worker.gpustack.ai", "v1.gpustack.ai", "--ignore-not-found")
    if code not in (0, None):
        print(f"worker exited {code}; log in {LOG}", file=sys.stderr)


class ApiE2e(unittest.TestCase):
    def test_1_discovery_openapi_and_explain(self):
        wait("discovery of every kind", lambda: len([
            l for l in kubectl("api-resources", "--categories", "gpustack", "--no-headers").stdout.splitlines()
            if l.strip()]) == 9, 120)
        listing = kubectl("api-resources", "--categories", "gpustack").stdout
        for resource, short in [("instances", "inst"), ("devices", "devs"), ("instancetypes", "instype"),
                                ("instancetypeflavors", "instypeflavor"), ("settings", "set")]:
            self.assertRegex(listing, rf"{resource}\s+{short}\s", listing)
        for helper in ("instancesshpublickeys", "instanceimagepullsecrets", "instancepersistentvolumes",
                       "instancepersistentvolumetypes"):
            self.assertIn(helper, listing)
        resources = raw("/apis/worker.gpustack.ai/v1")["resources"]
        names = {r["name"]: r for r in resources}
        self.assertEqual(names["instances/metrics"]["verbs"], ["get"])
        self.assertEqual(names["instances"]["categories"], ["gpustack"])
        self.assertEqual(names["devices"]["verbs"], ["get", "list", "watch"])
        self.assertEqual(sorted(names["instancetypeflavors"]["verbs"]), ["get", "list", "watch"])
        self.assertEqual(sorted(raw("/apis/gpustack.ai/v1")["resources"][0]["verbs"]),
                         ["get", "list", "patch", "update", "watch"])
        # kubectl explain reads the OpenAPI v3 document the aggregator merged from ours.
        explained = wait("kubectl explain", lambda: kubectl(
            "explain", "instance.spec.resources", check=False).stdout, 120)
        self.assertIn("acceleratorSlicedMemoryPercentage", explained)
        self.assertIn("VERSION:    v1", explained)
        self.assertIn("spec", kubectl("explain", "settings").stdout)
        # The aggregator merges OpenAPI v2 on its own schedule (about a minute).
        wait("our OpenAPI v2 definitions merged", lambda: {"ai.gpustack.worker.v1.Instance",
             "ai.gpustack.v1.Setting"} <= set(raw("/openapi/v2")["definitions"]), 150)

    def test_2_the_quick_start_instance(self):
        # The pool the worker derives from the node is sliceable.
        wait("the derived A10G pool", lambda: get_json("instancetype", TYPE)["status"]["detail"]
             ["slicedDetail"]["logical"]["count"] > 0, 180)
        out = apply(QUICK_START).stdout
        self.assertIn("instance.worker.gpustack.ai/sliced-demo created", out)
        stored = get_json("instances.v1alpha1.worker.gpustack.ai", "sliced-demo", "-n", "default")
        self.assertEqual(stored["apiVersion"], "worker.gpustack.ai/v1alpha1")
        self.assertEqual(stored["spec"]["resources"]["acceleratorSlicedMemoryPercentage"], 20)
        served = get_json("instance", "sliced-demo", "-n", "default")
        self.assertEqual(served["apiVersion"], "worker.gpustack.ai/v1")
        self.assertEqual(served["metadata"]["uid"], stored["metadata"]["uid"])
        table = kubectl("get", "inst", "-n", "default").stdout
        self.assertRegex(table, r"NAME\s+TYPE\s+HOST-IP\s+SSH-PORT\s+PHASE\s+AGE")
        self.assertRegex(table, rf"sliced-demo\s+{TYPE}")
        # Applied again unchanged (client-side apply: a merge patch), and once more server-side.
        self.assertIn("unchanged", apply(QUICK_START).stdout)
        self.assertIn("serverside-applied", apply(QUICK_START, "--server-side", "--force-conflicts").stdout)
        fields = get_json("instance", "sliced-demo", "-n", "default", "--show-managed-fields")
        managers = {m["manager"]: m["apiVersion"] for m in fields["metadata"]["managedFields"]}
        self.assertEqual(managers["kubectl"], "worker.gpustack.ai/v1")
        # The webhook's rules hold on the v1 path, with the webhook's message.
        refused = apply(QUICK_START.replace("acceleratorSlicedMemoryPercentage: 20",
                                            "acceleratorSlicedMemoryPercentage: 101"), check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("acceleratorSlicedMemoryPercentage", refused.stderr)
        # The catalogue lists the pool the node offers.
        flavors = kubectl("get", "instancetypeflavors").stdout
        self.assertRegex(flavors, r"gpustack--nvidia-a10g\s+generic\s+nvidia-a10g\s+true\s+nvidia\s+NVIDIA A10G\s+24Gi\s+10240\s+true")

    def test_3_every_verb_on_instances_and_instancetypes(self):
        base = json.loads(json.dumps(get_json("instance", "sliced-demo", "-n", "default")))
        for i in range(5):
            obj = {"apiVersion": "worker.gpustack.ai/v1", "kind": "Instance",
                   "metadata": {"name": f"i{i}", "namespace": USER_NS, "labels": {"batch": "a" if i < 3 else "b"}},
                   "spec": base["spec"]}
            kubectl("create", "-f", "-", stdin=json.dumps(obj))
        # list with a label selector, a field selector, and in pages (kubectl follows continue).
        self.assertEqual(len(get_json("inst", "-n", USER_NS, "-l", "batch=a")["items"]), 3)
        self.assertEqual(len(get_json("inst", "-n", USER_NS, "--field-selector", "metadata.name=i4")["items"]), 1)
        self.assertEqual(len(get_json("inst", "-n", USER_NS, "--chunk-size=2")["items"]), 5)
        page = raw(f"/apis/worker.gpustack.ai/v1/namespaces/{USER_NS}/instances?limit=2")
        self.assertEqual(len(page["items"]), 2)
        self.assertTrue(page["metadata"].get("continue"))
        # watch: a label change arrives as MODIFIED.
        watcher = Lines([kubectl_path(), "--kubeconfig", KUBECONFIG, "get", "inst", "i0", "-n",
                         USER_NS, "-w", "--output-watch-events", "-o", "jsonpath={.type}{\"\\n\"}"])
        events = []
        wait("the watch to start", lambda: events.extend(watcher.take()) or events, 30)
        kubectl("label", "inst", "i0", "-n", USER_NS, "watched=yes")
        wait("the watch event", lambda: events.extend(watcher.take()) or any(
            e.startswith("MODIFIED") for e in events), 30)
        watcher.stop()
        # patch: merge, JSON, apply; update (replace) with a stale resourceVersion is a conflict.
        kubectl("patch", "inst", "i1", "-n", USER_NS, "--type", "merge", "-p", '{"metadata":{"labels":{"m":"1"}}}')
        kubectl("patch", "inst", "i1", "-n", USER_NS, "--type", "json",
                "-p", '[{"op":"add","path":"/metadata/annotations","value":{"j":"1"}}]')
        one = get_json("inst", "i1", "-n", USER_NS)
        self.assertEqual(one["metadata"]["labels"]["m"], "1")
        self.assertEqual(one["metadata"]["annotations"]["j"], "1")
        smp = kubectl("patch", "inst", "i1", "-n", USER_NS, "-p", '{"metadata":{"labels":{"s":"1"}}}', check=False)
        self.assertNotEqual(smp.returncode, 0)
        self.assertIn("strategic merge patch is not supported", smp.stderr)
        stale = dict(one)
        stale["metadata"] = dict(one["metadata"], labels=dict(one["metadata"]["labels"], r="1"))
        kubectl("replace", "-f", "-", stdin=json.dumps(stale))
        conflict = kubectl("replace", "-f", "-", stdin=json.dumps(stale), check=False)
        self.assertNotEqual(conflict.returncode, 0)
        self.assertIn("the object has been modified", conflict.stderr)
        # dryRun stores nothing; fieldValidation=Strict refuses an unknown field.
        dry = dict(base, metadata={"name": "dry", "namespace": USER_NS})
        self.assertIn("(server dry run)", kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(dry)).stdout)
        self.assertNotEqual(kubectl("get", "inst", "dry", "-n", USER_NS, check=False).returncode, 0)
        unknown = dict(dry, spec=dict(base["spec"], colour="blue"))
        strict = kubectl("create", "--validate=strict", "-f", "-", stdin=json.dumps(unknown), check=False)
        self.assertNotEqual(strict.returncode, 0)
        self.assertIn('unknown field "spec.colour"', strict.stderr)
        # metrics: an Instance whose Pod never started has its totals and zero use; one that does
        # not exist is NotFound (the figures themselves: tests/instance_e2e/metrics_e2e_test.py).
        metrics = json.loads(kubectl("get", "--raw", f"/apis/worker.gpustack.ai/v1/namespaces/{USER_NS}/instances/i1/metrics").stdout)
        self.assertEqual(metrics["kind"], "InstanceMetrics")
        self.assertEqual(metrics["metadata"]["name"], "i1")
        self.assertEqual(metrics["sample"]["cpuUsedMilliCores"], 0)
        self.assertIn("cpuTotalMilliCores", metrics["sample"])
        missing = kubectl("get", "--raw", f"/apis/worker.gpustack.ai/v1/namespaces/{USER_NS}/instances/nobody/metrics", check=False)
        self.assertIn("NotFound", missing.stderr)
        # delete one, then the rest of a label's collection.
        kubectl("delete", "inst", "i4", "-n", USER_NS, "--timeout=60s")
        kubectl("delete", "inst", "-n", USER_NS, "-l", "batch=a", "--timeout=60s")
        left = [i["metadata"]["name"] for i in get_json("inst", "-n", USER_NS)["items"]]
        self.assertEqual(left, ["i3"])
        # InstanceTypes through v1: an administrator's own, its status subresource, deleted.
        apply(json.dumps({"apiVersion": "worker.gpustack.ai/v1", "kind": "InstanceType",
                          "metadata": {"name": "admin-cpu"},
                          "spec": {"acceleratable": False, "os": "linux", "arch": "amd64",
                                   "unitResources": {"cpu": "1", "ram": "2Gi"}, "localStorage": "100Gi"}}))
        self.assertEqual(get_json("instype", "admin-cpu")["apiVersion"], "worker.gpustack.ai/v1")
        kubectl("patch", "instype", "admin-cpu", "--type", "merge", "-p", '{"spec":{"displayName":"CPU"}}')
        status = kubectl("get", "--raw", "/apis/worker.gpustack.ai/v1/instancetypes/admin-cpu/status").stdout
        self.assertEqual(json.loads(status)["spec"]["displayName"], "CPU")
        kubectl("delete", "instype", "admin-cpu", "--timeout=60s")
        # Devices are read-only here.
        self.assertEqual(get_json("devs", "api-e2e-a10g")["apiVersion"], "worker.gpustack.ai/v1")
        refused = kubectl("delete", "devs", "api-e2e-a10g", check=False)
        self.assertIn("does not allow delete", refused.stderr)

    def test_4_settings(self):
        settings = get_json("settings", "-n", NS)["items"]
        by = {s["metadata"]["name"]: s for s in settings}
        self.assertIn("node-management-manual", by)
        # The default is the sidecar image scripts/images.sh builds, at the project's version.
        with open(os.path.join(REPO, "CMakeLists.txt")) as f:
            version = re.search(r"project\(gpustack_operator VERSION ([0-9.]+)", f.read()).group(1)
        self.assertEqual(by["instance-ssh-server-image"]["status"]["value"],
                         f"gpustack/gpustack-ssh-server:v{version}")
        self.assertNotIn("value", by["node-management-manual"]["spec"])
        bad = kubectl("-n", NS, "patch", "setting", "instance-privileged-allowed", "--type", "merge",
                      "-p", '{"spec":{"value":"maybe"}}', check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("instance-privileged-allowed is a boolean setting", bad.stderr)
        wrong = kubectl("-n", NS, "patch", "setting", "instance-ssh-server-image", "--type", "merge",
                        "-p", '{"spec":{"value":true}}', check=False)
        self.assertIn("instance-ssh-server-image is a string setting", wrong.stderr)
        self.assertIn("does not allow delete", kubectl("-n", NS, "delete", "setting", "image-pull-policy", check=False).stderr)
        # Server-side apply and update (replace) write the value too.
        apply(json.dumps({"apiVersion": "gpustack.ai/v1", "kind": "Setting",
                          "metadata": {"name": "image-pull-policy", "namespace": NS},
                          "spec": {"value": "Always"}}), "--server-side")
        self.assertEqual(get_json("setting", "image-pull-policy", "-n", NS)["status"]["value"], "Always")
        current = get_json("setting", "image-pull-policy", "-n", NS)
        current["spec"] = {"value": "IfNotPresent"}
        kubectl("replace", "-f", "-", stdin=json.dumps(current))
        secret = get_json("secret", "gpustack-settings", "-n", NS)
        self.assertEqual(run("base64", "-d", stdin=secret["data"]["image-pull-policy"]).stdout, "IfNotPresent")

    def test_5_a_setting_patch_flips_a_reconciler(self):
        # node-management-manual=true was seeded: a new node is not taken in.
        apply(json.dumps({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": "api-e2e-plain",
                                       "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}}))
        time.sleep(3)
        labels = get_json("node", "api-e2e-plain")["metadata"].get("labels", {})
        self.assertNotIn("gpustack.ai/managed", labels)
        started = time.time()
        kubectl("-n", NS, "patch", "setting", "node-management-manual", "--type", "merge",
                "-p", '{"spec":{"value":"false"}}')
        wait("the node to be managed", lambda: get_json("node", "api-e2e-plain")["metadata"]["labels"]
             .get("gpustack.ai/managed") == "true", 30)
        print(f"\nFIGURE setting-to-reconciler: {time.time() - started:.2f} s", file=sys.stderr)

    def test_6_rbac_through_the_subject_access_review(self):
        denied = kubectl("get", "inst", "-n", USER_NS, "--as", "bob", check=False)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn('User "bob" cannot list resource "instances" in API group "worker.gpustack.ai" '
                      f'in the namespace "{USER_NS}"', denied.stderr)
        kubectl("create", "role", "inst-reader", "-n", USER_NS, "--verb=get,list,watch",
                "--resource=instances.worker.gpustack.ai")
        kubectl("create", "rolebinding", "bob-reads", "-n", USER_NS, "--role=inst-reader", "--user=bob")
        # Refusals are cached for ten seconds, as k8s.io/apiserver does.
        wait("bob's RBAC to take effect", lambda: kubectl(
            "get", "inst", "-n", USER_NS, "--as", "bob", check=False).returncode == 0, 30)
        self.assertIn('cannot delete resource "instances"', kubectl(
            "delete", "inst", "i3", "-n", USER_NS, "--as", "bob", check=False).stderr)
        # Straight to the worker, without the front proxy's certificate: 401; nobody is anonymous.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        import http.client
        connection = http.client.HTTPSConnection("127.0.0.1", WORKER.port, context=context, timeout=10)
        connection.request("GET", "/apis/worker.gpustack.ai/v1/instances",
                           headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"})
        answer = connection.getresponse()
        self.assertEqual(answer.status, 401)
        self.assertIn("no front-proxy client certificate", json.loads(answer.read())["message"])

    def test_7_helper_kinds(self):
        apply(f"""apiVersion: worker.gpustack.ai/v1
kind: InstanceSSHPublicKey
metadata: {{name: ada, namespace: {USER_NS}}}
spec: {{publicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxJbq ada@laptop"}}
---
apiVersion: worker.gpustack.ai/v1
kind: InstanceImagePullSecret
metadata: {{name: registry, namespace: {USER_NS}}}
spec: {{registry: registry.example.com, username: ada, password: s3cret}}
---
apiVersion: worker.gpustack.ai/v1
kind: InstancePersistentVolumeType
metadata: {{name: api-e2e-local}}
spec: {{provisioner: example.com/none, reclaimPolicy: Delete}}
---
apiVersion: worker.gpustack.ai/v1
kind: InstancePersistentVolume
metadata: {{name: data, namespace: {USER_NS}}}
spec: {{type: api-e2e-local, capacity: 10Gi}}
""")
        secret = get_json("secret", "ada", "-n", USER_NS)
        self.assertEqual(secret["metadata"]["labels"]["gpustack.ai/helper"], "instance-ssh-public-key")
        self.assertEqual(get_json("pvc", "data", "-n", USER_NS)["spec"]["storageClassName"], "api-e2e-local")
        self.assertEqual(get_json("storageclass", "api-e2e-local")["provisioner"], "example.com/none")
        pull = kubectl("get", "instanceimagepullsecret", "registry", "-n", USER_NS, "-o", "json").stdout
        self.assertNotIn("s3cret", pull)
        self.assertRegex(kubectl("get", "instanceimagepullsecrets", "-n", USER_NS).stdout,
                         r"registry\s+registry.example.com\s+ada")
        bad = kubectl("apply", "-f", "-", check=False, stdin=f"""apiVersion: worker.gpustack.ai/v1
kind: InstanceSSHPublicKey
metadata: {{name: bad, namespace: {USER_NS}}}
spec: {{publicKey: "hello"}}
""")
        self.assertIn("spec.publicKey", bad.stderr)
        kubectl("patch", "instancesshpublickey", "ada", "-n", USER_NS, "--type", "merge",
                "-p", '{"spec":{"publicKey":"ssh-rsa AAAAB3 ada@desk"}}')
        self.assertEqual(get_json("instancesshpublickey", "ada", "-n", USER_NS)["spec"]["publicKey"],
                         "ssh-rsa AAAAB3 ada@desk")
        # A Secret that is not a helper's is neither shown nor reachable through the wrapper.
        kubectl("create", "secret", "generic", "plain", "-n", USER_NS, "--from-literal=a=b")
        self.assertNotIn("plain", kubectl("get", "instancesshpublickeys", "-n", USER_NS).stdout)
        self.assertNotEqual(kubectl("delete", "instancesshpublickey", "plain", "-n", USER_NS, check=False).returncode, 0)
        self.assertEqual(get_json("secret", "plain", "-n", USER_NS)["data"]["a"], "Yg==")
        kubectl("delete", "instancesshpublickeys,instanceimagepullsecrets,instancepersistentvolumes", "--all",
                "-n", USER_NS, "--timeout=60s")
        kubectl("delete", "instancepersistentvolumetype", "api-e2e-local", "--timeout=60s")
        self.assertNotEqual(kubectl("get", "secret", "ada", "-n", USER_NS, check=False).returncode, 0)

    def test_8_a_watch_survives_a_worker_restart(self):
        """A client that lists, then watches from the list's version, and on a broken watch
        resumes from the last version it saw (or lists again on 410), misses nothing while the
        worker is killed and restarted."""
        path = f"/apis/worker.gpustack.ai/v1/namespaces/{USER_NS}/instances"
        present = set()  # what the client believes exists
        listed = raw(path)
        version = listed["metadata"]["resourceVersion"]
        present.update(i["metadata"]["name"] for i in listed["items"])
        base = get_json("instance", "sliced-demo", "-n", "default")["spec"]

        def create(name, via="worker.gpustack.ai/v1"):
            kubectl("create", "-f", "-", stdin=json.dumps({
                "apiVersion": via, "kind": "Instance",
                "metadata": {"name": name, "namespace": USER_NS}, "spec": base}))

        def watch_once(version, seconds):
            """Events until the watch ends or `seconds` pass: the last version seen, whether the
            server said the version is gone (410), and what kubectl said when the watch failed."""
            watch = Lines([kubectl_path(), "--kubeconfig", KUBECONFIG, "get", "--raw",
                           f"{path}?watch=1&allowWatchBookmarks=true&resourceVersion={version}"])
            deadline = time.time() + seconds
            gone = False
            while time.time() < deadline:
                for line in watch.take():
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        gone = event["object"]["code"] == 410
                        continue
                    version = event["object"]["metadata"]["resourceVersion"]
                    name = event["object"]["metadata"].get("name")
                    if event["type"] in ("ADDED", "MODIFIED"):
                        present.add(name)
                    elif event["type"] == "DELETED":
                        present.discard(name)
                if not watch.running() and not watch.lines:
                    break
                time.sleep(0.05)
            return version, gone, watch.stop()

        def follow(version, done, seconds):
            """As a reflector: watch from the last version seen; a watch that fails (the
            aggregator may still call the restarted API unavailable) is started again from that
            version, and a 410 lists again. Until `done(present)` or `seconds` pass."""
            deadline = time.time() + seconds
            how, failures = "from its resourceVersion", []
            while not done(present) and time.time() < deadline:
                version, gone, said = watch_once(version, min(5, max(0.5, deadline - time.time())))
                if gone:
                    listed = raw(path)
                    present.clear()
                    present.update(i["metadata"]["name"] for i in listed["items"])
                    version = listed["metadata"]["resourceVersion"]
                    how = "by a relist after 410"
                elif said:
                    failures.append(said)
            print(f"\nwatch followed {how}; failed watches on the way: {failures}", file=sys.stderr)
            return version

        create("before-restart")
        create("victim")
        version = follow(version, lambda p: {"before-restart", "victim"} <= p, 30)
        self.assertTrue({"before-restart", "victim"} <= present, present)
        WORKER.stop(signal.SIGKILL)
        # While the worker is down the webhooks refuse new Instances, but a deletion goes through.
        kubectl("delete", "instances.v1alpha1.worker.gpustack.ai", "victim", "-n", USER_NS, "--wait=false")
        WORKER.start()
        wait("the API back", lambda: kubectl("get", "--raw", path, check=False).returncode == 0, 120)
        create("after-restart")
        follow(version, lambda p: "after-restart" in p and "victim" not in p, 60)
        self.assertIn("before-restart", present)
        self.assertIn("after-restart", present)
        self.assertNotIn("victim", present)


def kubectl_path():
    from testbed import KUBECTL
    return KUBECTL


class Lines:
    """A process's output lines, read on a thread as they come."""

    def __init__(self, args):
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.lines = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def take(self):
        taken, self.lines = self.lines, self.lines[len(self.lines):]
        return taken

    def running(self):
        return self.process.poll() is None

    def stop(self):
        """Ends the process; what it said on stderr when it failed on its own, else ''."""
        failed = self.process.poll() not in (None, 0)
        self.process.kill()
        self.process.wait()
        self.thread.join()
        said = self.process.stderr.read().strip() if failed else ""
        self.process.stdout.close()
        self.process.stderr.close()
        return said


if __name__ == "__main__":
    unittest.main(verbosity=2)
