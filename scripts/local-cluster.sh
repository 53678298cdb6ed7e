#!/usr/bin/env bash
# A local cluster with everything running for real (the README's main job, `scripts/run.sh`):
# the test control plane (etcd, kube-apiserver, scheduler, controller-manager, Kueue, kwok) with
# a real node (kubelet on containerd) that simulates 4 NVIDIA T4 cards (the fake NVML and a
# fixture sysfs tree, mounted by the values file `values` prints, never by the chart's defaults),
# three kwok nodes whose Devices carry an A10G, 8 H100 (MIG mixed) and 2 AMD MI210, the images
# built here and imported into the node, and the chart installed from this checkout.
#
#   local-cluster.sh up [--dir D]       bring it up (D: ${GPUSTACK_LOCAL_DIR:-/tmp/gpustack-local})
#   local-cluster.sh values --dir D     the values file for a testbed in D (tests use it)
#   local-cluster.sh down [--dir D]     remove it all
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
command=${1:-}
shift || true
dir=${GPUSTACK_LOCAL_DIR:-/tmp/gpustack-local}
while [ $# -gt 0 ]; do
  case $1 in
    --dir) dir=$2; shift ;;
    *) echo "local-cluster.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
release=gpustack-operator
namespace=gpustack-system
node=testbed-node
node_fixture=nvidia-t4x4

step_number=0 step_name="" step_log=""
step() { # name [log file that explains a failure]
  step_number=$((step_number + 1))
  step_name=$1 step_log=${2:-}
  printf '[%d] %s\n' "$step_number" "$1" >&2
}
on_error() {
  local status=$?
  echo "local-cluster.sh: step $step_number failed: $step_name (status $status)" >&2
  if [ -n "$step_log" ] && [ -f "$step_log" ]; then
    echo "--- last lines of $step_log ---" >&2
    tail -n 25 "$step_log" >&2
  fi
  [ ! -f "$dir/env" ] || echo "what was started stays up for a look; scripts/run.sh down removes it" >&2
  exit "$status"
}

kubectl_() { "$KUBE_BIN/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
helm_() { "$HELM_BIN/helm" --kubeconfig "$dir/kubeconfig" "$@"; }
load_env() {
  [ -f "$dir/env" ] || { echo "local-cluster.sh: no cluster in $dir" >&2; exit 2; }
  dir=$(cd "$dir" && pwd)
  # shellcheck disable=SC1091
  source "$dir/env"
}

# The values that make the chart run on this machine's test control plane: its apiserver listens
# on loopback (kube-proxy serves only NodePorts, on the node's address), so the worker and the
# daemon use the node's network and reach it at 127.0.0.1; the daemon sees the simulated cards;
# the example plugin comes as an image.
cmd_values() {
  load_env
  local ports worker_port webhook_port dm_port
  read -r worker_port webhook_port dm_port < <(python3 -c 'import socket
held = [socket.socket() for _ in range(3)]
for s in held: s.bind(("0.0.0.0", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))')
  # No process on the simulated cards until a test says otherwise (the fixture's own rows name
  # pids of another machine, which no Pod here owns).
  mkdir -p "$dir/fake-processes"
  [ -f "$dir/fake-processes/processes.json" ] ||
    python3 -c 'import json, sys
cards = json.load(open(sys.argv[1]))["nvml"]["devices"]
print(json.dumps({c["uuid"]: [] for c in cards}))' "tests/fixtures/nodes/$node_fixture.json" \
      >"$dir/fake-processes/processes.json"
  # A node on containerd 2 (kubelet.sh, GPUSTACK_TESTBED_CONTAINERD2) keeps its config here: the
  # device manager reads it for CDI injection's auto rules.
  local containerd_dir="  # containerd's config: the host's /etc/containerd"
  [ ! -f "$dir/node/containerd/config.toml" ] ||
    containerd_dir="  containerdConfigDir: $dir/node/containerd"
  local example_version
  example_version=$(sed -n 's/^project(gpustack_example_plugin VERSION \([0-9.]*\).*/\1/p' \
    sdk/examples/example/CMakeLists.txt)
  cat <<YAML
# For the test control plane in $dir only (scripts/local-cluster.sh values).
global: {imagePullPolicy: Never}
kueue: {enabled: false}   # the testbed runs Kueue itself, with the same configuration
plugins:
  nodes: {$node: {example: "on"}}
  # The simulated node's slice enforcer: the HAMi-core test double (tests/fakes/enforcement), which
  # caps the fake libcuda the way HAMi-core caps the real one (docs/enforcement.md).
  config:
    nvidia: {enforcer: {hostPath: $repo/build/tests/fakes/enforcement/hami-core}}
  thirdParty:
    - name: example
      image: {repository: gpustack/gpustack-plugin-example, tag: v$example_version, pullPolicy: Never}
      env:
        - {name: EXAMPLESMI_DEVICES, value: "2"}
        - {name: GPUSTACK_EXAMPLE_LIBRARY, value: /opt/gpustack/plugins.d/libexamplesmi.so.1}
worker:
  replicas: 1
  hostNetwork: true
  securePort: $worker_port
  webhookPort: $webhook_port
  tolerations: []
  affinity: &real-node   # kwok nodes run no containers
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: type, operator: NotIn, values: [kwok]}]}]
  env:
    - &api-host {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}
    - &api-port {name: KUBERNETES_SERVICE_PORT, value: "$APISERVER_PORT"}
    # What each gate decided, in kubectl logs (the default, warn, says only what went wrong).
    - &log-level {name: GPUSTACK_LOG_LEVEL, value: info}
