#!/usr/bin/env bash
# Tier B of the test control plane: a real node. Starts Debian's containerd (with runc and the
# CNI bridge plugin), the testbed's kubelet, registered to a running testbed's apiserver, and
# kube-proxy (iptables; NodePorts on the node's address, as Instances' SSH uses them), with
# a local image (busybox-static and a static pause binary) imported into containerd, so real
# Pods run. Root only; creates a bridge (tbcni0) and network namespaces, removed by `down`.
#
#   kubelet.sh up --dir D       (D: a testbed started by testbed.sh up --scheduler ...)
#   kubelet.sh down --dir D
#   kubelet.sh restart --dir D  (the kubelet alone; Pods keep running)
#   kubelet.sh import --dir D IMAGE.tar...   (OCI archives, e.g. from scripts/images.sh)
#
# Pods use image docker.io/library/busybox:local with imagePullPolicy: Never.
#
# GPUSTACK_TESTBED_CONTAINERD2=1 at `up` runs containerd 2 (built by build-tools.sh containerd)
# instead, with CDI on and its config at <D>/node/containerd/config.toml: the node configuration
# where CDI devices reach containers (Debian's 1.6 has no CDI).
set -euo pipefail
umask 077
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "kubelet.sh: $*" >&2; exit 1; }

[ $# -ge 3 ] && [ "$2" = --dir ] || die "usage: kubelet.sh up|down|restart|import --dir D"
command=$1
dir=$(cd "$3" && pwd)
shift 3
[ -f "$dir/env" ] || die "no testbed in $dir"
# shellcheck disable=SC1091
source "$dir/env"
node=$dir/node
sock=$node/containerd.sock
node_name=testbed-node
kubectl_() { "$KUBE_BIN/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
ctr_() { ctr -a "$sock" -n k8s.io "$@"; }

ours() { # pid file -> pid, if alive and started for this directory
  local pid
  pid=$(cat "$dir/pids/$1" 2>/dev/null) || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir" || return 1
  echo "$pid"
}

make_image() {
  cat >"$node/pause.c" <<'EOF'
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
static void done(int s) { (void)s; exit(0); }
int main(void) { signal(SIGTERM, done); signal(SIGINT, done); for (;;) pause(); }
EOF
  gcc -static -O2 -o "$node/pause" "$node/pause.c"
  # Two images (scripts/images/oci_image.py): the sandbox's pause, and a busybox for test Pods.
  local oci=$here/../images/oci_image.py link links=()
  for link in sh sleep echo cat ls env; do links+=(--symlink "bin/$link:busybox"); done
  python3 "$oci" --ref registry.k8s.io/pause:3.10 --out "$node/pause.tar" --entrypoint /pause \
    --env PATH=/bin --file "$node/pause:/pause:0755" 2>/dev/null
  python3 "$oci" --ref docker.io/library/busybox:local --out "$node/busybox.tar" \
    --entrypoint /bin/sh --env PATH=/bin --file /bin/busybox:/bin/busybox:0755 "${links[@]}" \
    --dir tmp:1777 --dir etc --dir proc --dir sys --dir dev --file "$node/pause:/pause:0755" 2>/dev/null
}

# Starts the kubelet (its config already written) and waits until the node is Ready.
start_kubelet() {
  local ip=$1
  setsid "$KUBE_BIN/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$dir/kubeconfig" \
    --root-dir "$node/kubelet" --cert-dir "$node/pki" --hostname-override "$node_name" \
    --node-ip "$ip" >>"$dir/logs/kubelet.log" 2>&1 </dev/null &
  echo $! >"$dir/pids/kubelet"
  for _ in $(seq 120); do
    [ "$(kubectl_ get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && break
    ours kubelet >/dev/null || { tail -20 "$dir/logs/kubelet.log" >&2; die "kubelet exited"; }
    sleep 0.5
  done
  [ "$(kubectl_ get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ] ||
    die "node $node_name not Ready (log: $dir/logs/kubelet.log)"
}

# Stops the kubelet alone (its Pods keep running, as on a real node) and starts it again: it
# removes every socket in the device-plugin directory and recreates its own.
cmd_restart() {
  local pid ip
  pid=$(ours kubelet) || die "no kubelet runs for $dir"
  ip=$(awk '/^address:/ {print $2}' "$node/kubelet.yaml")
  local sock_dir=/var/lib/kubelet/device-plugins before
  before=$(stat -c '%i %.9Z' "$sock_dir/kubelet.sock" 2>/dev/null || echo none)
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$pid" 2>/dev/null || kill -KILL "$pid"
  start_kubelet "$ip"
  # Ready in the API may be the old kubelet's word: wait for the new one's device-plugin socket.
  for _ in $(seq 200); do
    [ "$(stat -c '%i %.9Z' "$sock_dir/kubelet.sock" 2>/dev/null || echo none)" != "$before" ] &&
      [ -S "$sock_dir/kubelet.sock" ] && return 0
    sleep 0.1
  done
  die "the restarted kubelet did not recreate $sock_dir/kubelet.sock"
}

cmd_up() {
  [ "$(id -u)" -eq 0 ] || die "needs root (containerd, runc, network namespaces)"
  for tool in containerd runc ctr busybox gcc; do
    command -v "$tool" >/dev/null || die "$tool is missing: apt-get install containerd runc containernetworking-plugins busybox-static iptables"
  done
  ! ours kubelet >/dev/null || die "a kubelet already runs for $dir"
  mkdir -p "$node"/{root,state,cni,ipam,kubelet,pki}
  make_image
  cat >"$node/containerd.toml" <<EOF
version = 2
root = "$node/root"
state = "$node/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  # This VM's root lacks CAP_SYS_RESOURCE: a sandbox's oom_score_adj of -998 would fail in runc.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
EOF
  cat >"$node/cni/10-bridge.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "testbed", "plugins": [
  {"type": "bridge", "bridge": "tbcni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$node/ipam", "ranges": [[{"subnet": "10.88.0.0/16"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  # umask 022: containerd makes each container's root directory with it, and a non-root
  # container user must be able to enter / (the testbed directory itself stays private).
  local containerd=containerd config=$node/containerd.toml
  if [ "${GPUSTACK_TESTBED_CONTAINERD2:-0}" = 1 ]; then
    local bin
    bin=$("$here/build-tools.sh" containerd | tail -1)
    containerd=$bin/containerd config=$node/containerd/config.toml
    mkdir -p "$node/containerd"
    # Its shim beside it comes first on PATH; CDI specs in the usual directories.
    cat >"$config" <<EOF
version = 3
root = "$node/root"
state = "$node/state"
[grpc]
  address = "$sock"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "registry.k8s.io/pause:3.10"
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$node/cni"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      SystemdCgroup = false
EOF
    export PATH=$bin:$PATH
  fi
  (umask 022 && exec setsid "$containerd" --config "$config") >>"$dir/logs/containerd.log" 2>&1 </dev/null &
  echo $! >"$dir/pids/containerd"
  for _ in $(seq 100); do ctr_ version >/dev/null 2>&1 && break; sleep 0.1; done
  ctr_ images import "$node/pause.tar" >/dev/null
  ctr_ images import "$node/busybox.tar" >/dev/null
  local ip
  # The kubelet refuses a loopback node IP: the first global IPv4 address.
  ip=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
  [ -n "$ip" ] || die "no global IPv4 address for the node"
  cat >"$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$sock
failSwapOn: false
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: $dir/pki/ca.crt}}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
protectKernelDefaults: false
resolvConf: /etc/resolv.conf
address: $ip
EOF
  # The testbed's feature gates (testbed.sh --feature-gates), as the kubelet's config spells them.
  if [ -n "${FEATURE_GATES:-}" ]; then
    echo "featureGates:" >>"$node/kubelet.yaml"
    tr ',' '\n' <<<"$FEATURE_GATES" | sed 's/^\(.*\)=\(.*\)$/  \1: \2/' >>"$node/kubelet.yaml"
  fi
  start_kubelet "$ip"
  start_proxy "$ip"
  echo "$node_name"
}

# kube-proxy in iptables mode: Services' NodePorts on the node's address. Stopped, and its rules
# removed, by `down`.
start_proxy() {
  local ip=$1 healthz metrics
  [ -n "${KUBE_PROXY_BIN:-}" ] || return 0
  read -r healthz metrics < <(python3 -c 'import socket
held = [socket.socket() for _ in range(2)]
for s in held: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))')
  cat >"$node/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $dir/kubeconfig}
hostnameOverride: $node_name
bindAddress: $ip
mode: iptables
nodePortAddresses: ["$ip/32"]
healthzBindAddress: "127.0.0.1:$healthz"
metricsBindAddress: "127.0.0.1:$metrics"
conntrack: {maxPerCore: 0}
EOF
  setsid "$KUBE_PROXY_BIN/kube-proxy" --config "$node/kube-proxy.yaml" \
    >>"$dir/logs/kube-proxy.log" 2>&1 </dev/null &
  echo $! >"$dir/pids/kube-proxy"
}

cmd_down() {
  # Pods first, so the kubelet tears down their sandboxes and the CNI releases their addresses.
  if ours kubelet >/dev/null; then
    kubectl_ delete pods --all-namespaces --field-selector "spec.nodeName=$node_name" --grace-period=1 \
      --wait=false >/dev/null 2>&1 || true
    # Gone from the API once the kubelet has stopped them; then no container task is left.
    for _ in $(seq 60); do
      [ -z "$(kubectl_ get pods --all-namespaces --field-selector "spec.nodeName=$node_name" -o name 2>/dev/null)" ] &&
        [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  local c pid
  for c in kube-proxy kubelet containerd; do
    # With the kubelet gone nothing starts containers again: end those left (a DaemonSet's or a
    # Deployment's Pods come back while the others drain), or they outlive their shims.
    if [ "$c" = containerd ] && ours containerd >/dev/null; then
      local task
      for task in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -a -s KILL "$task" >/dev/null 2>&1 || true; done
      for _ in $(seq 50); do [ -z "$(ctr_ tasks ls -q 2>/dev/null | head -1)" ] && break; sleep 0.1; done
    fi
    if pid=$(ours "$c"); then
      kill -TERM "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      ! kill -0 "$pid" 2>/dev/null || kill -KILL "$pid"
    fi
    rm -f "$dir/pids/$c"
  done
  pkill -f "containerd-shim.*$sock" 2>/dev/null || true
  findmnt -rn -o TARGET | grep -F "$node/" | sort -r | xargs -r umount -l 2>/dev/null || true
  ip link del tbcni0 2>/dev/null || true
  [ -z "${KUBE_PROXY_BIN:-}" ] || "$KUBE_PROXY_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  kubectl_ delete node "$node_name" --wait=false >/dev/null 2>&1 || true
  rm -rf "$node"
}

# Loads images into the node's containerd, as a registry pull would (Pods use imagePullPolicy
# Never or IfNotPresent with them).
cmd_import() {
  ours containerd >/dev/null || die "no containerd runs for $dir"
  [ $# -gt 0 ] || die "import needs image archives"
  local tar
  for tar in "$@"; do
    [ -f "$tar" ] || die "no image archive $tar"
    ctr_ images import "$tar" >/dev/null || die "importing $tar failed"
  done
}

case $command in
  up) cmd_up ;;
  down) cmd_down ;;
  restart) cmd_restart ;;
  import) cmd_import "$@" ;;
  *) die "usage: kubelet.sh up|down|restart|import --dir D" ;;
esac
