#!/bin/sh
# gpustack-plugin-install against what a plugin image can hold: its files land with the modes the
# loader trusts, a second install replaces them, and an image without a manifest (or no image
# directory at all) is refused before anything is written.
set -eu
install=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/image" "$work/empty"
printf '{"format_version": 1}' >"$work/image/acme.json"
printf 'v1' >"$work/image/libgpustack_plugin_acme.so"
printf 'lib' >"$work/image/libacmesmi.so.1"
chmod 600 "$work/image/acme.json"

mkdir -m 777 "$work/target"  # what an emptyDir looks like
"$install" --from "$work/image" --to "$work/target"
[ "$(stat -c %a "$work/target")" = 755 ] || { echo "target not 0755"; exit 1; }
[ "$(stat -c %a "$work/target/acme.json")" = 644 ] || { echo "manifest not 0644"; exit 1; }
[ "$(stat -c %a "$work/target/libgpustack_plugin_acme.so")" = 755 ] || { echo "plugin not 0755"; exit 1; }
[ "$(stat -c %a "$work/target/libacmesmi.so.1")" = 755 ] || { echo "library not 0755"; exit 1; }
[ -z "$(find "$work/target" -name '.*partial')" ] || { echo "a partial file was left"; exit 1; }

printf 'v2' >"$work/image/libgpustack_plugin_acme.so"
"$install" --from "$work/image" --to "$work/target"
[ "$(cat "$work/target/libgpustack_plugin_acme.so")" = v2 ] || { echo "not replaced"; exit 1; }

status=0
"$install" --from "$work/empty" --to "$work/never" 2>"$work/err" || status=$?
[ "$status" = 2 ] && grep -q "holds no plugin manifest" "$work/err" && [ ! -e "$work/never" ] ||
  { echo "an image without a manifest was not refused cleanly"; exit 1; }
status=0
"$install" --from "$work/missing" --to "$work/never" 2>/dev/null || status=$?
[ "$status" = 2 ] || { echo "a missing image directory gave $status"; exit 1; }
status=0
"$install" --from "$work/image" 2>/dev/null || status=$?
[ "$status" = 2 ] || { echo "no --to gave $status"; exit 1; }
echo "plugin install: ok"
