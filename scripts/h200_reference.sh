#!/usr/bin/env bash
# On the H200 machine: record torch.geqrf (the contest's reference) on qr_v2 in test and benchmark mode,
# with profiles, and bundle the store and a Parquet export of the runs into $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
store=/tmp/h200.duckdb
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -m tracker run kernels/geqrf_reference.py --suite smoke --mode benchmark --store $store --quiet --family reference --note "GPU smoke check of the tracker" --timeout 300
python3 -m tracker run kernels/geqrf_reference.py --suite qr_v2 --mode test --store $store --quiet --family reference --note "torch.geqrf on the 22 qr_v2 tests"
python3 -m tracker run kernels/geqrf_reference.py --suite qr_v2 --mode benchmark --profile --store $store --quiet --family reference --note "torch.geqrf baseline, contest timing"
python3 -m tracker export --store $store --out /tmp/export
tar czf $OUT/reference.tgz -C /tmp h200.duckdb h200.duckdb.traces export
python3 -m tracker list --store $store
