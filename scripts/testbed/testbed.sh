#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for integration tests: etcd and kube-apiserver, and
# by flag kube-scheduler, kube-controller-manager, kwok with simulated nodes, Kueue, Helm and a
# real kubelet (scripts/testbed/kubelet.sh), each a
# plain process with its state in one directory. Free ports are picked at start, so several
# control planes can run side by side.
#
#   testbed.sh up --dir D [--scheduler] [--controller-manager] [--kwok-nodes N]
#                 [--node-fixture F] [--kueue] [--helm] [--kubelet] [--all] [--apiserver-arg ARG]...
#                 [--feature-gates A=true,B=true]  (apiserver, scheduler, controller-manager, kubelet)
#                                                         prints D/kubeconfig once healthy
#   testbed.sh down --dir D [--logs-to L]                   stops everything, removes D
#                                                         (keeping the logs in L if given)
#   testbed.sh restart --dir D COMPONENT                    stop, then start with the same flags
#   testbed.sh stop --dir D COMPONENT | start --dir D COMPONENT
#   testbed.sh compact --dir D                              compacts etcd to its newest revision
#
# D/env holds the ports and paths (sourceable); D/logs/<component>.log the output.
set -euo pipefail
umask 077  # the directory holds a system:masters key and kubeconfig
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

die() { echo "testbed: $*" >&2; exit 1; }
say() { echo "testbed: $*" >&2; }

# The header comment above is the usage text.
usage() { sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# N distinct free ports, all held open until every one is chosen, so none repeats.
free_ports() {
  python3 -c 'import socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"
}

# Waits until a command succeeds, up to $1 seconds; names the component and its log on failure.
wait_until() {
  local seconds=$1 component=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ -f "$dir/pids/$component" ] && ! kill -0 "$(cat "$dir/pids/$component")" 2>/dev/null; then
      tail -n 30 "$dir/logs/$component.log" >&2 || true
      die "$component exited during start-up (log: $dir/logs/$component.log)"
    fi
    [ $SECONDS -lt $deadline ] || {
      tail -n 30 "$dir/logs/$component.log" >&2 || true
      die "$component not healthy after ${seconds}s (log: $dir/logs/$component.log)"
    }
    sleep 0.2
  done
}

# --- PKI -------------------------------------------------------------------------------------

make_pki() {
  local pki=$dir/pki
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
      -subj "/CN=gpustack-testbed-ca" 2>/dev/null
    issue() { # name subject san [extended key usage]
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n%s' \
        "$4" "${3:+subjectAltName=$3}" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    issue apiserver "/CN=kube-apiserver" \
      "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc" serverAuth
    issue admin "/O=system:masters/CN=testbed-admin" "" clientAuth
    issue webhook "/CN=testbed-webhooks" "IP:127.0.0.1,DNS:localhost" serverAuth
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # The aggregator's front proxy: its own CA (as kubeadm does), whose client certificate the
    # apiserver presents to aggregated APIs (the worker's v1 API verifies it).
    openssl req -x509 -newkey rsa:2048 -nodes -keyout front-proxy-ca.key -out front-proxy-ca.crt \
      -days 2 -subj "/CN=gpustack-testbed-front-proxy-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout front-proxy-client.key -out front-proxy-client.csr \
      -subj "/CN=front-proxy-client" 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
      >front-proxy-client.ext
    openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key \
      -CAcreateserial -days 2 -extfile front-proxy-client.ext -out front-proxy-client.crt 2>/dev/null
    rm -f front-proxy-client.csr front-proxy-client.ext front-proxy-ca.key front-proxy-ca.srl
    rm -f ca.key ca.srl  # nothing is issued later; the CA key need not outlive the start
  )
}

