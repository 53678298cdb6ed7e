#!/usr/bin/env bash
# Builds the test control plane's binaries from the Go module proxy, pinned by the tools modules
# in testbed/tools/<project>/ (go.mod + go.sum), into a cache outside the repository keyed by
# the module files' and this script's hash, so a second run costs seconds:
#   ${GPUSTACK_TESTBED_CACHE:-~/.cache/gpustack-testbed}/<project>-<hash>/bin/
# Prints the bin directory of each project built. Idempotent.
#
#   scripts/testbed/build-tools.sh etcd kubernetes
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${GPUSTACK_TESTBED_CACHE:-$HOME/.cache/gpustack-testbed}
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0

build() {
  local project=$1 dir="testbed/tools/$1"
  [ -f "$dir/go.mod" ] || { echo "no tools module $dir" >&2; return 2; }
  local hash
  # The recipe (this script) is part of the key: a changed flag rebuilds.
  hash=$(cat "$dir/go.mod" "$dir/go.sum" "$0" | sha256sum | cut -c1-12)
  local out="$cache/$project-$hash"
  if [ -f "$out/.complete" ]; then
    echo "$out/bin"
    return 0
  fi
  rm -rf "$out"
  mkdir -p "$out/bin"
  local started=$SECONDS
  case $project in
    etcd)
      (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out/bin/etcd" go.etcd.io/etcd/server/v3)
      ;;
    kubernetes)
      # The version ldflags are not cosmetic: Kueue and Helm parse the server's /version.
      local version
      version=$(cd "$dir" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
      [[ $version =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "cannot read the Kubernetes version" >&2; return 2; }
      local minor=${version#v1.}
      minor=${minor%%.*}
      local p=k8s.io/component-base/version c=k8s.io/client-go/pkg/version
      local ldflags="-s -w -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
      ldflags+=" -X $p.gitTreeState=clean -X $p.gitCommit=unknown -X $p.buildDate=1970-01-01T00:00:00Z"
      ldflags+=" -X $c.gitVersion=$version -X $c.gitMajor=1 -X $c.gitMinor=$minor"
      (cd "$dir" && go build -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$out/bin/" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
      ;;
    *)
      echo "unknown project $project" >&2
      return 2
      ;;
  esac
  echo "built $project in $((SECONDS - started)) s" >&2
  touch "$out/.complete"
  echo "$out/bin"
}

for project in "$@"; do build "$project"; done