deviceManager:
  hostNetwork: true
  createRuntimeClasses: false  # the node's containerd has runc only: no vendor runtime to name
  securePort: $dm_port
  podResourcesSocket: $dir/node/kubelet/pod-resources/kubelet.sock
  dataDir: $dir/node/gpustack
$containerd_dir
  affinity: *real-node
  env:
    - *api-host
    - *api-port
    - *log-level
    - {name: GPUSTACK_NVIDIA_LIBRARY, value: /opt/fake/vendor/libnvidia-ml.so.1}
    # CDI where the node allows; the test node's containerd (Debian's 1.6) has none, and the
    # device manager's log says so.
    - {name: GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY, value: auto}
    - {name: GPUSTACK_FAKE_FIXTURE, value: /opt/fake/nodes/$node_fixture.json}
    - {name: GPUSTACK_SYSFS_ROOT, value: /opt/fake/sys}
    # The processes on the simulated cards: $dir/fake-processes/processes.json, which a test
    # rewrites with the host pids of the containers it starts (tests/fakes/vendor).
    - {name: GPUSTACK_FAKE_PROCESSES, value: /opt/fake/processes/processes.json}
  extraArgs: [--monitor-period=5]
  extraVolumes:
    - {name: fake-vendor, hostPath: {path: $repo/build/tests/fakes/vendor, type: Directory}}
    - {name: fake-nodes, hostPath: {path: $repo/tests/fixtures/nodes, type: Directory}}
    - {name: fake-sys, hostPath: {path: $repo/build/fixtures/nodes/$node_fixture/sys, type: Directory}}
    - {name: fake-processes, hostPath: {path: $dir/fake-processes, type: DirectoryOrCreate}}
  extraVolumeMounts:
    - {name: fake-vendor, mountPath: /opt/fake/vendor, readOnly: true}
    - {name: fake-nodes, mountPath: /opt/fake/nodes, readOnly: true}
    - {name: fake-sys, mountPath: /opt/fake/sys, readOnly: true}
    - {name: fake-processes, mountPath: /opt/fake/processes, readOnly: true}
YAML
}

# Devices objects for the kwok nodes, as their node daemons would publish them.
publish_kwok_devices() {
  local i=0 fixture
  for fixture in nvidia-a10g nvidia-h100x8-mig-mixed amd-mi210x2; do
    python3 - "kwok-node-$i" "tests/fixtures/nodes/expected/$fixture.devices.json" <<'PY' |
import json, sys
print(json.dumps({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
                  "metadata": {"name": sys.argv[1]}, "spec": json.load(open(sys.argv[2]))}))
PY
      kubectl_ apply --server-side --field-manager gpustack-local-cluster -f - >/dev/null
    i=$((i + 1))
  done
}

