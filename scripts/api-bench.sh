#!/usr/bin/env bash
# The v1 APIs' figures (README): a testbed of its own (the aggregator, Kueue), the worker from the
# build directory beside it, then tests/bench/api_bench.py. Needs root (Kueue) and a built tree:
#   scripts/api-bench.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -x "$build/bin/gpustack-operator" ] || { echo "api-bench: build first (cmake --build $build)" >&2; exit 1; }
dir=$PWD/$build/testbed/api-bench
scripts/testbed/testbed.sh down --dir "$dir" >/dev/null 2>&1 || true
scripts/testbed/testbed.sh up --dir "$dir" --controller-manager --kueue >/dev/null
trap 'scripts/testbed/testbed.sh down --dir "$dir" >/dev/null 2>&1' EXIT
GPUSTACK_REPO=$PWD GPUSTACK_BUILD_DIR=$PWD/$build GPUSTACK_BINARY=$PWD/$build/bin/gpustack-operator \
  GPUSTACK_TESTBED_DIR=$dir PYTHONUNBUFFERED=1 python3 -W ignore tests/bench/api_bench.py
