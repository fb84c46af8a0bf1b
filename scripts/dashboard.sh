#!/usr/bin/env bash
# Start the dashboard on http://127.0.0.1:8501 over experiments.duckdb (seeded from samples/ when empty).
# Extra arguments go to streamlit, e.g. --server.port 8600; after `--` to the app, e.g. -- --store other.duckdb
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/install.sh --run
exec python -m streamlit run app.py --server.address "${KERNELBEAM_ADDRESS:-127.0.0.1}" "$@"