# Does the Devices object of node $1 hold the cards named, e.g. nvidia:4 example:2?
devices_has() {
  local name=$1
  shift
  kubectl_ get devices "$name" -o json | python3 -c '
import collections, json, sys
spec = json.load(sys.stdin).get("spec", {})
count = collections.Counter()
for g in spec.get("groups", []):
    count[g.get("manufacturer")] += len(g.get("accelerators", []))
sys.exit(0 if all(count[m] == int(n) for m, n in (a.split(":") for a in sys.argv[1:])) else 1)' "$@"
}

wait_for() { # seconds, description, command...
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { echo "local-cluster.sh: timed out after ${seconds}s waiting for $what" >&2; return 1; }
    sleep 1
  done
}

cmd_up() {
  trap on_error ERR
  local started=$SECONDS
  step "installing Debian packages (scripts/bootstrap.sh)"
  scripts/bootstrap.sh >/dev/null
  step "building the operator, the plugins and the simulated hardware" "$dir.build.log"
  mkdir -p "$(dirname "$dir")"
  {
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
    cmake --build build -j "$(nproc)" --target gpustack-operator plugins_all gpustack-plugin-install \
      fake_vendor_libraries fixture_trees test_enforcer
  } >"$dir.build.log" 2>&1
  step "building the images (scripts/images.sh)" "$dir.images.log"
  scripts/images.sh >"$dir.images.log" 2>&1
  step "building the control plane's tools, once (Go; cached in ~/.cache/gpustack-testbed)" "$dir.tools.log"
  scripts/testbed/build-tools.sh etcd kubernetes kube-proxy kwok kueue helm >"$dir.tools.log" 2>&1
  step "packaging the chart's subcharts (scripts/chart-deps.sh)" "$dir.tools.log"
  scripts/chart-deps.sh >>"$dir.tools.log" 2>&1
  step "starting the control plane, Kueue, 3 kwok nodes and a real node" "$dir.testbed.log"
  scripts/testbed/testbed.sh up --dir "$dir" --all --kwok-nodes 3 --kubelet \
    --apiserver-arg=--enable-aggregator-routing=true >"$dir.testbed.log" 2>&1
  load_env
  step "importing the images into the node's containerd"
  scripts/testbed/kubelet.sh import --dir "$dir" build/images/gpustack-operator.tar \
    build/images/gpustack-ssh-server.tar build/images/gpustack-plugin-example.tar
  step "helm install $release (charts/gpustack-operator, values: $dir/values.yaml)" "$dir/logs/helm.log"
  cmd_values >"$dir/values.yaml"
  local t0=$SECONDS
  helm_ install "$release" charts/gpustack-operator -n "$namespace" --create-namespace \
    -f "$dir/values.yaml" --wait --timeout 5m >"$dir/logs/helm.log" 2>&1 ||
    { kubectl_ -n "$namespace" logs --tail 20 -l app.kubernetes.io/component=device-manager --all-containers >>"$dir/logs/helm.log" 2>&1 || true
      kubectl_ -n "$namespace" logs --tail 20 -l app.kubernetes.io/component=worker --all-containers >>"$dir/logs/helm.log" 2>&1 || true
      false; }
  echo "    installed in $((SECONDS - t0)) s" >&2
  step "waiting for the node's Devices (4 T4 and the example plugin's 2 cards)" "$dir/logs/helm.log"
  wait_for 120 "the Devices of $node" devices_has "$node" nvidia:4 example:2
  step "publishing the kwok nodes' Devices (A10G, 8xH100 MIG mixed, 2xMI210)"
  publish_kwok_devices
  step "waiting for the pools (InstanceTypes)"
  wait_for 120 "the T4 pool" bash -c "$KUBE_BIN/kubectl --kubeconfig $dir/kubeconfig get instancetypes -o name | grep -qi t4"
  echo "local cluster up in $((SECONDS - started)) s" >&2
}

cmd_down() {
  if [ ! -f "$dir/env" ]; then echo "local-cluster.sh: no cluster in $dir" >&2; return 0; fi
  load_env
  helm_ uninstall "$release" -n "$namespace" --wait --timeout 60s >/dev/null 2>&1 || true
  scripts/testbed/testbed.sh down --dir "$dir"
  rm -f "$dir".*.log
  echo "local-cluster.sh: removed $dir" >&2
}

case $command in
  up) cmd_up ;;
  values) cmd_values ;;
  down) cmd_down ;;
  *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
