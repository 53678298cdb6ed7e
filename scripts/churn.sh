#!/usr/bin/env bash
# The churn benchmark (docs/decisions.md D20): tests/churn_e2e/churn_test.py, longer than CI's
# run, on a real-node testbed of its own, reporting the refusal rate instead of failing on it
# (an over-commit or a leaked card still fails it). Root, like the local cluster.
#
#   scripts/churn.sh [--build DIR] [--dir DIR]
#
# The environment sets the run: CHURN_SECONDS (default 720), CHURN_SEED (1), CHURN_LIVE (10),
# CHURN_FAULTS (default three apiserver restarts, two kubelet restarts, two kill -9 each of the
# device manager and the worker). The report goes to stdout and to DIR-report.json (the testbed
# directory itself is removed at the end; its logs are kept in DIR-logs).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build dir=/tmp/gpustack-churn
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;;
    --dir) dir=$2; shift ;;
    *) echo "usage: scripts/churn.sh [--build DIR] [--dir DIR]" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "churn.sh: the real node needs root (containerd, runc, network namespaces)" >&2; exit 2; }
if [ -f "$dir/env" ]; then
  echo "churn.sh: a testbed is already up in $dir: scripts/testbed/testbed.sh down --dir $dir first" >&2
  exit 2
fi
build=$(realpath -m "$build")

scripts/images.sh --build "$build" >/dev/null
scripts/chart-deps.sh >/dev/null
scripts/testbed/testbed.sh up --dir "$dir" --all --kwok-nodes 1 --kubelet \
  "--apiserver-arg=--enable-aggregator-routing=true" >/dev/null
trap 'scripts/testbed/testbed.sh down --dir "$dir" --logs-to "$dir-logs" >/dev/null 2>&1 || true' EXIT

GPUSTACK_REPO=$PWD GPUSTACK_BUILD_DIR=$build GPUSTACK_TESTBED_DIR=$dir PYTHONUNBUFFERED=1 \
  CHURN_SECONDS=${CHURN_SECONDS:-720} \
  CHURN_FAULTS=${CHURN_FAULTS:-apiserver,kubelet,daemon,worker,apiserver,kubelet,daemon,worker,apiserver} \
  CHURN_MAX_REFUSALS=${CHURN_MAX_REFUSALS:-1000000} \
  python3 tests/churn_e2e/churn_test.py
cp "$build/churn-report.json" "$dir-report.json"
echo "churn.sh: report in $dir-report.json; testbed logs in $dir-logs" >&2
