#!/usr/bin/env bash
# Per-slice metrics' figures (README "Instances"): a real-node testbed of its own, the chart
# installed as the local cluster installs it, one sliced Instance, then
# tests/bench/metrics_bench.py (the subresource's latency, cold and cached). Needs root and a
# built tree; no other real-node testbed may run (one kubelet per machine):
#   scripts/metrics-bench.sh [BUILD_DIR]   (default: build; BENCH_COLD, BENCH_CACHED)
# The node daemon's own costs are Google Benchmarks: build/bin/usage_bench and
# build/bin/monitor_bench --benchmark_filter=MonitorSample.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -x "$build/bin/gpustack-operator" ] || { echo "metrics-bench: build first (cmake --build $build)" >&2; exit 1; }
scripts/images.sh --build "$build" >/dev/null
dir=$PWD/$build/testbed/metrics-bench
scripts/testbed/testbed.sh down --dir "$dir" >/dev/null 2>&1 || true
scripts/testbed/testbed.sh up --dir "$dir" --all --kwok-nodes 1 --kubelet >/dev/null
trap 'scripts/testbed/testbed.sh down --dir "$dir" >/dev/null 2>&1' EXIT
GPUSTACK_REPO=$PWD GPUSTACK_BUILD_DIR=$PWD/$build GPUSTACK_TESTBED_DIR=$dir PYTHONUNBUFFERED=1 \
  python3 -W ignore tests/bench/metrics_bench.py
