#!/usr/bin/env python3
"""The enforcement test doubles, without a container: the program allocates through the fake
libcuda.so.1 with the test enforcer preloaded (LD_PRELOAD here; /etc/ld.so.preload where the node
daemon mounts it), and a 20 % budget of the fake 16,384 MiB card (3276 MiB, floored as the
allocator writes it) binds: under it an allocation succeeds, past it fails with out of memory,
and cuMemGetInfo reports the budget. Without the variable, or without the enforcer, the whole
card is there: the budget is the enforcer's doing, not the fake's.

  enforcement_test.py <cuda_alloc> <libtest_enforcer.so>
"""
import os
import subprocess
import sys
import tempfile

PROGRAM, ENFORCER = sys.argv[1], sys.argv[2]
BUDGET = "3276m"


def alloc(mib, preload=True, budget=BUDGET, workdir=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_DEVICE_MEMORY_LIMIT")}
    # A sanitizer build's runtime would insist on coming first; the preload is the point here.
    env["ASAN_OPTIONS"] = "verify_asan_link_order=0:" + env.get("ASAN_OPTIONS", "")
    if preload:
        env["LD_PRELOAD"] = ENFORCER
    if budget:
        env["CUDA_DEVICE_MEMORY_LIMIT_0"] = budget
    if workdir:
        env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = os.path.join(workdir, "cudevshr.cache")
    done = subprocess.run([PROGRAM, str(mib)], env=env, capture_output=True, text=True,
                          timeout=30)
    return done.returncode, done.stdout + done.stderr


def expect(condition, what, output):
    if not condition:
        print(f"FAILED: {what}\n{output}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


rc, out = alloc(3000)
expect(rc == 0 and "alloc 3000 MiB: ok" in out, "3000 MiB under a 3276 MiB budget", out)
expect("total_mib=3276 free_mib=3276" in out, "cuMemGetInfo reports the budget", out)
rc, out = alloc(3277)
expect(rc == 3 and "out of memory" in out, "3277 MiB past the budget is out of memory", out)
rc, out = alloc(3277, preload=False)
expect(rc == 0 and "total_mib=16384" in out, "without the enforcer the whole card is there", out)
rc, out = alloc(16000, budget=None)
expect(rc == 0 and "total_mib=16384" in out, "without a budget the enforcer passes through", out)
rc, out = alloc(16385, preload=False, budget=None)
expect(rc == 3, "the fake card itself runs out past 16,384 MiB", out)
with tempfile.TemporaryDirectory() as workdir:
    rc, out = alloc(100, workdir=workdir)
    cache = os.path.join(workdir, "cudevshr.cache")
    expect(rc == 0 and os.path.exists(cache), "the enforcer keeps its ledger in the shared cache",
           out + str(os.listdir(workdir)))
    with open(cache) as f:
        expect(f.read().split()[1] == str(100 << 20), "the ledger says 100 MiB in use", out)
