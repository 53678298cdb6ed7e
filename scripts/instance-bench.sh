#!/usr/bin/env bash
# Instances' figures (README "Instances"): a real-node testbed of its own with 10 kwok nodes, the
# chart installed as the local cluster installs it (images from scripts/images.sh), then
# tests/bench/instance_bench.py. Needs root and a built tree; no other real-node testbed may run
# (one kubelet per machine):
#   scripts/instance-bench.sh [BUILD_DIR]   (default: build; BENCH_RUNS, BENCH_COUNT)
# scripts/metrics-bench.sh runs tests/bench/metrics_bench.py the same way (BENCH_SCRIPT, with
# BENCH_KWOK_NODES kwok nodes).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
script=${BENCH_SCRIPT:-tests/bench/instance_bench.py}
name=$(basename "$script" .py)
[ -x "$build/bin/gpustack-operator" ] || { echo "$name: build first (cmake --build $build)" >&2; exit 1; }
scripts/images.sh --build "$build" >/dev/null
dir=$PWD/$build/testbed/$name
scripts/testbed/testbed.sh down --dir "$dir" >/dev/null 2>&1 || true
scripts/testbed/testbed.sh up --dir "$dir" --all --kwok-nodes "${BENCH_KWOK_NODES:-10}" --kubelet >/dev/null
trap 'scripts/testbed/testbed.sh down --dir "$dir" >/dev/null 2>&1' EXIT
GPUSTACK_REPO=$PWD GPUSTACK_BUILD_DIR=$PWD/$build GPUSTACK_TESTBED_DIR=$dir PYTHONUNBUFFERED=1 \
  python3 -W ignore "$script"
