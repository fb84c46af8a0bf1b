#!/usr/bin/env bash
# Download into .whl/ every wheel the H200 machine's python3 (3.12, x86-64 Linux; it has numpy, pandas, pyarrow,
# scipy, torch, triton) needs for the tracker and its scale-out queue: duckdb, GitPython (+ gitdb, smmap),
# dask and distributed and what they import, cryptography for the local cluster's TLS. About 13 MB. Versions as
# pinned in requirements.txt / tested here.
# On the GPU machine:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$1"
}
# the store and git capture
get duckdb==2.0.1
get gitpython==3.2.1
get gitdb==4.0.12
get smmap==5.0.3
# dask and distributed (compiled: msgpack, psutil, pyyaml, tornado, markupsafe; the rest pure Python)
get dask==2026.8.0
get distributed==2026.8.0
get click==8.4.0
get cloudpickle==3.1.3
get fsspec==2026.9.0
get jinja2==3.1.6
get markupsafe==3.0.3
get locket==1.0.0
get msgpack==1.2.4
get packaging==26.2
get partd==1.4.2
get psutil==7.2.2
get pyyaml==6.0.3
get sortedcontainers==2.4.0
get tblib==3.2.2
get toolz==1.2.0
get tornado==6.6.1
get zict==3.0.0
# the local cluster's TLS (compiled: cryptography, cffi)
get cryptography==50.0.2
get cffi==2.1.1
get pycparser==3.12
ls -1 .whl
du -sh .whl
