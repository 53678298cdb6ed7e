#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU, as one script for a machine that has one: detect,
# monitor and preflight against the real NVML. Read-only: it changes no GPU setting (no MIG mode
# change, no partition is created). Output goes to $OUT (or ./device-check) for the record.
#
#   scripts/device-check.sh [build-dir]     (default: build; needs gpustack-operator and plugins)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${OUT:-device-check}
mkdir -p "$out"
bin="$build/bin/gpustack-operator"
run() {
  local name=$1
  shift
  echo "== $name: $*" | tee -a "$out/summary.txt"
  /usr/bin/time -v "$@" >"$out/$name.out" 2>"$out/$name.err"
  echo "exit $?" | tee -a "$out/summary.txt"
  grep -E "Elapsed|Maximum resident" "$out/$name.err" | tee -a "$out/summary.txt"
}
nvidia-smi -L >"$out/nvidia-smi-L.txt" 2>&1 || true
nvidia-smi --query-gpu=name,memory.total,mig.mode.current --format=csv >"$out/nvidia-smi.csv" 2>&1 || true
run detect-yaml "$bin" device-manager detect --enable nvidia=on
run detect-json "$bin" device-manager detect --enable nvidia=on -o json
run monitor "$bin" device-manager monitor --enable nvidia=on --processes -i 1 -c 3 -o json
run preflight "$bin" device-manager preflight --enable nvidia=on
echo "results in $out/"
