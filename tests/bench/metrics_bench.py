#!/usr/bin/env python3
"""Per-slice metrics' figures (README "Instances"; scripts/metrics-bench.sh brings up the
testbed): the latency of `instances/<name>/metrics` through the aggregator, on one HTTPS
connection per request with the testbed's admin certificate (testbed.api_get) (no kubectl start-up in the figure):

  - cold: the worker's 15 s cache of the node's stats summary expired, so each request also asks
    the kubelet (through the apiserver's node proxy) and the node daemon (Pod proxy);
  - cached: back to back, the summary cached (the daemon's snapshot is read every time).

Environment: BENCH_COLD (default 10 samples, 16 s apart), BENCH_CACHED (default 300).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "instance_e2e"))
import testbed  # noqa: E402
from instance_e2e_test import apply, kubectl, pool_named, quick_start, wait, wait_phase  # noqa: E402

REPO = os.environ["GPUSTACK_REPO"]
BUILD = os.environ["GPUSTACK_BUILD_DIR"]
COLD = int(os.environ.get("BENCH_COLD", "10"))
CACHED = int(os.environ.get("BENCH_CACHED", "300"))


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main():
    testbed.install_local_chart(REPO, BUILD, ["gpustack-operator", "gpustack-ssh-server",
                                              "gpustack-plugin-example"])
    t4 = wait("the T4 pool", lambda: pool_named(
        lambda t: "t4" in (t.get("spec", {}).get("acceleratorGroup") or "").lower()
        and t.get("status", {}).get("entrance")))
    wait("the v1 API", lambda: kubectl("get", "instances.v1.worker.gpustack.ai",
                                       check=False).returncode == 0)
    apply(quick_start(t4, name="metrics-bench"))
    wait_phase("metrics-bench", "Ready")
    path = "/apis/worker.gpustack.ai/v1/namespaces/default/instances/metrics-bench/metrics"

    def one():
        began = time.perf_counter()
        status, body = testbed.api_get(path)
        if status != 200:
            raise SystemExit(f"metrics-bench: {status}: {body}")
        return time.perf_counter() - began, body

    wait("accelerators in the sample", lambda: "accelerators" in one()[1]["sample"], 60)
    cold = []
    for i in range(COLD):
        time.sleep(16)
        cold.append(one()[0])
    cached = [one()[0] for _ in range(CACHED)]
    print(json.dumps({"cold_ms": {"p50": quantile(cold, 0.5) * 1e3, "p99": quantile(cold, 0.99) * 1e3,
                                  "samples": len(cold)},
                      "cached_ms": {"p50": quantile(cached, 0.5) * 1e3,
                                    "p99": quantile(cached, 0.99) * 1e3, "samples": len(cached)}},
                     indent=2))


if __name__ == "__main__":
    main()
