#!/usr/bin/env python3
"""Two plugins that claim the same PCI vendor on one node: neither runs, the error says how to keep
one, and the chart's per-node enable (plugins.nodes.<node>.<plugin>: "off") does it. The chart is
rendered by the real helm; its node config is read by the real binary's `device-manager detect`
against a fixture sysfs tree holding one card of the fake plugins' vendor (0xfa4e)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import tools  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
BINARY = os.environ["GPUSTACK_BINARY"]
FAKES = os.environ["GPUSTACK_FAKES_DIR"]
TREES = os.environ["GPUSTACK_NODE_TREES_DIR"]
CHART = os.path.join(REPO, "charts", "gpustack-operator")
NODE = "dup-node"


def rendered_node_config(*sets):
    """The device manager's node.json, as the chart renders it with `sets`."""
    args = [tools.tool(REPO, "helm"), "template", "t", CHART, "--show-only",
            "templates/device-manager/configmap.yaml"]
    for s in sets:
        args += ["--set-json", s]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    start = lines.index("  node.json: |") + 1
    body = [line[4:] for line in lines[start:] if line.startswith("    ")]
    return json.loads("\n".join(body))


class TwoPluginsOneVendor(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="per-node-enable-")
        # One card of vendor 0xfa4e: a T4's sysfs entry with its vendor id changed.
        devices = os.path.join(self.dir, "sys", "bus", "pci", "devices")
        source = os.path.join(TREES, "nvidia-t4x4", "sys", "bus", "pci", "devices", "0000:00:1b.0")
        shutil.copytree(source, os.path.join(devices, "0000:00:05.0"), symlinks=False)
        with open(os.path.join(devices, "0000:00:05.0", "vendor"), "w") as f:
            f.write("0xfa4e\n")
        self.plugins = os.path.join(self.dir, "plugins")
        os.makedirs(self.plugins)
        for fake in ("noop", "configurable"):  # both claim 0xfa4e
            for name in os.listdir(os.path.join(FAKES, fake)):
                if name.endswith((".so", ".json")):
                    shutil.copy(os.path.join(FAKES, fake, name), self.plugins)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def detect(self, config):
        path = os.path.join(self.dir, "node.json")
        with open(path, "w") as f:
            json.dump(config, f)
        done = subprocess.run([BINARY, "device-manager", "detect", "-o", "json", "--node-name", NODE,
                               "--sysfs-root", os.path.join(self.dir, "sys"), "--plugin-dir",
                               self.plugins, "--node-config", path, "--state-dir", ""],
                              capture_output=True, text=True, timeout=120)
        report = json.loads(done.stdout)
        return done, {p["name"]: p for p in report["plugins"]}

    def test_neither_runs_and_the_error_says_how_to_keep_one(self):
        done, plugins = self.detect(rendered_node_config())
        self.assertEqual(done.returncode, 1, done.stderr)
        for name, other in (("noop", "configurable"), ("configurable", "noop")):
            self.assertEqual(plugins[name]["state"], "refused", plugins[name])
            message = plugins[name]["error"]["message"]
            self.assertIn("both claim PCI vendor 0xfa4e", message)
            self.assertIn(f"plugins.gpustack.ai/{other}=off", message)
            self.assertIn(f"plugins.nodes.<node>.{other}", message)

    def test_the_charts_per_node_enable_keeps_one(self):
        config = rendered_node_config('plugins.nodes={"%s":{"noop":"off"}}' % NODE,
                                      'plugins.config={"configurable":{"discover_emit":"one_card"}}')
        done, plugins = self.detect(config)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(plugins["configurable"]["state"], "running", plugins["configurable"])
        self.assertEqual(plugins["noop"]["state"], "disabled", plugins["noop"])
        self.assertIn("FAKE-0", done.stdout)  # the kept plugin's card is served
        # The override is for that node only: elsewhere both are still refused.
        done, plugins = self.detect({**config, "nodes": {"some-other-node": config["nodes"][NODE]}})
        self.assertEqual(plugins["noop"]["state"], "refused")
        self.assertEqual(plugins["configurable"]["state"], "refused")


if __name__ == "__main__":
    unittest.main(verbosity=2)
