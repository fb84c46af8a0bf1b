#!/usr/bin/env bash
# On the H200 machine: record torch.geqrf (the contest's reference) on qr_v2 in test and benchmark mode,
# with profiles, and bring the store and a Parquet export back through $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
store=/tmp/h200.duckdb
bundle() { python3 -m tracker export --store $store --out /tmp/export; tar czf $OUT/reference.tgz -C /tmp h200.duckdb h200.duckdb.traces export; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
timeout 100 python3 -m tracker run kernels/geqrf_reference.py --suite qr_v2 --mode test --store $store --family reference --note "torch.geqrf on the 22 qr_v2 tests" --json > $OUT/ref_test.json
timeout 420 python3 -m tracker run kernels/geqrf_reference.py --suite qr_v2 --mode benchmark --profile --store $store --family reference --note "torch.geqrf baseline, contest timing" --timeout 400
bundle
timeout 120 python3 -m tracker run kernels/householder_torch.py --suite qr_v2 --mode test --store $store --family householder --note "unblocked Householder vectorised over the batch" --timeout 110
bundle
python3 -m tracker list --store $store
