#!/usr/bin/env bash
# Packages the chart's subcharts (Kueue, Node Feature Discovery) into
# charts/gpustack-operator/charts/ from the Go modules their projects publish, pinned by
# testbed/tools/charts/go.mod and go.sum (Go checks the module content against go.sum), so
# nothing is copied into the repository by hand. Idempotent: a second run only checks.
#
#   scripts/chart-deps.sh        (needs Go and the testbed's helm: scripts/testbed/build-tools.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly
helm_bin=$(scripts/testbed/build-tools.sh helm)/helm
target=charts/gpustack-operator/charts
mkdir -p "$target"
cd testbed/tools/charts
package() { # module, chart directory inside it
  local dir name version
  dir=$(go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  [ -d "$dir/$2" ] || { echo "chart-deps.sh: $1 has no $2" >&2; exit 1; }
  name=$(sed -n 's/^name: *//p' "$dir/$2/Chart.yaml")
  version=$(sed -n 's/^version: *//p' "$dir/$2/Chart.yaml")
  if [ -f "../../../$target/$name-$version.tgz" ]; then return 0; fi
  rm -f "../../../$target/$name"-*.tgz
  "$helm_bin" package "$dir/$2" --destination "../../../$target" >/dev/null
  echo "chart-deps.sh: packaged $name $version from $1" >&2
}
package sigs.k8s.io/kueue charts/kueue
package sigs.k8s.io/node-feature-discovery deployment/helm/node-feature-discovery
