#!/usr/bin/env bash
# Measures the Pod webhook (tests/bench/webhook_bench.cc) under a bounded load on loopback:
# h2load (Debian's nghttp2-client, installed here when missing) sends a real AdmissionReview
# from the fuzz corpus over HTTP/1.1 keep-alive at a fixed rate; the server prints its own
# latency histogram, h2load the client's view.
#   scripts/bench-webhook.sh [requests_per_second=2000] [seconds=20] [connections=4]
set -euo pipefail
cd "$(dirname "$0")/.."
rps=${1:-2000} seconds=${2:-20} connections=${3:-4}
command -v h2load >/dev/null || { apt-get update -qq && apt-get install -y -qq nghttp2-client >/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target webhook_bench
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
build/bin/webhook_bench "$port" $((seconds + 30)) &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
body=tests/fuzz/corpus/review-mutate-pod-10.json
# --rps is per client: the total rate is spread over the connections.
h2load --h1 -c "$connections" --rps $((rps / connections)) -D "$seconds" -d "$body" \
  -H 'content-type: application/json' "https://127.0.0.1:$port/mutate-pod" |
  grep -E "finished in|requests:|status codes|time for request|req/s"
kill -INT $server
wait $server
