#!/usr/bin/env bash
# Per-slice metrics' figures (README "Instances"): a real-node testbed of its own, the chart
# installed as the local cluster installs it, one sliced Instance, then
# tests/bench/metrics_bench.py (the subresource's latency, cold and cached). Needs root and a
# built tree; no other real-node testbed may run (one kubelet per machine):
#   scripts/metrics-bench.sh [BUILD_DIR]   (default: build; BENCH_COLD, BENCH_CACHED)
# The node daemon's own costs are Google Benchmarks: build/bin/usage_bench and
# build/bin/monitor_bench --benchmark_filter=MonitorSample.
BENCH_SCRIPT=tests/bench/metrics_bench.py BENCH_KWOK_NODES=1 exec "$(dirname "$0")/instance-bench.sh" "$@"
