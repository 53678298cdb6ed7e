#!/usr/bin/env bash
# Installs every Debian 12 package that building and testing the project need.
# Idempotent: packages already present are skipped, and apt runs only when something is missing.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config time clang-format
  # libraries (see README "Dependencies" for why each is here)
  libboost1.81-dev          # Boost.DLL (header-only with BOOST_DLL_USE_STD_FS), later Asio/Beast
  nlohmann-json3-dev        # manifests, config, JSON output
  libcli11-dev              # command line: subcommands, flags with env fallbacks, help
  libspdlog-dev libfmt-dev  # host logging (Debian's spdlog uses the external fmt 9)
  libssl-dev                # TLS (Kubernetes client, webhook and metrics servers)
  libpci-dev                # the host's PCI inventory
  libyaml-cpp-dev           # YAML output of detect and monitor
  libtomlplusplus-dev       # preflight parses containerd's config (TOML)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler  # the kubelet gRPC APIs
  libnghttp2-dev            # HTTP/2 for the node daemon's kubelet RPC (host/kubelet_rpc)
  libzstd-dev               # the v1 API keeps its served objects' texts compressed (host/api)
  # the test control plane (scripts/testbed): certificates, health checks, manifest rewriting
  openssl curl python3 python3-yaml
  # its real node (scripts/testbed/kubelet.sh): container runtime, CNI, a static busybox image
  containerd runc containernetworking-plugins busybox-static iptables
  # Instances' SSH sidecar (scripts/images.sh packs sshd from the downloaded, never installed,
  # openssh-server package) and the client the tests log in with
  openssh-client
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  prometheus                  # promtool: the node daemon's /metrics is checked with it
  clang-14 libclang-rt-14-dev  # libFuzzer targets (GPUSTACK_FUZZ)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages present"
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