write_kubeconfig() {
  local b64
  b64() { base64 -w0 <"$1"; }
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(b64 "$dir/pki/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $(b64 "$dir/pki/admin.crt")
    client-key-data: $(b64 "$dir/pki/admin.key")
contexts:
- name: testbed
  context: {cluster: testbed, user: admin, namespace: default}
current-context: testbed
EOF
  chmod 600 "$dir/kubeconfig"
}

# --- components --------------------------------------------------------------------------------

# Writes D/cmd/<component>, the command line that `start` runs, so `restart` reuses it.
define() {
  local component=$1
  shift
  printf '%q ' "$@" >"$dir/cmd/$component"
  echo >>"$dir/cmd/$component"
}

# Is the recorded process alive and ours (its command line names this directory)? A stale pid
# file must never make us signal an unrelated process.
component_pid() {
  local pid
  pid=$(cat "$dir/pids/$1" 2>/dev/null) || return 1
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir" || return 1
  echo "$pid"
}

start_component() {
  local component=$1
  [ -f "$dir/cmd/$component" ] || die "no component $component in $dir"
  ! component_pid "$component" >/dev/null || die "$component is already running"
  # setsid: its own session, so it survives the caller (ctest waits for no one); output to a file.
  setsid bash -c "exec $(cat "$dir/cmd/$component")" >>"$dir/logs/$component.log" 2>&1 </dev/null &
  echo $! >"$dir/pids/$component"
}

stop_component() {
  local component=$1 pid
  if pid=$(component_pid "$component"); then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pids/$component"
}

etcd_healthy() { curl -sf "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
apiserver_healthy() {
  curl -sf --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT/readyz" | grep -q ok
}
kubectl_() { "$KUBE_BIN/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }

wait_healthy() {
  case $1 in
    etcd) wait_until 60 etcd etcd_healthy ;;
    kube-apiserver) wait_until 120 kube-apiserver apiserver_healthy ;;
    kube-scheduler)
      wait_until 60 kube-scheduler curl -skf "https://127.0.0.1:$SCHEDULER_PORT/healthz" ;;
    kube-controller-manager)
      wait_until 90 kube-controller-manager curl -skf "https://127.0.0.1:$KCM_PORT/healthz" ;;
    kwok) wait_until 60 kwok curl -sf "http://127.0.0.1:$KWOK_PORT/healthz" ;;
    kueue) wait_until 120 kueue curl -sf "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz" ;;
  esac
}

define_core() {
  define etcd "$ETCD_BIN/etcd" --name testbed --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "testbed=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --quota-backend-bytes=2147483648 --log-level=warn
  define kube-apiserver "$KUBE_BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" --authorization-mode Node,RBAC --allow-privileged=true \
    --service-cluster-ip-range 10.96.0.0/16 \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --endpoint-reconciler-type none --cert-dir "$dir/pki/apiserver-generated" \
    --kubelet-client-certificate "$dir/pki/admin.crt" --kubelet-client-key "$dir/pki/admin.key" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --requestheader-client-ca-file "$dir/pki/front-proxy-ca.crt" \
    --requestheader-allowed-names front-proxy-client --requestheader-username-headers X-Remote-User \
    --requestheader-group-headers X-Remote-Group --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$dir/pki/front-proxy-client.crt" \
    --proxy-client-key-file "$dir/pki/front-proxy-client.key" --enable-aggregator-routing=true \
    --enable-priority-and-fairness=false --v=0 ${FEATURE_GATES:+--feature-gates "$FEATURE_GATES"} \
    "${APISERVER_ARGS[@]}"
}

define_optional() {
  if [ "$WITH_SCHEDULER" = 1 ]; then
    define kube-scheduler "$KUBE_BIN/kube-scheduler" --kubeconfig "$dir/kubeconfig" \
      --leader-elect=false --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" \
      --authentication-kubeconfig "$dir/kubeconfig" --authorization-kubeconfig "$dir/kubeconfig" \
      ${FEATURE_GATES:+--feature-gates "$FEATURE_GATES"}
  fi
  if [ "$WITH_KCM" = 1 ]; then
    define kube-controller-manager "$KUBE_BIN/kube-controller-manager" --kubeconfig "$dir/kubeconfig" \
      --leader-elect=false --bind-address 127.0.0.1 --secure-port "$KCM_PORT" \
      --authentication-kubeconfig "$dir/kubeconfig" --authorization-kubeconfig "$dir/kubeconfig" \
      --authorization-always-allow-paths /healthz,/readyz,/livez,/metrics \
      --root-ca-file "$dir/pki/ca.crt" --service-account-private-key-file "$dir/pki/sa.key" \
      --use-service-account-credentials=false --controllers '*,-nodeipam' \
      ${FEATURE_GATES:+--feature-gates "$FEATURE_GATES"}
  fi
  if [ "$KWOK_NODES" -gt 0 ]; then
    local stages=$KWOK_BIN/../share/kwok
    # The plain kwok binary has no default stages: nodes come up Ready, pods run, Job pods finish.
    {
      for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        echo "---"
        cat "$stages/$f"
      done
    } >"$dir/kwok.yaml"
    define kwok "$KWOK_BIN/kwok" --kubeconfig "$dir/kubeconfig" --config "$dir/kwok.yaml" \
      --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
      --node-ip 127.0.0.1 --cidr 10.244.0.0/16 --node-lease-duration-seconds 40 \
      --server-address "127.0.0.1:$KWOK_PORT"
  fi
  if [ "$WITH_KUEUE" = 1 ]; then
    define kueue "$KUEUE_BIN/kueue" --config "$dir/kueue/config.yaml" --kubeconfig "$dir/kubeconfig" \
      --feature-gates VisibilityOnDemand=false
  fi
}

