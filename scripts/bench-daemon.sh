#!/usr/bin/env bash
# The node daemon's footprint on the testbed's real kubelet, measured the way the NVIDIA device
# plugin was measured beside it (docs/footprint.md): start to every resource registered (from
# exec), then after a minute to settle, `idle` seconds with nothing to do, sampled from /proc:
# VmRSS, Pss (smaps_rollup), RssAnon, threads, CPU and wakeups per thread (schedstat), the
# resident top mappings, and SIGTERM to exit. Health checks on, production settings (no fake
# event file unless GPUSTACK_FAKE_NVML_EVENTS is set).
#
#   scripts/bench-daemon.sh [fixture=nvidia-t4x4] [idle_seconds=300] [settle_seconds=60]
#
# Root only (a real kubelet). Uses /var/lib/kubelet/device-plugins: not beside node-e2e or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-daemon.sh: root only (a real kubelet)" >&2; exit 2; }
fixture=${1:-nvidia-t4x4}
idle=${2:-300}
[ -f "tests/fixtures/nodes/$fixture.json" ] || {
  echo "bench-daemon.sh: no fixture $fixture (tests/fixtures/nodes/*.json)" >&2; exit 2; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target gpustack-operator plugins_all fake_vendor_libraries fixture_trees >/dev/null
dir=$(mktemp -d /tmp/gpustack-bench-daemon.XXXXXX)
trap 'scripts/testbed/testbed.sh down --dir "$dir" >/dev/null 2>&1 || true' EXIT
scripts/testbed/testbed.sh up --dir "$dir" --scheduler --controller-manager --kubelet >/dev/null
KUBECONFIG=$dir/kubeconfig python3 scripts/bench_daemon.py --binary build/bin/gpustack-operator \
  --fixture "$fixture" --idle "$idle" --settle "${3:-60}" --testbed "$dir" --build build
