"""The v1 APIs' figures (README): GET and LIST through the aggregator next to the same calls on
the v1alpha1 CRD the apiserver serves itself, a watch event's delay on both paths, and the
worker's RSS per 1,000 Instances. Run by scripts/api-bench.sh on a testbed of its own, after the
api-e2e test's set-up (a worker beside the control plane, registered through --api-address).

Each call goes over one kept-alive TLS connection with the testbed's admin certificate, so what is
measured is the server side plus one loopback round trip, not a client's start-up."""
import http.client
import json
import os
import socket
import ssl
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "api_e2e"))
import api_e2e_test as e2e  # noqa: E402  (its worker, node fixture and clean slate)
from testbed import DIR, ENV, kubectl  # noqa: E402

NS = "api-bench"
PORT = int(ENV["APISERVER_PORT"])
V1 = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/instances"
V1ALPHA1 = f"/apis/worker.gpustack.ai/v1alpha1/namespaces/{NS}/instances"


def connection(timeout=30):
    context = ssl.create_default_context(cafile=os.path.join(DIR, "pki", "ca.crt"))
    context.load_cert_chain(os.path.join(DIR, "pki", "admin.crt"), os.path.join(DIR, "pki", "admin.key"))
    return http.client.HTTPSConnection("127.0.0.1", PORT, context=context, timeout=timeout)


def worker_connection():
    """Straight to the worker, as the aggregator's front proxy (its client certificate and the
    user headers): the same call without the aggregator's hop."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(os.path.join(DIR, "pki", "front-proxy-client.crt"),
                            os.path.join(DIR, "pki", "front-proxy-client.key"))
    return http.client.HTTPSConnection("127.0.0.1", e2e.WORKER.port, context=context, timeout=30)


PROXY_HEADERS = {"X-Remote-User": "testbed-admin", "X-Remote-Group": "system:masters"}


def call(conn, method, path, body=None, extra=None):
    headers = {"Accept": "application/json", **(extra or {})}
    if body is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    answer = conn.getresponse()
    data = answer.read()
    if answer.status >= 300:
        raise AssertionError(f"{method} {path}: {answer.status} {data[:300]}")
    return json.loads(data)


def quantiles(samples):
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] * 1000, ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1000


def timed(conn, path, n, extra=None):
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        call(conn, "GET", path, extra=extra)
        samples.append(time.perf_counter() - started)
    return quantiles(samples)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def instance(name, spec):
    return {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Instance",
            "metadata": {"name": name, "namespace": NS, "labels": {"bench": "yes"}}, "spec": spec}


def watch_delays(conn, spec, n):
    """Per path, the time from a write's answer to its event arriving on a watch already open."""
    delays = {V1: [], V1ALPHA1: []}
    arrived = {V1: {}, V1ALPHA1: {}}
    streams = []
    for path in (V1, V1ALPHA1):
        c = connection(timeout=None)
        c.request("GET", f"{path}?watch=1&labelSelector=probe%3Dyes", headers={"Accept": "application/json"})
        answer = c.getresponse()
        streams.append(c)

        def read(answer=answer, path=path):
            buffer = b""
            while True:
                try:
                    chunk = answer.read1(65536)
                except (OSError, ValueError, http.client.HTTPException):
                    return  # the stream was shut down below (an incomplete chunk)
                if not chunk:
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    event = json.loads(line)
                    name = event["object"]["metadata"].get("name", "")
                    arrived[path].setdefault(name, time.perf_counter())
        threading.Thread(target=read, daemon=True).start()
    time.sleep(1)
    for i in range(n):
        name = f"probe-{i}"
        body = instance(name, spec)
        body["metadata"]["labels"] = {"probe": "yes"}
        call(conn, "POST", V1ALPHA1, body)
        written = time.perf_counter()
        deadline = time.time() + 10
        while time.time() < deadline and not all(name in arrived[p] for p in arrived):
            time.sleep(0.0005)
        for p in arrived:
            delays[p].append(arrived[p].get(name, written + 10) - written)
    for c in streams:
        # Not close(): it would wait on the reader thread's lock; a shutdown ends its read.
        try:
            c.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    return {p: quantiles(d) for p, d in delays.items()}


def main():
    e2e.setUpModule()
    try:
        kubectl("create", "namespace", NS, check=False)
        e2e.wait("the derived A10G pool", lambda: e2e.get_json("instancetype", e2e.TYPE)["status"]
                 ["detail"]["slicedDetail"]["logical"]["count"] > 0, 180)
        spec = json.loads(json.dumps({"type": e2e.TYPE, "image": "ubuntu:24.04", "command": ["sleep", "1"],
                                      "resources": {"accelerator": "1"},
                                      "volume": {"ephemeral": {"capacity": "1Gi"}}}))
        conn = connection()
        for i in range(100):
            call(conn, "POST", V1ALPHA1, instance(f"i{i:04d}", spec))
        e2e.wait("100 Instances in the worker's cache",
                 lambda: len(call(conn, "GET", V1)["items"]) == 100, 60)
        results = {}
        direct = worker_connection()
        for label, path, n in (("GET one", "/i0042", 500), ("LIST 100", "", 200)):
            call(conn, "GET", V1 + path)  # warm
            results[label] = (timed(conn, V1ALPHA1 + path, n), timed(conn, V1 + path, n),
                              timed(direct, V1 + path, n, PROXY_HEADERS))
        print("measured GET and LIST; now the watch delays", file=sys.stderr)
        delays = watch_delays(conn, spec, 50)
        print("measured the watch delays; now 1,000 more Instances", file=sys.stderr)
        pid = e2e.WORKER.process.pid
        before = rss_kib(pid)
        for i in range(100, 1100):
            call(conn, "POST", V1ALPHA1, instance(f"i{i:04d}", spec))
        # 1,100 and the 50 watch probes.
        e2e.wait("1,150 Instances in the worker's cache",
                 lambda: len(call(conn, "GET", V1)["items"]) == 1150, 120)
        time.sleep(2)
        after = rss_kib(pid)
        print("\n== v1 API figures (one kept-alive TLS connection, this machine) ==")
        print(f"{'call':<10} {'v1alpha1 CRD p50/p99 ms':>26} {'v1 aggregated p50/p99 ms':>26} "
              f"{'ratio p50':>10} {'v1 at the worker p50/p99 ms':>30}")
        for label, ((c50, c99), (a50, a99), (d50, d99)) in results.items():
            print(f"{label:<10} {c50:>12.2f} / {c99:<11.2f} {a50:>12.2f} / {a99:<11.2f} "
                  f"{a50 / c50:>9.2f}x {d50:>15.2f} / {d99:<11.2f}")
        (w50, w99), (s50, s99) = delays[V1], delays[V1ALPHA1]
        print(f"watch event delay after the write's answer: v1alpha1 {s50:.2f} / {s99:.2f} ms, "
              f"v1 through the aggregator {w50:.2f} / {w99:.2f} ms (p50 / p99)")
        print(f"worker RSS: {before / 1024:.1f} MiB with 150 Instances, {after / 1024:.1f} MiB with "
              f"1,150: {(after - before) / 1024:.1f} MiB per 1,000 Instances")
    finally:
        kubectl("delete", "namespace", NS, "--wait=false", check=False)
        e2e.tearDownModule()


if __name__ == "__main__":
    main()