create_kwok_nodes() {
  local fixture=${NODE_FIXTURE:-$repo/testbed/fixtures/kwok-node.json}
  [ -f "$fixture" ] || die "no node fixture $fixture"
  python3 - "$fixture" "$KWOK_NODES" >"$dir/kwok-nodes.json" <<'EOF'
import json, sys
template = json.load(open(sys.argv[1]))
items = []
for i in range(int(sys.argv[2])):
    node = json.loads(json.dumps(template))
    name = f"kwok-node-{i}"
    node.setdefault("metadata", {})["name"] = name
    labels = node["metadata"].setdefault("labels", {})
    labels["kubernetes.io/hostname"] = name
    labels["type"] = "kwok"  # what the readiness wait selects on
    node["metadata"].setdefault("annotations", {})["kwok.x-k8s.io/node"] = "fake"
    spec = node.setdefault("spec", {})
    taints = spec.setdefault("taints", [])
    if not any(t.get("key") == "kwok.x-k8s.io/node" for t in taints):
        taints.append({"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"})
    items.append(node)
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
EOF
  kubectl_ apply -f "$dir/kwok-nodes.json" >/dev/null
  say "waiting for $KWOK_NODES kwok nodes to be Ready"
  wait_until 60 kwok bash -c "[ \"\$($KUBE_BIN/kubectl --kubeconfig $dir/kubeconfig get nodes \
    -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}' \
    | grep -c True)\" -ge $KWOK_NODES ]"
}

# The operator's credit transformations (docs/behaviour.md §5.1) and exclusions: the `resources` section
# of the Kueue configuration the chart ships (charts/gpustack-operator/values.yaml), so the
# testbed's Kueue runs what a `helm install` would.
kueue_resources() {
  python3 - "$repo/charts/gpustack-operator/values.yaml" <<'PY'
import sys, yaml
values = yaml.safe_load(open(sys.argv[1]))
config = yaml.safe_load(values["kueue"]["managerConfig"]["controllerManagerConfigYaml"])
print(yaml.safe_dump({"resources": config["resources"]}, sort_keys=False), end="")
PY
}

prepare_kueue() {
  [ "$(id -u)" -eq 0 ] || die "--kueue needs root: Kueue v0.17 reads its metrics certificate from /etc/kueue/metrics/certs"
  local share=$KUEUE_BIN/../share/kueue certs=$dir/kueue/certs
  mkdir -p "$certs" /etc/kueue/metrics/certs
  cp "$dir/pki/webhook.crt" "$certs/tls.crt"
  cp "$dir/pki/webhook.key" "$certs/tls.key"
  cp "$certs/tls.crt" "$certs/tls.key" /etc/kueue/metrics/certs/
  cat >"$dir/kueue/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
leaderElection: {leaderElect: false}
health: {healthProbeBindAddress: "127.0.0.1:$KUEUE_HEALTH_PORT"}
metrics: {bindAddress: "127.0.0.1:$KUEUE_METRICS_PORT"}
webhook: {host: 127.0.0.1, port: $KUEUE_WEBHOOK_PORT, certDir: "$certs"}
internalCertManagement: {enable: false}
manageJobsWithoutQueueName: false
integrations: {frameworks: ["batch/job", "pod"]}
EOF
  kueue_resources >>"$dir/kueue/config.yaml"
  kubectl_ create namespace kueue-system >/dev/null
  # Server-side: the CRDs are too large for client-side apply's annotation.
  kubectl_ apply --server-side -f "$share/crd" >/dev/null
  # Kueue exits at start-up if its kinds are not served yet.
  kubectl_ wait --for condition=established --timeout 60s -f "$share/crd" >/dev/null
  python3 "$here/kueue_webhooks.py" "$share/webhooks.yaml" "$KUEUE_WEBHOOK_PORT" "$dir/pki/ca.crt" \
    >"$dir/kueue/webhooks.json"
}

