#!/usr/bin/env bash
# Measures the worker (tests/bench/operator_bench.cc) against a fresh local control plane with
# Kueue: convergence on a generated fleet, Devices-change latency, steady-state traffic.
#   scripts/bench-operator.sh [nodes=1000] [changes=200] [steady_seconds=60]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target operator_bench gpustack-operator plugins_all
dir=$(mktemp -d /tmp/gpustack-bench.XXXXXX)
trap 'scripts/testbed/testbed.sh down --dir "$dir"' EXIT
export KUBECONFIG
KUBECONFIG=$(scripts/testbed/testbed.sh up --dir "$dir" --kueue --controller-manager)
# shellcheck disable=SC1091
source "$dir/env"
"$KUBE_BIN/kubectl" apply --server-side -f crds/ >/dev/null
build/bin/operator_bench "${GPUSTACK_BENCH_WORKER:-build/bin/gpustack-operator}" "$@"
