#!/usr/bin/env python3
"""Measures one `device-manager serve` on a running testbed with a real kubelet (bench-daemon.sh).

Every figure comes from /proc of the daemon's own process; nothing here is asserted, it is printed.
"""
import argparse
import collections
import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

REGISTERED = re.compile(r"^(\S+) .*every resource registered")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tasks(pid):
    """{tid: (name, cpu_ns, timeslices)} of every live thread."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu, _, slices = (int(x) for x in f.read().split())
        except OSError:
            continue  # it ended meanwhile
        out[int(tid)] = (name, cpu, slices)
    return out


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def pss_kb(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def resident_by_mapping(pid):
    rss = collections.Counter()
    current = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                current = head[5] if len(head) > 5 else "[anon]"
            elif head and head[0] == "Rss:":
                rss[os.path.basename(current) if current.startswith("/") else current] += int(head[1])
    return rss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--fixture", required=True)
    p.add_argument("--idle", type=int, default=300)
    p.add_argument("--settle", type=int, default=60)
    p.add_argument("--testbed", required=True)
    p.add_argument("--build", required=True)
    a = p.parse_args()
    repo = os.getcwd()
    work = tempfile.mkdtemp(prefix="bench-daemon-")
    kubectl = [os.path.join(os.environ.get("KUBE_BIN", ""), "kubectl")]
    env_file = os.path.join(a.testbed, "env")
    for line in open(env_file):
        if line.startswith("KUBE_BIN="):
            kubectl = [os.path.join(line.split("=", 1)[1].strip().strip("'\""), "kubectl")]
    subprocess.run(kubectl + ["apply", "--server-side", "-f", os.path.join(repo, "crds/worker.gpustack.ai_devices.yaml")],
                   check=True, stdout=subprocess.DEVNULL)
    config = os.path.join(work, "node-config.json")
    with open(config, "w") as f:
        json.dump({"plugins": {"nvidia": {"config": {"state_dir": os.path.join(work, "nvidia")}}}}, f)
    vendor = os.path.join(a.build, "tests/fakes/vendor")
    env = {
        "GPUSTACK_FAKE_FIXTURE": os.path.join(repo, "tests/fixtures/nodes", a.fixture + ".json"),
        "GPUSTACK_NVIDIA_LIBRARY": os.path.join(vendor, "libnvidia-ml.so.1"),
        "GPUSTACK_AMD_LIBRARY": os.path.join(vendor, "librocm_smi64.so"),
        "GPUSTACK_STATE_DIR": os.path.join(work, "state"),
        "GPUSTACK_DATA_DIR": os.path.join(work, "data"),
        "KUBECONFIG": os.environ["KUBECONFIG"],
        "PATH": "/usr/bin:/bin",
    }
    # The fake's event file; an allocator or its settings (LD_PRELOAD, MALLOC_CONF, glibc's
    # MALLOC_ARENA_MAX...) tried without a build.
    for name, value in os.environ.items():
        if name in ("GPUSTACK_FAKE_NVML_EVENTS", "LD_PRELOAD", "GLIBC_TUNABLES") or \
                name.startswith("MALLOC_"):
            env[name] = value
    args = [a.binary, "--log-level", "info", "device-manager", "serve", "--node-name", "testbed-node",
            "--sysfs-root", os.path.join(a.build, "fixtures/nodes", a.fixture, "sys"),
            "--pod-resources-socket",
            os.path.join(a.testbed, "node/kubelet/pod-resources/kubelet.sock"),
            "--node-config", config, "--secure-port", str(free_port())]
    log_path = os.path.join(work, "daemon.log")
    log = open(log_path, "w")
    started = time.time()
    daemon = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        measure(a, daemon, log_path, started)
    finally:
        # Interrupted (^C, or a closed pipe when the output goes to `head`): leave no daemon
        # holding the node's device-plugin directory.
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


def measure(a, daemon, log_path, started):
    pid = daemon.pid
    registered_ms = None
    deadline = time.time() + 60
    while registered_ms is None and time.time() < deadline and daemon.poll() is None:
        for line in open(log_path):
            m = REGISTERED.match(line)
            if m:
                at = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
                registered_ms = (at - started) * 1000
        time.sleep(0.05)
    if registered_ms is None:
        sys.exit(f"the daemon did not register within 60 s; its log: {log_path}")
    own = [l for l in open(log_path) if "every resource registered" in l][0].strip()
    # A daemon that found no card (its plugins not built, a fixture its plugins do not match)
    # "registers every resource" at once, of none: its figures would measure nothing.
    if not any("registered with the kubelet" in l for l in open(log_path)):
        sys.exit(f"the daemon serves no resource (no card found?); its log: {log_path}")
    print(f"exec -> every resource registered: {registered_ms:.0f} ms   (daemon: {own.split('] ')[-1]})")
    print(f"settling {a.settle} s, then {a.idle} idle s ...", flush=True)
    time.sleep(a.settle)
    before = tasks(pid)
    seen = dict(before)
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.idle:
        time.sleep(min(5, a.idle - (time.monotonic() - t0)))
        now = tasks(pid)
        seen.update(now)
    after = seen
    window = time.monotonic() - t0
    threads_now = tasks(pid)
    cpu_ms = sum(after[t][1] - before.get(t, (0, 0, 0))[1] for t in after) / 1e6
    wakes = sum(after[t][2] - before.get(t, (0, 0, 0))[2] for t in after)
    born = [t for t in after if t not in before]
    print(f"VmRSS {status_kb(pid, 'VmRSS') / 1000:.1f} MB   Pss {pss_kb(pid) / 1000:.1f} MB   "
          f"RssAnon {status_kb(pid, 'RssAnon') / 1000:.1f} MB   threads {len(threads_now)}")
    print(f"idle {window:.0f} s: CPU {cpu_ms:.1f} ms, {wakes / window:.2f} wakeups/s, "
          f"{len(born)} threads started and {len([t for t in before if t not in threads_now])} ended")
    print("per thread (name, CPU ms, wakeups/s):")
    rows = sorted(after, key=lambda t: -(after[t][1] - before.get(t, (0, 0, 0))[1]))
    for t in rows:
        d_cpu = (after[t][1] - before.get(t, (0, 0, 0))[1]) / 1e6
        d_w = (after[t][2] - before.get(t, (0, 0, 0))[2]) / window
        print(f"  {after[t][0]:<16} {d_cpu:8.2f} {d_w:7.2f}{'  (new)' if t in born else ''}")
    print("resident mappings (top 10, MB):")
    for name, kb in resident_by_mapping(pid).most_common(10):
        print(f"  {kb / 1000:6.1f}  {name}")
    t = time.monotonic()
    daemon.send_signal(signal.SIGTERM)
    code = daemon.wait(timeout=30)
    print(f"SIGTERM -> exit: {time.monotonic() - t:.2f} s (status {code})")


if __name__ == "__main__":
    main()
