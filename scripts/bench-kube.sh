#!/usr/bin/env bash
# Measures the Kubernetes client (tests/bench/kube_bench.cc) against a fresh local control plane:
# list+watch of N objects, watch events per second, get and apply latency.
#   scripts/bench-kube.sh [objects=10000] [samples=1000]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target kube_bench
dir=$(mktemp -d /tmp/gpustack-bench.XXXXXX)
trap 'scripts/testbed/testbed.sh down --dir "$dir"' EXIT
KUBECONFIG=$(scripts/testbed/testbed.sh up --dir "$dir") build/bin/kube_bench "$@"
