#!/usr/bin/env bash
# Builds the test control plane's binaries (once; cached outside the repo), then builds and runs
# every test twice: a normal build, then an ASan+UBSan build (GPUSTACK_SANITIZE) of the same tree,
# with a bounded libFuzzer run between them. Works on a fresh Debian 12 machine: bootstrap.sh installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh

jobs=$(nproc)
# ccache shares objects between build trees of this checkout (paths relative to it, the build
# directory left out of the hash), so the image build below reuses the normal build's objects.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
run_suite() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja "$@"
  cmake --build "$dir" -j "$jobs"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs"
}

echo "== control-plane binaries for the integration tests (built once, then cached) =="
command -v go >/dev/null || { echo "test.sh: Go 1.26 is needed to build the test control plane" >&2; exit 1; }
started=$SECONDS
scripts/testbed/build-tools.sh etcd kubernetes kube-proxy kwok kueue helm containerd
echo "control-plane binaries ready in $((SECONDS - started)) s"

echo "== normal build =="
run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== the main job's build and images, from an empty build directory =="
# scripts/run.sh builds its images this way on a fresh machine; CI would not see it break.
rm -rf build-images
scripts/images.sh --build build-images >/dev/null
echo "== fuzzing (libFuzzer, bounded) =="
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGPUSTACK_FUZZ=ON
cmake --build build-fuzz -j "$jobs"
for fuzzer in build-fuzz/bin/*_fuzzer; do
  corpus=$(mktemp -d)  # grows as it runs; the committed seeds stay as they are
  cp tests/fuzz/corpus/* "$corpus"/
  # A finding fails the run; the crashing input is printed and kept in build-fuzz/.
  "$fuzzer" -max_total_time="${GPUSTACK_FUZZ_SECONDS:-60}" -print_final_stats=1 \
    -artifact_prefix=build-fuzz/ "$corpus"
  rm -rf "$corpus"
done

echo "== ASan + UBSan build =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DGPUSTACK_SANITIZE=ON -DGPUSTACK_BUILD_BENCHMARKS=OFF
