#!/usr/bin/env bash
# Unpack Debian's bubblewrap (the worker's sandbox) into .tools/bwrap, without installing it: to carry with the
# checkout to a GPU machine that has no package index (the binary needs only libc, libcap and libselinux).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download bubblewrap >/dev/null 2>&1) || {
  apt-get update -q >/dev/null && (cd "$work" && apt-get download bubblewrap >/dev/null)
}
dpkg -x "$work"/bubblewrap_*.deb "$work/root"
mkdir -p .tools
cp "$work/root/usr/bin/bwrap" .tools/bwrap
.tools/bwrap --version
