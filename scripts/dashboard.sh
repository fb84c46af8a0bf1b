#!/usr/bin/env bash
# Start the dashboard on http://127.0.0.1:8501 over experiments.duckdb (seeded from samples/ when empty).
# Extra arguments go to streamlit, e.g. --server.port 8600; after `--` to the app, e.g. -- --store other.duckdb
# KERNELBEAM_ADDRESS=0.0.0.0 (or --server.address 0.0.0.0) listens beyond this machine: then every page wants a
# token ($KERNELBEAM_TOKEN, made here and printed when not set). An SSH tunnel (ssh -L 8501:127.0.0.1:8501 gpu-box)
# needs neither.
set -euo pipefail
cd "$(dirname "$0")/.."
# One address for both the server and the app's token rule: --server.address, STREAMLIT_SERVER_ADDRESS and
# KERNELBEAM_ADDRESS may each give it, but must agree; streamlit gets it as a flag, which beats any config file.
address="" from=""
pick() {
  if [ -n "$from" ] && [ "$1" != "$address" ]; then
    echo "error: $2 says '$1' but $from says '$address': give the address once (KERNELBEAM_ADDRESS)" >&2
    exit 2
  fi
  address="$1" from="$2"
}
[ -n "${KERNELBEAM_ADDRESS+set}" ] && pick "$KERNELBEAM_ADDRESS" KERNELBEAM_ADDRESS
[ -n "${STREAMLIT_SERVER_ADDRESS+set}" ] && pick "$STREAMLIT_SERVER_ADDRESS" STREAMLIT_SERVER_ADDRESS
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) args+=("$@"); break ;; # the app's own arguments, passed as they are
    --server.address)
      [ $# -ge 2 ] || { echo "error: --server.address needs a value" >&2; exit 2; }
      pick "$2" --server.address
      shift ;;
    --server.address=*) pick "${1#*=}" --server.address ;;
    *) args+=("$1") ;;
  esac
  shift
done
export KERNELBEAM_ADDRESS="${address:-127.0.0.1}"
export STREAMLIT_SERVER_ADDRESS="$KERNELBEAM_ADDRESS"
. scripts/install.sh --run
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
exec python -m streamlit run app.py --server.address "$KERNELBEAM_ADDRESS" ${args[@]+"${args[@]}"}
