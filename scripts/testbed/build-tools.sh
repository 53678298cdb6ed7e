#!/usr/bin/env bash
# Builds the test control plane's binaries from the Go module proxy, pinned by the tools modules
# in testbed/tools/<project>/ (go.mod + go.sum), into a cache outside the repository keyed by
# the module files and the project's recipe below, so a second run costs seconds:
#   ${GPUSTACK_TESTBED_CACHE:-~/.cache/gpustack-testbed}/<project>-<hash>/bin/
# Prints the bin directory of each project built. Idempotent; safe to interrupt (a build only
# counts once its .complete marker exists).
#
#   scripts/testbed/build-tools.sh etcd kubernetes kube-proxy kwok kueue helm containerd
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${GPUSTACK_TESTBED_CACHE:-$HOME/.cache/gpustack-testbed}
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0

module_version() { go list -m -f '{{.Version}}' "$1"; }

recipe_etcd() {
  go build -trimpath -ldflags "-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3
}

recipe_kubernetes() {
  # The version ldflags are not cosmetic: Kueue and Helm parse the server's /version.
  local version minor
  version=$(module_version k8s.io/kubernetes)
  [[ $version =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "cannot read the Kubernetes version" >&2; return 2; }
  minor=${version#v1.}
  minor=${minor%%.*}
  local p=k8s.io/component-base/version c=k8s.io/client-go/pkg/version
  local ldflags="-s -w -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.gitCommit=unknown -X $p.buildDate=1970-01-01T00:00:00Z"
  ldflags+=" -X $c.gitVersion=$version -X $c.gitMajor=1 -X $c.gitMinor=$minor"
  go build -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$1/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet
}

# The real node's Service proxy (scripts/testbed/kubelet.sh): NodePorts, as Instances' SSH uses
# them. A tools module of its own, so adding it rebuilt none of the other Kubernetes binaries.
recipe_kube-proxy() {
  local version minor
  version=$(module_version k8s.io/kubernetes)
  minor=${version#v1.}
  minor=${minor%%.*}
  local p=k8s.io/component-base/version
  go build -trimpath -tags selinux,notest \
    -ldflags "-s -w -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor" \
    -o "$1/" k8s.io/kubernetes/cmd/kube-proxy
}

recipe_kwok() {
  go build -trimpath -ldflags "-s -w" -o "$1/kwok" sigs.k8s.io/kwok/cmd/kwok
  # The plain kwok binary has no default stages; they ship in the module.
  local stages
  stages="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
  mkdir -p "$1/../share/kwok"
  cp -r "$stages/." "$1/../share/kwok/"
  chmod -R u+w "$1/../share/kwok"
}

recipe_kueue() {
  local version
  version=$(module_version sigs.k8s.io/kueue)
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" \
    -o "$1/kueue" sigs.k8s.io/kueue/cmd/kueue
  # The CRDs and webhook manifests ship in the module; the start script rewrites them.
  local dir
  dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
  mkdir -p "$1/../share/kueue"
  cp -r "$dir/config/components/crd/bases" "$1/../share/kueue/crd"
  cp "$dir/config/components/webhook/manifests.yaml" "$1/../share/kueue/webhooks.yaml"
  chmod -R u+w "$1/../share/kueue"
}

# containerd 2 and its runc shim, for the node configuration with CDI (kubelet.sh,
# GPUSTACK_TESTBED_CONTAINERD); no cgo, so no btrfs, devmapper or zfs snapshotters.
recipe_containerd() {
  local version
  version=$(module_version github.com/containerd/containerd/v2)
  go build -trimpath -tags no_btrfs,no_devmapper,no_zfs \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$version" -o "$1/" \
    github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
}

recipe_helm() {
  local version k8s minor
  version=$(module_version helm.sh/helm/v3)
  k8s=$(module_version k8s.io/client-go)
  minor=${k8s#v0.}
  minor=${minor%%.*}
  local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
  # Without these, offline `helm template` and `helm lint` assume Kubernetes v1.20.
  ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1"
  ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
  go build -trimpath -ldflags "$ldflags" -o "$1/helm" helm.sh/helm/v3/cmd/helm
}

build() {
  local project=$1 dir="testbed/tools/$1"
  [ -f "$dir/go.mod" ] || { echo "no tools module $dir" >&2; return 2; }
  declare -F "recipe_$project" >/dev/null || { echo "unknown project $project" >&2; return 2; }
  local hash out
  # The recipe is part of the key: a changed flag rebuilds that project only.
  hash=$({ cat "$dir/go.mod" "$dir/go.sum"; declare -f module_version "recipe_$project"; } |
    sha256sum | cut -c1-12)
  out="$cache/$project-$hash"
  mkdir -p "$cache"
  # One build per project at a time (parallel ctest fixtures may all ask at once).
  local lock
  exec {lock}>"$cache/.$project.lock"
  flock "$lock"
  if [ -f "$out/.complete" ]; then
    exec {lock}>&-
    echo "$out/bin"
    return 0
  fi
  rm -rf "$out"
  mkdir -p "$out/bin"
  local started=$SECONDS
  (cd "$dir" && "recipe_$project" "$out/bin")
  echo "built $project in $((SECONDS - started)) s" >&2
  touch "$out/.complete"
  exec {lock}>&-
  # Older builds of the same project are superseded.
  find "$cache" -mindepth 1 -maxdepth 1 -name "$project-*" ! -path "$out" -exec rm -rf {} +
  echo "$out/bin"
}

for project in "$@"; do build "$project"; done
