#!/usr/bin/env bash
# Install what KernelBeam needs on a fresh machine: Python packages (pinned) and, for the browser tests,
# Debian's Chromium. Quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
if ! python3 -m pip install -q -r requirements.txt; then
  echo "pip install -r requirements.txt failed" >&2
  exit 1
fi
if [ "${1:-}" = "--browser" ] && ! command -v chromium >/dev/null 2>&1; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
