#!/usr/bin/env bash
# One H200 call for issue 8: timing fidelity on launch-bound cases (tracker vs validation/spec_loop.py, 3 rounds,
# alternating) and the statistics validation (8 baseline runs, 8 with +2% planted on one case, 8 with +5%).
# Usage on the GPU machine: bash validation/h200_trust.sh COMMIT [DEADLINE_S]. Results: $OUT/trust.tgz
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KERNELBEAM_GIT_COMMIT=${1:?commit} KERNELBEAM_GIT_BRANCH=main
DEADLINE=${2:-540}
S=/tmp/res/trust.duckdb R=/tmp/res
mkdir -p $R
T0=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
bundle() { tar czf $OUT/trust.tgz -C /tmp res 2>/dev/null; }
tr() { python3 -m tracker run --store $S --quiet --json "$@"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
# 1. fidelity, graphed.py: 3 rounds of (tracker, spec loop) on cases 0,1,2
for r in 1 2 3; do
  [ $(left) -gt 60 ] || break
  tr kernels/graphed.py --cases 0,1,2 --family fidelity --note "fidelity round $r" --timeout 150 > $R/fid_tracker_graphed_$r.json
  python3 validation/spec_loop.py kernels/graphed.py --cases 0,1,2 --json $R/fid_spec_graphed_$r.json > $R/fid_spec_graphed_$r.log 2>&1
  python3 validation/spec_loop.py kernels/graphed.py --cases 0,1,2 --loop tracker --json $R/fid_inproc_graphed_$r.json > $R/fid_inproc_graphed_$r.log 2>&1
  echo "round $r graphed done at $(( $(date +%s) - T0 )) s"
done
bundle
# 2. statistics validation on graphed.py cases 2 (40x352, planted) and 3 (640x512, control)
for i in 1 2 3 4 5 6 7 8; do
  [ $(left) -gt 40 ] && tr kernels/graphed.py --cases 2,3 --family stats-validation --note "A/A baseline run $i" --timeout 90 > $R/stats_a_$i.json
done
DELAY=$(python3 -c "
import glob, json, statistics
m = [c['mean_us'] for f in glob.glob('$R/stats_a_*.json') for c in json.load(open(f))['cases'] if c['case_idx'] == 2 and c['mean_us']]
print(statistics.median(m))")
echo "baseline 40x352 mean (median of runs): $DELAY us" | tee $R/stats_delay.txt
for pct in 2 5; do
  export PLANT_SHAPE=40x352 PLANT_DELAY_US=$(python3 -c "print($DELAY * $pct / 100)")
  for i in 1 2 3 4 5 6 7 8; do
    [ $(left) -gt 40 ] && tr validation/planted_regression.py --cases 2,3 --family stats-validation --note "planted +$pct% on 40x352 run $i" --timeout 90 > $R/stats_p${pct}_$i.json
  done
  bundle
done
echo "stats done at $(( $(date +%s) - T0 )) s"
# 3. fidelity, householder_torch.py, while time lasts
for r in 1 2 3; do
  [ $(left) -gt 120 ] || break
  tr kernels/householder_torch.py --cases 0,1,2 --family fidelity --note "fidelity round $r" --timeout 100 > $R/fid_tracker_householder_$r.json
  timeout 100 python3 validation/spec_loop.py kernels/householder_torch.py --cases 0,1,2 --json $R/fid_spec_householder_$r.json > $R/fid_spec_householder_$r.log 2>&1
  echo "round $r householder done at $(( $(date +%s) - T0 )) s"
done
python3 -m tracker export --store $S --out $R/export > /dev/null 2>&1
bundle
echo "all done at $(( $(date +%s) - T0 )) s"
