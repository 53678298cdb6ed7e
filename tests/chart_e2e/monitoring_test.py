#!/usr/bin/env python3
"""The chart's monitoring objects (docs/behaviour.md §8.2), rendered by the real helm: the Grafana
dashboard ConfigMap (its JSON intact, every panel with a query), PodMonitors for the worker and
the daemons only where the cluster serves monitoring.coreos.com/v1 PodMonitor (or when forced),
none when turned off, and a bad value refused by the schema."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import tools  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
CHART = os.path.join(REPO, "charts", "gpustack-operator")
PODMONITOR_API = "monitoring.coreos.com/v1/PodMonitor"


HELM = tools.tool(REPO, "helm")


def render(*args, check=True):
    done = subprocess.run([HELM, "template", "t", CHART, "-n", "gpustack-system", *args],
                          capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(done.stderr)
    return done


def documents(text):
    """(kind, name, text) of each rendered document."""
    out = []
    for doc in text.split("\n---\n"):
        kind = next((line.split(":", 1)[1].strip() for line in doc.splitlines()
                     if line.startswith("kind:")), None)
        name = next((line.split(":", 1)[1].strip() for line in doc.splitlines()
                     if line.startswith("  name:")), None)
        if kind:
            out.append((kind, name, doc))
    return out


class Monitoring(unittest.TestCase):
    def test_the_dashboard_ships_as_a_configmap_for_grafanas_sidecar(self):
        docs = documents(render().stdout)
        dashboards = [d for d in docs if d[0] == "ConfigMap" and d[1] == "t-gpustack-operator-dashboard"]
        self.assertEqual(len(dashboards), 1, [d[:2] for d in docs])
        text = dashboards[0][2]
        self.assertIn('grafana_dashboard: "1"', text)
        # The JSON as rendered (indented under the key) parses and every panel has a query.
        body = text.split("gpustack-operator.json: |-\n", 1)[1]
        dashboard = json.loads("\n".join(line[4:] for line in body.splitlines()))
        self.assertTrue(dashboard["panels"])
        for panel in dashboard["panels"]:
            self.assertTrue(all(t["expr"] for t in panel["targets"]), panel["title"])
        self.assertNotIn("ConfigMap", [d[0] for d in documents(
            render("--set", "metrics.dashboard.enabled=false").stdout) if d[1].endswith("-dashboard")])

    def test_podmonitors_only_where_the_prometheus_operator_is(self):
        self.assertNotIn("PodMonitor", [d[0] for d in documents(render().stdout)])
        monitors = [d for d in documents(render("--api-versions", PODMONITOR_API).stdout)
                    if d[0] == "PodMonitor"]
        self.assertEqual(sorted(d[1] for d in monitors),
                         ["t-gpustack-operator-device-manager", "t-gpustack-operator-worker"])
        for _, _, text in monitors:
            self.assertIn("honorLabels: true", text)
            self.assertIn("scheme: https", text)
        self.assertNotIn("PodMonitor", [d[0] for d in documents(render(
            "--api-versions", PODMONITOR_API, "--set", "metrics.podMonitor.enabled=false").stdout)])
        forced = documents(render("--set", "metrics.podMonitor.enabled=true").stdout)
        self.assertEqual(len([d for d in forced if d[0] == "PodMonitor"]), 2)

    def test_a_bad_value_is_refused_by_name(self):
        done = render("--set", "metrics.podMonitor.enabled=maybe", check=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("podMonitor", done.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
