#!/usr/bin/env python3
"""Per-slice metrics on the real node (CTest label instance-e2e; docs/behaviour.md §8).

On the chart the local cluster installs (4 T4s simulated on the testbed's real kubelet, the fake
NVML's process rows in $GPUSTACK_TESTBED_DIR/fake-processes/processes.json), two sliced
Instances, then through `kubectl get --raw .../instances/<name>/metrics` and the node daemon's
/metrics:

  - each Instance's entry: memoryTotalMiB = its slice's budget, memoryUsedMiB = what the fake
    NVML reports for its container's host pid, coresUtilizationPercent against its own cores
    allowance; the same figures under the §8.2 names, and `promtool check metrics` passes;
  - two slices of one card in two Pods: each sees its own figures;
  - a figure the vendor library cannot measure: absent, never 0, and the capability gauge says so;
  - the node daemon stopped: a sample without `accelerators`;
  - the kubelet not answering and no metrics-server: 503 naming both.
"""
import concurrent.futures
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import testbed  # noqa: E402
import tools  # noqa: E402
from instance_e2e_test import (NS, apply, delete_instance, get, kubectl, pool_named,  # noqa: E402
                               quick_start, say, wait, wait_phase)
from testbed import DIR  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
NODE = "testbed-node"
ROWS = os.path.join(DIR, "fake-processes", "processes.json")


def metrics_of(name):
    """(status, body): the subresource through the aggregator, as kubectl gets it."""
    done = kubectl("get", "--raw", f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/instances/"
                   f"{name}/metrics", check=False, timeout=60)
    if done.returncode == 0:
        return 200, json.loads(done.stdout)
    return 0, done.stderr.strip()


def write_rows(rows):
    os.makedirs(os.path.dirname(ROWS), exist_ok=True)
    with open(ROWS + ".tmp", "w") as f:
        json.dump(rows, f)
    os.replace(ROWS + ".tmp", ROWS)  # the daemon never reads half a file


def daemon():
    """(pid, metrics port) of the node daemon."""
    pods = get("pods", "-n", "gpustack-system", "-l", "app.kubernetes.io/component=device-manager")
    pod = pods["items"][0]
    port = next(p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])
                if p.get("name") == "metrics")
    pid = int(testbed.run("pgrep", "-f", "gpustack-operator device-manager serve").stdout.split()[0])
    return pid, port


def exporter_text(port):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=context,
                                timeout=10) as r:
        return r.read().decode()


def series(text, family, instance_name):
    """{labels text: value} of `family` for the Instance `instance_name`."""
    out = {}
    for line in text.splitlines():
        m = re.match(rf'{family}\{{(.*)\}} (\S+)$', line)
        if m and f'instance_name="{instance_name}"' in m.group(1):
            out[m.group(1)] = float(m.group(2))
    return out


class Metrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        installed = testbed.run(testbed.HELM, "--kubeconfig", testbed.KUBECONFIG, "status",
                                "gpustack-operator", "-n", "gpustack-system",
                                check=False).returncode == 0  # by instance_e2e_test.py
        if os.environ.get("INSTANCE_E2E_INSTALL", "1") == "1" and not installed:
            testbed.install_local_chart(
                REPO, BUILD, ["gpustack-operator", "gpustack-ssh-server", "gpustack-plugin-example"])
        cls.t4 = wait("the T4 pool", lambda: pool_named(
            lambda t: "t4" in (t.get("spec", {}).get("acceleratorGroup") or "").lower()
            and t.get("status", {}).get("entrance")))
        wait("the v1 API", lambda: kubectl("get", "instances.v1.worker.gpustack.ai", "-n", NS,
                                           check=False).returncode == 0)
        write_rows({})
        # Two slices of 20 % of a T4; gate 3 packs them onto one card (fullest first).
        for name, cores in (("metrics-a", 100), ("metrics-b", 50)):
            spec = quick_start(cls.t4, name=name)
            spec["spec"]["resources"]["acceleratorSlicedCoresPercentage"] = cores
            apply(spec)
        cls.addClassCleanup(write_rows, {})
        for name in ("metrics-a", "metrics-b"):
            cls.addClassCleanup(delete_instance, name)
        cls.card, cls.pids = None, {}
        for name in ("metrics-a", "metrics-b"):
            status = wait_phase(name, "Ready")
            cards = [a["id"] for g in status.get("allocations", []) for a in g.get("accelerators", [])]
            pod = get("pod", "-n", NS, name)
            cls.pids[name] = wait(f"{name}'s main process on the host",
                                  lambda: tools.host_pid(pod["metadata"]["uid"], "sleep"), 30)
            say(f"{name}: card {cards}, host pid {cls.pids[name]}")
            cls.cards = getattr(cls, "cards", {})
            cls.cards[name] = cards[0]

    def rows(self, a=None, b=None):
        """The fake NVML's rows: a's and b's processes on their cards."""
        table = {}
        for name, row in (("metrics-a", a), ("metrics-b", b)):
            if row is not None:
                table.setdefault(self.cards[name], []).append({"pid": self.pids[name], **row})
        write_rows(table)

    def entry(self, name, predicate, seconds=60):
        """The Instance's accelerator entry, once `predicate` holds for it."""
        def look():
            status, body = metrics_of(name)
            if status != 200:
                return None
            entries = body["sample"].get("accelerators") or []
            return entries[0] if len(entries) == 1 and predicate(entries[0]) else None
        try:
            return wait(f"{name}'s metrics", look, seconds)
        except AssertionError:
            raise AssertionError(f"{name}'s metrics never matched: {metrics_of(name)}")

    def test_1_each_slice_reads_its_own_figures(self):
        if self.cards["metrics-a"] != self.cards["metrics-b"]:
            say(f"the two slices landed on two cards ({self.cards}): each still reads its own")
        self.rows(a={"used_mib": 1000, "sm_util": 15}, b={"used_mib": 2000, "sm_util": 20})
        t0 = time.time()
        a = self.entry("metrics-a", lambda e: e.get("memoryUsedMiB") == 1000)
        say(f"metrics-a's figures {time.time() - t0:.1f} s after the rows changed: {a}")
        self.assertEqual(a["mode"], "Sliced")
        card_mib = next(g["memory"] for g in get("devices", NODE)["spec"]["groups"]
                        if any(c["id"] == self.cards["metrics-a"] for c in g["accelerators"]))
        self.assertEqual(a["memoryTotalMiB"], card_mib * 20 // 100)  # the budget the slice got
        self.assertEqual(a["coresUtilizationPercent"], 15)  # 15 % of the card on 100 %
        self.assertIn("temperatureCelsius", a)
        b = self.entry("metrics-b", lambda e: e.get("memoryUsedMiB") == 2000)
        self.assertEqual(b["coresUtilizationPercent"], 40)  # 20 % of the card on its 50 %
        self.assertAlmostEqual(b["memoryUtilizationPercent"], 2000 * 100 / b["memoryTotalMiB"],
                               places=6)
        _, body = metrics_of("metrics-a")
        sample = body["sample"]
        say(f"metrics-a's sample: {json.dumps(sample)}")
        for key in ("cpuTotalMilliCores", "memoryTotalMiB", "storageTotalMiB",
                    "cpuUsedMilliCores", "memoryUsedMiB"):
            self.assertIn(key, sample)
        self.assertGreater(sample["memoryTotalMiB"], 0)

        # The same figures on the node daemon's exporter, under the §8.2 names.
        _, port = daemon()
        text = exporter_text(port)
        used = series(text, "gpustack_instance_accelerator_memory_used_mib", "metrics-a")
        self.assertEqual(list(used.values()), [1000.0], text)
        labels = next(iter(used))
        for label in ("namespace=", "instance_uid=", "node=", "id=", "index=", "manufacturer=",
                      'mode="Sliced"'):
            self.assertIn(label, labels)
        self.assertEqual(list(series(text, "gpustack_instance_accelerator_cores_utilization_percent",
                                     "metrics-b").values()), [40.0])
        self.assertTrue(series(text, "gpustack_instance_cpu_total_millicores", "metrics-a"))
        self.assertIn('gpustack_instance_metrics_collector_success{source="kubelet"} 1', text)
        checked = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                                 capture_output=True)
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)

    def test_2_what_the_library_cannot_measure_is_absent(self):
        self.rows(a={"unaccounted": True, "sm_util": 5}, b={"used_mib": 2500, "sm_util": 20})
        a = self.entry("metrics-a", lambda e: "memoryUsedMiB" not in e
                       and e.get("coresUtilizationPercent") == 5)
        self.assertNotIn("memoryUtilizationPercent", a)
        self.entry("metrics-b", lambda e: e.get("memoryUsedMiB") == 2500)
        text = exporter_text(daemon()[1])
        self.assertEqual(series(text, "gpustack_instance_accelerator_memory_used_mib", "metrics-a"),
                         {})
        self.assertRegex(text, r'gpustack_accelerator_process_capability\{[^}]*id="'
                         + re.escape(self.cards["metrics-a"])
                         + r'",entry_point="memory",reason="unsupported"\} 0')
        # The library refuses to list a's card (NVML_ERROR_NO_PERMISSION): a's figures are
        # absent, not an idle 0, and the capability gauge says why.
        table = {self.cards["metrics-a"]: {"error": 4}}
        if self.cards["metrics-b"] != self.cards["metrics-a"]:
            table[self.cards["metrics-b"]] = [{"pid": self.pids["metrics-b"], "used_mib": 2500}]
        write_rows(table)
        self.entry("metrics-a", lambda e: "memoryUsedMiB" not in e
                   and "coresUtilizationPercent" not in e and "temperatureCelsius" in e)
        self.assertRegex(exporter_text(daemon()[1]),
                         r'gpustack_accelerator_process_capability\{[^}]*id="'
                         + re.escape(self.cards["metrics-a"])
                         + r'",entry_point="memory",reason="permission"\} 0')

    def test_3_a_process_no_pod_owns_blanks_its_card(self):
        self.rows(a={"used_mib": 1000, "sm_util": 15})
        table = json.load(open(ROWS))
        table[self.cards["metrics-a"]].append({"pid": 1, "used_mib": 50, "sm_util": 1})  # init
        write_rows(table)
        self.entry("metrics-a", lambda e: "memoryUsedMiB" not in e
                   and "coresUtilizationPercent" not in e and "temperatureCelsius" in e)

    def test_4_daemon_down_gives_no_accelerators(self):
        self.rows(a={"used_mib": 1000, "sm_util": 15})
        self.entry("metrics-a", lambda e: e.get("memoryUsedMiB") == 1000)
        pid, _ = daemon()
        os.kill(pid, signal.SIGSTOP)
        try:
            status, body = metrics_of("metrics-a")
        finally:
            os.kill(pid, signal.SIGCONT)
        self.assertEqual(status, 200, body)
        say(f"the daemon stopped: {json.dumps(body['sample'])}")
        self.assertNotIn("accelerators", body["sample"])
        self.assertIn("cpuTotalMilliCores", body["sample"])

    def test_5_kubelet_and_metrics_server_both_down_is_503(self):
        with open(os.path.join(DIR, "pids", "kubelet")) as f:
            kubelet = int(f.read())
        os.kill(kubelet, signal.SIGSTOP)
        try:
            time.sleep(16)  # past the worker's 15 s cache of the node's summary
            # Six at once while the first waits on the kubelet: two are computed, the rest are
            # told to come back (the webhooks share those threads).
            path = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/instances/metrics-a/metrics"
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                storm = list(pool.map(lambda _: testbed.api_get(path), range(6)))
            status, body = metrics_of("metrics-a")  # the failure, cached 5 s, as kubectl shows it
        finally:
            os.kill(kubelet, signal.SIGCONT)
        say(f"kubelet stopped, no metrics-server: {body}")
        self.assertNotEqual(status, 200, body)
        self.assertIn("ServiceUnavailable", body)
        self.assertIn("kubelet's stats summary", body)
        self.assertIn("metrics.k8s.io", body)
        say(f"six at once: {sorted(s for s, _ in storm)}")
        self.assertIn(429, [s for s, _ in storm], storm)
        for s, answer in storm:
            self.assertIn(s, (429, 503), answer)
            if s == 429:
                self.assertIn("too many metrics requests", answer["message"])
        wait("the kubelet's summary again", lambda: metrics_of("metrics-a")[0] == 200, 60)

    def test_7_every_dashboard_panel_has_series_on_a_real_prometheus(self):
        self.rows(a={"used_mib": 1000, "sm_util": 15}, b={"used_mib": 2000, "sm_util": 20})
        with open(os.path.join(REPO, "charts/gpustack-operator/files/gpustack-dashboard.json")) as f:
            dashboard = json.load(f)
        with testbed.Prometheus() as prometheus:
            def scraped():
                up = prometheus.query('up{kubernetes_pod_name=~"gpustack-operator-.*"}')
                pods = {r["metric"]["kubernetes_pod_name"] for r in up if r["value"][1] == "1"}
                return up if any("device-manager" in p for p in pods) and any(
                    "worker" in p for p in pods) else None
            up = wait("Prometheus scraping the worker and the node daemon", scraped, 90)
            say(f"scrape targets up: {sorted(r['metric']['kubernetes_pod_name'] for r in up)}")
            for panel in dashboard["panels"]:
                for target in panel["targets"]:
                    result = wait(f"series for {panel['title']!r}",
                                  lambda: prometheus.query(target["expr"]) or None, 60)
                    say(f"{panel['title']}: {len(result)} series ({target['expr'][:60]})")
            for r in prometheus.query('scrape_duration_seconds{kubernetes_pod_name=~".*device-manager.*"}'
                                      ' or scrape_body_size_bytes{kubernetes_pod_name=~".*device-manager.*"}'):
                say(f"node daemon scrape: {r['metric']['__name__']} = {r['value'][1]}")

    def test_6_never_started_is_totals_and_zeroes(self):
        spec = quick_start(self.t4, name="metrics-stopped", stop=True)
        apply(spec)
        self.addCleanup(delete_instance, "metrics-stopped")
        wait_phase("metrics-stopped", "Stopped")
        status, body = metrics_of("metrics-stopped")
        self.assertEqual(status, 200, body)
        sample = body["sample"]
        self.assertEqual(sample["cpuUsedMilliCores"], 0)
        self.assertEqual(sample["memoryUsedMiB"], 0)
        self.assertEqual(sample["accelerators"], [])
        self.assertGreater(sample["cpuTotalMilliCores"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
