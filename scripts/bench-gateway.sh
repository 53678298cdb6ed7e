#!/usr/bin/env bash
# The worker-gateway's figures (docs/gateway.md): one testbed of its own with NODES kwok nodes of
# 8 x H100 each (Devices as node daemons would publish them), the worker serving its v1 API, then
# gateways of 1, 10, ... members (each member a separate connection to that cluster) until a
# change takes more than a second. Needs root (Kueue) and a built tree:
#   scripts/bench-gateway.sh [NODES=1000] [MEMBER_COUNTS="1 10 25 50 100"] [BUILD_DIR=build]
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-1000}
counts=${2:-"1 10 25 50 100"}
build=${3:-build}
[ -x "$build/bin/gpustack-operator" ] || { echo "bench-gateway: build first (cmake --build $build)" >&2; exit 1; }
dir=$PWD/$build/testbed/gateway-bench
scripts/testbed/testbed.sh down --dir "$dir" >/dev/null 2>&1 || true
fixture=$(mktemp --suffix=.json)
# The testbed's kwok node, with the CPU identity a kubelet and NFD would give it.
python3 - testbed/fixtures/kwok-node.json >"$fixture" <<'PY'
import json, sys
node = json.load(open(sys.argv[1]))
node["metadata"]["labels"]["feature.node.kubernetes.io/cpu-model.vendor_id"] = "Intel"
node["metadata"]["annotations"] = {"feature.gpustack.ai/cpu-name": "Intel(R) Xeon(R) Platinum 8480+"}
print(json.dumps(node))
PY
scripts/testbed/testbed.sh up --dir "$dir" --controller-manager --kueue --kwok-nodes "$nodes" \
  --node-fixture "$fixture" >/dev/null
trap 'scripts/testbed/testbed.sh down --dir "$dir" >/dev/null 2>&1; rm -f "$fixture"' EXIT
GPUSTACK_REPO=$PWD GPUSTACK_BUILD_DIR=$PWD/$build GPUSTACK_BINARY=$PWD/$build/bin/gpustack-operator \
  GPUSTACK_TESTBED_DIR=$dir PYTHONUNBUFFERED=1 python3 -W ignore tests/bench/gateway_bench.py \
  "$nodes" $counts
