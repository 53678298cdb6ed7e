#!/bin/sh
# Runs the ```sh blocks of sdk/README.md verbatim, in order, as a vendor would: from a fresh
# $HOME and a working directory holding only `sdk` (the SDK's sources). Fails on the first
# command that fails, naming the block.
#   readme_steps.sh <source dir> <work dir>
set -eu
source_dir=$1
work=$2
rm -rf "$work"
mkdir -p "$work/home" "$work/cwd"
ln -s "$source_dir/sdk" "$work/cwd/sdk"

# Each block into its own script, in README order.
awk -v dir="$work" '
  /^```sh$/ { n++; file = sprintf("%s/block-%02d.sh", dir, n); inside = 1; next }
  /^```/ && inside { inside = 0; close(file); next }
  inside { print > file }
' "$source_dir/sdk/README.md"
blocks=$(ls "$work"/block-*.sh 2>/dev/null | wc -l)
if [ "$blocks" -lt 3 ]; then
  echo "sdk/README.md has $blocks sh block(s); expected the install, build and conformance steps" >&2
  exit 1
fi

for block in "$work"/block-*.sh; do
  echo "=== $(basename "$block")"
  cat "$block"
  if ! (cd "$work/cwd" && HOME="$work/home" sh -eu "$block"); then
    echo "FAILED: $(basename "$block") of sdk/README.md, run verbatim" >&2
    exit 1
  fi
done
echo "all $blocks blocks of sdk/README.md ran"
