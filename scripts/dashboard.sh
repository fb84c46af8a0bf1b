#!/usr/bin/env bash
# Start the dashboard on http://127.0.0.1:8501 over experiments.duckdb (seeded from samples/ when empty).
# Extra arguments go to streamlit, e.g. --server.port 8600; after `--` to the app, e.g. -- --store other.duckdb
# KERNELBEAM_ADDRESS=0.0.0.0 listens beyond this machine: then every page wants a token ($KERNELBEAM_TOKEN, made
# here and printed when not set). An SSH tunnel (ssh -L 8501:127.0.0.1:8501 gpu-box) needs neither.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/install.sh --run
export KERNELBEAM_ADDRESS="${KERNELBEAM_ADDRESS:-127.0.0.1}"
case "$KERNELBEAM_ADDRESS" in
  127.0.0.1 | localhost | ::1) ;;
  *)
    if [ -z "${KERNELBEAM_TOKEN:-}" ]; then
      KERNELBEAM_TOKEN="$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"
      export KERNELBEAM_TOKEN
    fi
    echo "The dashboard listens on $KERNELBEAM_ADDRESS and asks for a token. Open (port 8501 unless --server.port):" >&2
    echo "  http://$(hostname):8501/?token=$KERNELBEAM_TOKEN" >&2
    ;;
esac
exec python -m streamlit run app.py --server.address "$KERNELBEAM_ADDRESS" "$@"
