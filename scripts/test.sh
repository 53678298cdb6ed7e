#!/usr/bin/env bash
# Builds and runs every test, twice: a normal build, then an ASan+UBSan build (GPUSTACK_SANITIZE)
# of the same tree. Works on a fresh Debian 12 machine: bootstrap.sh installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh

jobs=$(nproc)
run_suite() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja "$@"
  cmake --build "$dir" -j "$jobs"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs"
}

echo "== normal build =="
run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== ASan + UBSan build =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DGPUSTACK_SANITIZE=ON -DGPUSTACK_BUILD_BENCHMARKS=OFF
