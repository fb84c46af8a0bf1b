#!/usr/bin/env bash
# Install what KernelBeam needs: pinned Python packages into a virtual environment in the checkout (.venv)
# unless one is already active, and with --dev the test tools and a browser for the end-to-end tests.
# Re-running is quick: pip runs only when the requirements files changed since the last install.
# Source it (`. scripts/install.sh --run`: give an option, or the caller's arguments become ours) to have the environment's python first on PATH afterwards.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

dev=0
for arg in "$@"; do
  case "$arg" in
    --dev | --browser) dev=1 ;;
    --run) ;;
    *) echo "install.sh: unknown option $arg (use --run or --dev)" >&2; exit 2 ;;
  esac
done

if [ -z "${VIRTUAL_ENV:-}" ]; then
  # A system python may refuse global installs (PEP 668), so keep our own environment in the checkout.
  if [ ! -x .venv/bin/python ]; then
    echo "install.sh: creating a virtual environment in .venv" >&2
    python3 -m venv .venv
  fi
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi

reqs=requirements.txt
[ "$dev" = 1 ] && reqs="requirements.txt requirements-dev.txt"
stamp="$VIRTUAL_ENV/.kernelbeam-$( [ "$dev" = 1 ] && echo dev || echo run ).sha256"
want=$(cat $reqs | sha256sum | cut -d' ' -f1)
dev_want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
if [ "$dev" = 0 ] && [ "$(cat "$VIRTUAL_ENV/.kernelbeam-dev.sha256" 2>/dev/null)" = "$dev_want" ]; then
  want_met=1 # the dev install is a superset of the runtime one
else
  want_met=0
fi
if [ "$want_met" = 0 ] && [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "install.sh: installing $reqs into $VIRTUAL_ENV" >&2
  file=requirements.txt
  [ "$dev" = 1 ] && file=requirements-dev.txt
  if ! python -m pip install -q -r "$file"; then
    echo "install.sh: pip install -r $file failed" >&2
    exit 1
  fi
  # Our own package (the `kernelbeam` command), without touching the pinned dependencies.
  python -m pip install -q --no-deps -e . >/dev/null 2>&1 \
    || echo "install.sh: could not install the kernelbeam command (python -m tracker still works)" >&2
  echo "$want" >"$stamp"
fi

# The worker's sandbox (bubblewrap): the system's or a carried .tools/bwrap, else Debian's package where we may.
if ! command -v bwrap >/dev/null 2>&1 && [ ! -x .tools/bwrap ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install.sh: installing bubblewrap, the sandbox kernels run in" >&2
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null; }; } \
      || echo "install.sh: bubblewrap could not be installed: runs go unsandboxed and say so" >&2
  else
    echo "install.sh: bubblewrap (bwrap) is missing: runs go unsandboxed and say so (apt-get install bubblewrap)" >&2
  fi
fi

if [ "$dev" = 1 ]; then
  # The end-to-end tests drive a real Chromium: /usr/bin/chromium if present, else Playwright's own build.
  if [ ! -x /usr/bin/chromium ] && ! python - <<'PY' 2>/dev/null; then
import sys
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    sys.exit(0 if __import__("os").path.exists(p.chromium.executable_path) else 1)
PY
    echo "install.sh: installing Chromium for the end-to-end browser tests (Playwright's build)" >&2
    if ! python -m playwright install chromium >&2; then
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install.sh: Playwright's download failed; installing Debian's chromium package with apt-get" >&2
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium \
          || echo "install.sh: no Chromium could be installed: the end-to-end tests will be skipped" >&2
      else
        echo "install.sh: no Chromium could be installed: the end-to-end tests will be skipped" >&2
      fi
    fi
  fi
fi

# Bytecode for our own sources, written once here. Every run starts three Python processes that import them (the
# front, the worker, the checker); where PYTHONDONTWRITEBYTECODE is set, as in many containers, none of them keeps
# what it compiles, and each compiled our modules again (0.1-0.3 s of CPU a process). Up-to-date files are skipped.
python -m compileall -q -j 0 tracker pages app.py >/dev/null || echo "install.sh: could not write bytecode (runs start slower)" >&2
