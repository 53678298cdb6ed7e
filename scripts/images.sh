#!/usr/bin/env bash
# Builds the project's container images as OCI archives, with no registry and no Docker daemon
# (scripts/images/oci_image.py), from an existing build tree:
#   gpustack-operator.tar       docker.io/gpustack/gpustack-operator:v<version>: the one binary,
#                               the nine in-tree plugins and the shared libraries they link
#                               (found with ldd), user 65532 (the DaemonSet runs it as root)
#   gpustack-ssh-server.tar     docker.io/gpustack/gpustack-ssh-server:v<version>: Instances' SSH
#                               sidecar: Debian's sshd (from the openssh-server package, downloaded
#                               into ~/.cache/gpustack-images, never installed here), a static
#                               busybox for its shell, and gpustack-ssh-enter as every login's
#                               command (host/ssh_enter)
#   gpustack-plugin-example.tar docker.io/gpustack/gpustack-plugin-example:v<version>: the SDK's
#                               out-of-tree example plugin, built against the installed SDK, as a
#                               third-party plugin image (entrypoint gpustack-plugin-install)
#
#   scripts/images.sh [--build DIR] [--out DIR]     (defaults: build, DIR/images)
# DIR may be empty or absent: it is configured (RelWithDebInfo) and only what the images hold is
# built.
# Prints the archives' paths; `ctr -n k8s.io images import <tar>` loads one into containerd
# (scripts/testbed/kubelet.sh import does that for the test node).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build out=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "usage: scripts/images.sh [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
if [ ! -f "$build/CMakeCache.txt" ]; then
  if [ -e "$build" ] && [ -n "$(ls -A "$build")" ]; then
    echo "images.sh: $build is neither a configured build tree nor empty" >&2
    exit 2
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
fi
out=${out:-$build/images}
mkdir -p "$out"
out=$(cd "$out" && pwd)
say() { echo "images.sh: $*" >&2; }