apply_kueue_webhooks() {
  # Registered only once Kueue serves them: a Fail-policy webhook with no server blocks writes.
  kubectl_ apply -f "$dir/kueue/webhooks.json" >/dev/null
  # The apiserver picks webhook configurations up asynchronously: wait until a queued Pod
  # (a server-side dry run) comes back gated by Kueue.
  printf '%s' '{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "testbed-kueue-probe", "namespace": "default",
              "labels": {"kueue.x-k8s.io/queue-name": "testbed-probe"}},
 "spec": {"containers": [{"name": "c", "image": "busybox"}]}}' >"$dir/kueue/probe-pod.json"
  wait_until 60 kueue bash -c "$KUBE_BIN/kubectl --kubeconfig $dir/kubeconfig create --dry-run=server \
    -f $dir/kueue/probe-pod.json -o jsonpath='{.spec.schedulingGates[*].name}' | grep -q kueue.x-k8s.io/admission"
}

# --- commands ----------------------------------------------------------------------------------

load_env() {
  [ -f "$dir/env" ] || die "no testbed in $dir (no $dir/env)"
  dir=$(cd "$dir" && pwd)
  # shellcheck disable=SC1091
  source "$dir/env"
}

cmd_up() {
  if [ -e "$dir/env" ]; then
    say "$dir holds a testbed left by an earlier run: stopping it first"
    cmd_down
  fi
  local projects=(etcd kubernetes)
  [ "$KWOK_NODES" -gt 0 ] && projects+=(kwok)
  [ "$WITH_KUEUE" = 1 ] && projects+=(kueue)
  [ "$WITH_HELM" = 1 ] && projects+=(helm)
  [ "$WITH_KUBELET" = 1 ] && projects+=(kube-proxy)
  local bins
  mapfile -t bins < <("$here/build-tools.sh" "${projects[@]}")
  [ ${#bins[@]} -eq ${#projects[@]} ] || die "building ${projects[*]} failed"
  ETCD_BIN=${bins[0]} KUBE_BIN=${bins[1]} KWOK_BIN="" KUEUE_BIN="" HELM_BIN="" KUBE_PROXY_BIN=""
  local i=2
  [ "$KWOK_NODES" -gt 0 ] && { KWOK_BIN=${bins[$i]}; i=$((i + 1)); }
  [ "$WITH_KUEUE" = 1 ] && { KUEUE_BIN=${bins[$i]}; i=$((i + 1)); }
  [ "$WITH_HELM" = 1 ] && { HELM_BIN=${bins[$i]}; i=$((i + 1)); }
  [ "$WITH_KUBELET" = 1 ] && KUBE_PROXY_BIN=${bins[$i]}

  mkdir -p "$dir"/{cmd,pids,logs,kueue}
  dir=$(cd "$dir" && pwd)
  read -r ETCD_PORT ETCD_PEER_PORT APISERVER_PORT SCHEDULER_PORT KCM_PORT KWOK_PORT \
    KUEUE_WEBHOOK_PORT KUEUE_HEALTH_PORT KUEUE_METRICS_PORT < <(free_ports 9)
  local v
  for v in ETCD_BIN KUBE_BIN KWOK_BIN KUEUE_BIN HELM_BIN KUBE_PROXY_BIN ETCD_PORT ETCD_PEER_PORT APISERVER_PORT \
    SCHEDULER_PORT KCM_PORT KWOK_PORT KUEUE_WEBHOOK_PORT KUEUE_HEALTH_PORT KUEUE_METRICS_PORT \
    WITH_SCHEDULER WITH_KCM KWOK_NODES WITH_KUEUE WITH_HELM WITH_KUBELET FEATURE_GATES; do
    printf '%s=%q\n' "$v" "${!v}"
  done >"$dir/env"
  printf 'KUBECONFIG=%q\n' "$dir/kubeconfig" >>"$dir/env"

  local started=$SECONDS
  # A failed start leaves nothing running (the directory and its logs stay for a look).
  trap '[ ! -d "$dir/node" ] || "$here/kubelet.sh" down --dir "$dir"; stop_all' EXIT
  make_pki
  write_kubeconfig
  define_core
  define_optional
  start_component etcd
  wait_healthy etcd
  start_component kube-apiserver
  wait_healthy kube-apiserver
  # The default namespace appears shortly after readyz; tests expect it.
  wait_until 30 kube-apiserver kubectl_ get namespace default
  local c
  for c in kube-scheduler kube-controller-manager kwok; do
    if [ -f "$dir/cmd/$c" ]; then
      start_component "$c"
      wait_healthy "$c"
    fi
  done
  [ "$KWOK_NODES" -gt 0 ] && create_kwok_nodes
  if [ "$WITH_KUEUE" = 1 ]; then
    prepare_kueue
    start_component kueue
    wait_healthy kueue
    apply_kueue_webhooks
  fi
  if [ "$WITH_KUBELET" = 1 ]; then
    say "a real node: $("$here/kubelet.sh" up --dir "$dir")"
  fi
  trap - EXIT
  say "up in $((SECONDS - started)) s: $(ls "$dir/pids" | tr '\n' ' ')"
  echo "$dir/kubeconfig"
}

stop_all() {
  local c
  # Reverse start order: clients before the apiserver, the apiserver before etcd.
  for c in kueue kwok kube-controller-manager kube-scheduler kube-apiserver etcd; do
    stop_component "$c"
  done
}

cmd_down() {
  [ -d "$dir" ] || return 0
  # Only a directory this script made is removed.
  [ -f "$dir/env" ] && [ -d "$dir/pids" ] || die "$dir is not a testbed directory; not removing it"
  dir=$(cd "$dir" && pwd)
  # A real node (kubelet.sh) goes first: it needs the apiserver to drain its Pods.
  [ ! -d "$dir/node" ] || "$here/kubelet.sh" down --dir "$dir"
  stop_all
  if [ -n "$LOGS_TO" ]; then
    rm -rf "$LOGS_TO"
    mkdir -p "$LOGS_TO"
    cp -r "$dir/logs/." "$LOGS_TO/"
  fi
  rm -rf "$dir"
}

cmd_compact() {
  load_env
  local revision
  revision=$(curl -sf -X POST "http://127.0.0.1:$ETCD_PORT/v3/kv/range" -d '{"key":"Lw=="}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
  curl -sf -X POST "http://127.0.0.1:$ETCD_PORT/v3/kv/compaction" \
    -d "{\"revision\":\"$revision\",\"physical\":true}" >/dev/null
  echo "$revision"
}

[ $# -ge 1 ] && [ "$1" != -h ] && [ "$1" != --help ] || usage
command=$1
shift
LOGS_TO="" WITH_KUBELET=0
dir="" WITH_SCHEDULER=0 WITH_KCM=0 KWOK_NODES=0 WITH_KUEUE=0 WITH_HELM=0 NODE_FIXTURE="" component=""
APISERVER_ARGS=() FEATURE_GATES=""
while [ $# -gt 0 ]; do
  case $1 in
    --dir) dir=$2; shift ;;
    --scheduler) WITH_SCHEDULER=1 ;;
    --controller-manager) WITH_KCM=1 ;;
    --kwok-nodes) KWOK_NODES=$2; shift ;;
    --node-fixture) NODE_FIXTURE=$2; shift ;;
    --kueue) WITH_KUEUE=1 ;;
    --helm) WITH_HELM=1 ;;
    --kubelet) WITH_KUBELET=1 ;;
    --logs-to) LOGS_TO=$2; shift ;;
    --apiserver-arg) APISERVER_ARGS+=("$2"); shift ;;
    --apiserver-arg=*) APISERVER_ARGS+=("${1#--apiserver-arg=}") ;;
    --feature-gates) FEATURE_GATES=$2; shift ;;
    --all) WITH_SCHEDULER=1 WITH_KCM=1 WITH_KUEUE=1 WITH_HELM=1; [ "$KWOK_NODES" -gt 0 ] || KWOK_NODES=2 ;;
    -h | --help) usage ;;
    -*) die "unknown flag $1" ;;
    *) component=$1 ;;
  esac
  shift
done
[ -n "$dir" ] || die "--dir is required"
[[ $KWOK_NODES =~ ^[0-9]+$ ]] || die "--kwok-nodes wants a number, got '$KWOK_NODES'"

case $command in
  up) cmd_up ;;
  down) cmd_down ;;
  compact) cmd_compact ;;
  stop | start | restart)
    load_env
    [ -n "$component" ] || die "$command needs a component"
    [ "$command" = start ] || stop_component "$component"
    if [ "$command" != stop ]; then start_component "$component"; wait_healthy "$component"; fi
    ;;
  *) usage ;;
esac
