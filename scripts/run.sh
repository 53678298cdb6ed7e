#!/usr/bin/env bash
# The main job. With no arguments: a local cluster where everything runs for real
# (scripts/local-cluster.sh: the test control plane, Kueue, kwok GPU nodes and a real node that
# simulates 4 T4 cards, the images built here, `helm install` of charts/gpustack-operator), then
# a walkthrough (scripts/walkthrough.py): Pods of each shape, one queued until a card is free,
# `kubectl get instancetypes` and where each Pod landed with what it was granted; then the Quick
# Start's sliced Instance and an Instance with an SSH sidecar, and the ssh command that logs into
# it. The cluster stays up; its KUBECONFIG is printed last.
#
#   scripts/run.sh            bring up the local cluster and walk through it (root)
#   scripts/run.sh down       remove it
#   scripts/run.sh ARGS...    build, then run `gpustack-operator ARGS...` on this machine
#                             (e.g. scripts/run.sh device-manager detect)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${GPUSTACK_LOCAL_DIR:-/tmp/gpustack-local}
case ${1:-} in
  "")
    [ "$(id -u)" -eq 0 ] || { echo "run.sh: the local cluster needs root (containerd, runc, network namespaces)" >&2; exit 2; }
    if [ -f "$dir/env" ]; then
      echo "run.sh: a local cluster is already up in $dir: scripts/run.sh down first" >&2
      exit 2
    fi
    scripts/local-cluster.sh up --dir "$dir"
    # shellcheck disable=SC1091
    source "$dir/env"
    echo "[walkthrough] Pods of each shape in namespace walkthrough, then Instances in default" >&2
    python3 scripts/walkthrough.py "$KUBE_BIN/kubectl" "$dir/kubeconfig" "$dir/ssh" \
      "$dir/fake-processes/processes.json" || {
      echo "run.sh: the walkthrough failed; the cluster is still up (worker log: kubectl -n gpustack-system logs deploy/gpustack-operator-worker)" >&2
      exit 1
    }
    cat <<EOT

The local cluster is up. Use it with:
  export KUBECONFIG=$dir/kubeconfig PATH=$KUBE_BIN:$HELM_BIN:\$PATH
  kubectl get instancetypes; kubectl get devices; kubectl -n walkthrough get pods -o wide
  kubectl get instances; kubectl exec sliced-demo -- env
  kubectl get --raw /apis/worker.gpustack.ai/v1/namespaces/default/instances/sliced-demo/metrics
Remove it with: scripts/run.sh down
EOT
    ;;
  down)
    exec scripts/local-cluster.sh down --dir "$dir"
    ;;
  *)
    scripts/bootstrap.sh >&2
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
    cmake --build build -j "$(nproc)" --target gpustack-operator plugins_all >&2
    exec build/bin/gpustack-operator "$@"
    ;;
esac
