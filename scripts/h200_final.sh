#!/usr/bin/env bash
# One H200 call: the reference benchmark, the kernel family (issue 5), and the statistics validation runs
# (issue 3), each step time-boxed, the store bundled into $OUT after every step so nothing is lost.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
S=/tmp/h200.duckdb
T0=$(date +%s)
left() { echo $(( ${DEADLINE:-450} - ($(date +%s) - T0) )); }
bundle() { python3 -m tracker export --store $S --out /tmp/export >/dev/null 2>&1; tar czf $OUT/h200.tgz -C /tmp h200.duckdb export; }
tr() { python3 -m tracker run --store $S --quiet "$@" | tail -3; }
ref=kernels/geqrf_reference.py
# 1. issue 2: torch.geqrf, contest timing, all 12 benchmarks
tr $ref --family reference --note "torch.geqrf baseline, contest timing" --timeout 150
bundle
# 2. issue 5: the best variant: tests, hidden-seed tests, benchmarks with profile
best=kernels/graphed.py
tr $best --mode test --family qr-family --note "graphed: all 22 tests" --timeout 120
tr $best --mode test --seed 12345 --family qr-family --note "graphed: hidden seed 12345" --timeout 120
tr $best --profile --family qr-family --note "graphed: CUDA-graph replay of the best route" --timeout 150
bundle
# 3. issue 3: A/A and planted 5% regression on case 1 (40x176), 8 runs each, in sequence (a 16-run history)
for i in 1 2 3 4 5 6 7 8; do [ $(left) -gt 60 ] && tr $ref --cases 0,1 --family stats-validation --note "A/A run $i" --timeout 60; done
export PLANT_SHAPE=40x176 PLANT_FRACTION=0.05
for i in 1 2 3 4 5 6 7 8; do [ $(left) -gt 60 ] && tr validation/planted_regression.py --cases 0,1 --family stats-validation --note "planted +5% on 40x176, run $i" --timeout 60; done
bundle
# 4. the rest of the family, while time lasts: the eager route as a knob variant of graphed (triton_small, the
# whole-tile route alone, is gone from kernels/: graphed runs it for n <= 128; its runs are in samples/)
eager=$(python3 scripts/knob_variant.py kernels/graphed.py .kscratch/variants triton_panel_wy "the route without the graph" _GRAPH_MAX_ELEMS=0)
for k in $eager kernels/blocked_wy_torch.py; do
  [ $(left) -gt 70 ] && tr $k --mode test --family qr-family --timeout 60
  [ $(left) -gt 70 ] && tr $k --family qr-family --timeout 90
done
bundle
python3 -m tracker list --store $S
