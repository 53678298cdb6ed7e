#!/usr/bin/env python3
"""CDI devices reach the container (CTest label cdi-e2e; docs/behaviour.md §6.3).

On a testbed whose real node runs containerd 2 with CDI (kubelet.sh, GPUSTACK_TESTBED_CONTAINERD2),
the chart as the local cluster installs it (4 T4s simulated; GPUSTACK_NVIDIA_DEVICE_INJECTION_
STRATEGY=auto; the device manager reads that containerd's config), and a CDI spec in /var/run/cdi
naming the simulated cards, each of which sets FAKE_CDI_DEVICE=<its uuid> in a container:

  - a Pod asking for a whole card gets it as a CDI device: the grant's annotation
    cdi.k8s.io/gpustack-nvidia names it, containerd resolves it from the spec, and the container
    sees FAKE_CDI_DEVICE equal to the card NVIDIA_VISIBLE_DEVICES names; the device manager's log
    says why CDI was chosen;
  - with the spec gone, auto keeps the variable and says which card no spec names.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "instance_e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "enforcement_e2e"))
import testbed  # noqa: E402
from enforcement_e2e_test import daemon_log, report_of, t4_entrance  # noqa: E402
from instance_e2e_test import get, kubectl, say, wait  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
NODE = "testbed-node"
NS = "default"
SPEC = "/var/run/cdi/gpustack-testbed-nvidia.yaml"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def write_spec():
    with open(os.path.join(REPO, "tests/fixtures/nodes/nvidia-t4x4.json")) as f:
        uuids = [c["uuid"] for c in json.load(f)["nvml"]["devices"]]
    devices = [{"name": u, "containerEdits": {"env": [f"FAKE_CDI_DEVICE={u}"]}} for u in uuids]
    os.makedirs(os.path.dirname(SPEC), exist_ok=True)
    with open(SPEC + ".tmp", "w") as f:  # JSON is YAML
        json.dump({"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": devices}, f)
    os.replace(SPEC + ".tmp", SPEC)


def whole_card_pod(name, queue):
    limits = {"nvidia.com/gpu": "1"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "docker.io/library/busybox:local",
                                     "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", 'echo "cdi=$FAKE_CDI_DEVICE"; '
                                                 'echo "visible=$NVIDIA_VISIBLE_DEVICES"; '
                                                 'echo done; exec sleep 3600'],
                                     "resources": {"limits": limits, "requests": limits}}]}}




class Cdi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        node = get("node", NODE)
        cls.runtime = node["status"]["nodeInfo"]["containerRuntimeVersion"]
        say(f"the node's engine: {cls.runtime}")
        write_spec()
        cls.addClassCleanup(lambda: os.path.exists(SPEC) and os.remove(SPEC))
        testbed.install_local_chart(
            REPO, BUILD, ["gpustack-operator", "gpustack-ssh-server", "gpustack-plugin-example"])
        cls.queue = t4_entrance()

    def tearDown(self):
        kubectl("delete", "pod", "-n", NS, "cdi-a", "cdi-b", "--ignore-not-found", "--wait=true",
                timeout=120, check=False)

    def test_1_a_card_reaches_the_container_as_a_cdi_device(self):
        self.assertTrue(self.runtime.startswith("containerd://2."), self.runtime)
        kubectl("apply", "-f", "-", stdin=json.dumps(whole_card_pod("cdi-a", self.queue)))
        report = wait("cdi-a's report", lambda: report_of("cdi-a"), 240)
        say(f"cdi-a: {report}")
        self.assertTrue(report["visible"].startswith("GPU-"), report)
        self.assertEqual(report["cdi"], report["visible"], "containerd injected the spec's edits")
        self.assertIn("nvidia: cards reach containers through CDI annotations: the engine injects "
                      "CDI devices and the specs name every granted card", daemon_log())

    def test_2_without_a_spec_naming_the_card_auto_keeps_the_variable(self):
        os.remove(SPEC)
        kubectl("apply", "-f", "-", stdin=json.dumps(whole_card_pod("cdi-b", self.queue)))
        report = wait("cdi-b's report", lambda: report_of("cdi-b"), 240)
        say(f"cdi-b: {report}")
        self.assertTrue(report["visible"].startswith("GPU-"), report)
        self.assertEqual(report["cdi"], "", report)
        self.assertIn("through the visible-devices variable: no CDI spec in /etc/cdi or "
                      "/var/run/cdi names nvidia.com/gpu=" + report["visible"], daemon_log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