# sdk_all: what the SDK's install component holds (the example image is built against it).
cmake --build "$build" --target gpustack-operator plugins_all sdk_all gpustack-ssh-enter >&2
version=$(sed -n 's/^project(gpustack_operator VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || { echo "images.sh: cannot read the project version" >&2; exit 1; }

# --- the operator image ---
# Stripped copies: the build's debug info would make the image ten times larger.
stage=$out/work/stage
rm -rf "$stage"
mkdir -p "$stage/plugins"
strip --strip-unneeded -o "$stage/gpustack-operator" "$build/bin/gpustack-operator"
for f in "$build"/lib/gpustack/plugins/*; do
  case $f in
    *.so) strip --strip-unneeded -o "$stage/plugins/$(basename "$f")" "$f" ;;
    *.json) cp "$f" "$stage/plugins/" ;;
  esac
done
binary=$stage/gpustack-operator
plugins=$stage/plugins
args=(--ref "docker.io/gpustack/gpustack-operator:v$version" --out "$out/gpustack-operator.tar"
  --entrypoint /opt/gpustack/bin/gpustack-operator --user 65532:65532
  --env PATH=/opt/gpustack/bin --env GPUSTACK_CONF_DIR=/etc/gpustack
  --label "org.opencontainers.image.version=v$version"
  --label "org.opencontainers.image.source=https://github.com/gpustack/gpustack-operator"
  --file "$binary:/opt/gpustack/bin/gpustack-operator:0755"
  --dir tmp:1777 --dir var/lib/gpustack:0755 --dir etc/gpustack:0755
  --text "etc/passwd=root:x:0:0:root:/root:/sbin/nologin
gpustack:x:65532:65532:gpustack:/nonexistent:/sbin/nologin
"
  --text "etc/group=root:x:0:
gpustack:x:65532:
")
shopt -s nullglob
elves=("$binary")
for so in "$plugins"/*.so; do
  elves+=("$so")
  args+=(--file "$so:/opt/gpustack/lib/gpustack/plugins/$(basename "$so"):0755")
done
for manifest in "$plugins"/*.json; do
  args+=(--file "$manifest:/opt/gpustack/lib/gpustack/plugins/$(basename "$manifest"):0644")
done
[ ${#elves[@]} -gt 1 ] || { echo "images.sh: no plugin in $plugins" >&2; exit 1; }
# Every library the binary and the plugins link, under the path the dynamic loader looks in.
mapfile -t libraries < <(ldd "${elves[@]}" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | sort -u)
for lib in "${libraries[@]}"; do args+=(--file "$lib:$lib"); done
python3 scripts/images/oci_image.py "${args[@]}"
say "gpustack-operator: ${#libraries[@]} shared libraries, $(du -h "$out/gpustack-operator.tar" | cut -f1)"

# --- the SSH sidecar image ---
# Debian's own sshd: the packages are downloaded once (apt-get download, cached outside the
# repo) and unpacked, never installed on this machine.
debs=${XDG_CACHE_HOME:-$HOME/.cache}/gpustack-images/debs
mkdir -p "$debs"
for package in openssh-server libwrap0; do
  found=("$debs/${package}_"*.deb)  # nullglob is on: empty when absent
  if [ ${#found[@]} -eq 0 ]; then
    (cd "$debs" && { apt-get download -q "$package" >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get download -q "$package" >/dev/null; }; }) ||
      { echo "images.sh: cannot download the Debian package $package" >&2; exit 1; }
  fi
done
ssh_root=$out/work/ssh-root
rm -rf "$ssh_root"
for deb in "$debs"/openssh-server_*.deb "$debs"/libwrap0_*.deb; do dpkg-deb -x "$deb" "$ssh_root"; done
ssh_args=(--ref "docker.io/gpustack/gpustack-ssh-server:v$version" --out "$out/gpustack-ssh-server.tar"
  # sshd gives a session a fresh environment: the container's VOLUME_MOUNT_PATH (the Instance's
  # workspace, where a login starts) reaches it through SetEnv.
  --entrypoint /bin/sh --entrypoint-arg=-c
  --entrypoint-arg='exec /usr/sbin/sshd -D -e -o "SetEnv=VOLUME_MOUNT_PATH=\"${VOLUME_MOUNT_PATH:-/}\""'
  --env PATH=/usr/sbin:/usr/bin:/bin
  --label "org.opencontainers.image.version=v$version"
  --file "$ssh_root/usr/sbin/sshd:/usr/sbin/sshd:0755"
  --file /bin/busybox:/bin/busybox:0755 --symlink bin/sh:busybox
  --file "$build/bin/gpustack-ssh-enter:/usr/local/bin/gpustack-ssh-enter:0755"
  --dir tmp:1777 --dir root:0700 --dir run/sshd:0755 --dir proc --dir sys --dir dev
  --text "etc/passwd=root:x:0:0:root:/root:/bin/sh
sshd:x:100:65534::/run/sshd:/usr/sbin/nologin
"
  --text "etc/group=root:x:0:
nogroup:x:65534:
"
  --text "etc/ssh/sshd_config=# The Instance SSH sidecar (docs/behaviour.md §7): keys only, every login enters main.
Port 22
HostKey /var/run/sshd-host-key/ssh_host_ecdsa_key
AuthorizedKeysFile /var/run/sshd-authorized-keys/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The keys are a read-only Secret mount (0600, root's) under the kubelet's own directories.
StrictModes no
PrintMotd no
PrintLastLog no
AllowTcpForwarding no
AllowAgentForwarding no
X11Forwarding no
PermitTunnel no
PidFile none
ForceCommand /usr/local/bin/gpustack-ssh-enter
")
ssh_libs=$ssh_root/lib/x86_64-linux-gnu:$ssh_root/usr/lib/x86_64-linux-gnu
if LD_LIBRARY_PATH=$ssh_libs ldd "$ssh_root/usr/sbin/sshd" | grep "not found" >&2; then
  echo "images.sh: sshd needs a library this machine lacks (above)" >&2
  exit 1
fi
mapfile -t libraries < <(LD_LIBRARY_PATH=$ssh_libs ldd "$ssh_root/usr/sbin/sshd" |
  awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | sort -u)
for lib in "${libraries[@]}"; do
  case $lib in
    "$ssh_root"/*) ssh_args+=(--file "$lib:${lib#"$ssh_root"}") ;;
    *) ssh_args+=(--file "$lib:$lib") ;;
  esac
done
python3 scripts/images/oci_image.py "${ssh_args[@]}"
say "gpustack-ssh-server: ${#libraries[@]} shared libraries, $(du -h "$out/gpustack-ssh-server.tar" | cut -f1)"

# --- the example third-party plugin image ---
sdk=$out/work/sdk example=$out/work/example
rm -rf "$sdk"
cmake --install "$build" --component sdk --prefix "$sdk" >/dev/null
cmake -S sdk/examples/example -B "$example" -G Ninja -DCMAKE_PREFIX_PATH="$sdk" >/dev/null
cmake --build "$example" >&2
strip --strip-unneeded -o "$stage/gpustack-plugin-install" "$build/bin/gpustack-plugin-install"
strip --strip-unneeded -o "$stage/libgpustack_plugin_example.so" "$example/libgpustack_plugin_example.so"
example_version=$(sed -n 's/^project(gpustack_example_plugin VERSION \([0-9.]*\).*/\1/p' \
  sdk/examples/example/CMakeLists.txt)
python3 scripts/images/oci_image.py \
  --ref "docker.io/gpustack/gpustack-plugin-example:v$example_version" \
  --out "$out/gpustack-plugin-example.tar" \
  --entrypoint /gpustack-plugin-install \
  --label "org.opencontainers.image.version=v$example_version" \
  --file "$stage/gpustack-plugin-install:/gpustack-plugin-install:0755" \
  --file "$stage/libgpustack_plugin_example.so:/plugin/libgpustack_plugin_example.so:0755" \
  --file "$example/example.json:/plugin/example.json:0644" \
  --file "$example/libexamplesmi.so.1:/plugin/libexamplesmi.so.1:0755"
say "gpustack-plugin-example: $(du -h "$out/gpustack-plugin-example.tar" | cut -f1)"
echo "$out/gpustack-operator.tar"
echo "$out/gpustack-ssh-server.tar"
echo "$out/gpustack-plugin-example.tar"
