#!/usr/bin/env bash
# Builds the operator and runs it. With no arguments it runs the main job for now,
# `gpustack-operator device-manager detect`, on this machine; any arguments are passed instead
# (e.g. scripts/run.sh device-manager detect -o json; tests/fixtures/README.md shows a fixture node).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh >&2
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
cmake --build build -j "$(nproc)" --target gpustack-operator plugins_all >&2
if [ $# -eq 0 ]; then
  set -- device-manager detect
fi
exec build/bin/gpustack-operator "$@"
