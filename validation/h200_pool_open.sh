#!/usr/bin/env bash
# The open issues' device work on a machine with several H200s (nvidia-h200-x4 or -x8), in one call: each job is a
# whole session (a fidelity session, an A/A pair session, a repeat run) on a GPU of its own (scripts/gpu_pool.sh:
# one job per GPU at a time, in the order below, the device lock per GPU), each with its own store.
#
#   bash validation/h200_pool_open.sh COMMIT SECONDS
#
# In priority order (issue 19 item 3 was seen in session 35 on one H200): issue 23's CholeskyQR2 leaf (its probes;
# the tests and benchmark of knob variant fused_wy_cqlean), issue 19 item 6 (three A/A sessions of graphed, two rounds each), issue 23
# item 3 / issue 21 item 10 (two repeats of fused_wy_tagged, a profiled run of kernels/fused_wy.py), item 4 (the
# folder route against the harness on 640x512, cases 3 and 7, two rounds). On four GPUs the first four jobs
# fill a 585 s call; on eight, the first eight. Needs the contest's folder under artifacts/rk (carry artifacts,
# .whl, .tools). Results: $OUT/pool.tgz (every job's JSON and stderr, one export of all new runs, the GPU logs);
# the tables are printed (validation/fidelity_sessions.py, validation/pairs_table.py on the unpacked pool/).
. validation/device_env.sh "${1:-}" "${2:-}"
export DEADLINE
PROBLEM=artifacts/rk/problems/linalg/qr_v2
R=/tmp/pool
mkdir -p $R/stores .kscratch/variants
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpus.txt 2>&1
# The repeats need their parents in the store, and fused_wy_tagged's source is that of a shipped run.
python3 -m tracker import --store $R/seed.duckdb samples/*/ > /dev/null 2>&1
python3 -m tracker show 40dd18af1bdb --source --store $R/seed.duckdb > .kscratch/variants/fused_wy_tagged.py
# ... and fused_wy's profile is of the source its three runs had (kernels/fused_wy.py has a knob more since)
python3 -m tracker show 4c2abf1792b5 --source --store $R/seed.duckdb > .kscratch/variants/fused_wy.py
python3 scripts/knob_variant.py kernels/fused_wy.py .kscratch/variants fused_wy_cqlean "the CholeskyQR2 leaf on outer \
panels of 1,024 rows or more (2x4096, 8x2048, the first panel of 60x1024), its one-program passes with three to five \
barriers a step instead of eight to nine (kernels/NOTES.md, session 35)" _CHOLQR=True > /dev/null
# Each job ends 30 s before the deadline (SIGTERM: a session reports what its stored runs say), so the export
# below always runs.
stop='timeout -s TERM $(( DEADLINE - $(date +%s) - 30 ))'
job() {  # NEED NAME SEED(0|1) TRACKER ARGS...
  local need=$1 name=$2 seed=$3; shift 3
  local store=$R/stores/$name.duckdb
  local init=":"
  [ "$seed" = 1 ] && init="cp $R/seed.duckdb $store"
  echo "$need $init && $stop python3 -m tracker $* --store $store --json > $R/$name.json 2> $R/$name.err"
}
repeat_note="repeat of a best-three variant (issue 23 item 3), no verdict: the same source as run"
{
  # issue 23: the CholeskyQR2 leaf timed per panel shape and gated with its compiled kernels (scripts/fused-s35.txt's
  # probes), then knob variant fused_wy_cqlean's tests and, if they pass, its benchmark run
  echo "400 $stop python3 scripts/cholqr_leaf_study.py --time-leaf kernels/fused_wy.py --json $R/leaf-time.json \
> $R/leaf.log 2>&1; $stop python3 scripts/cholqr_leaf_study.py --leaf triton --suite both --json $R/leaf-gates.json \
>> $R/leaf.log 2>&1"
  cholqr=".kscratch/variants/fused_wy_cqlean.py --family qr-fused --parent fused_wy_tagged --quiet --timeout 500"
  echo "500 cp $R/seed.duckdb $R/stores/cholqr.duckdb && $stop python3 -m tracker run $cholqr --mode test \
--store $R/stores/cholqr.duckdb --json > $R/cholqr-test.json 2> $R/cholqr-test.err && $stop python3 -m tracker run \
$cholqr --store $R/stores/cholqr.duckdb --json > $R/cholqr-bench.json 2> $R/cholqr-bench.err"
  for i in 1 2 3; do
    job 540 aa-$i 0 ab kernels/graphed.py kernels/graphed.py --rounds 2 --timeout 300
  done
  for i in 1 2; do
    job 420 run-tagged-$i 1 run .kscratch/variants/fused_wy_tagged.py --family qr-fused --parent fused_wy_lean \
      --note "'$repeat_note 40dd18af1bdb'" --quiet --timeout 500
  done
  job 450 run-fused_wy-profile 1 run .kscratch/variants/fused_wy.py --family qr-fused --parent fused_wy_tagged --profile \
    --note "'$repeat_note 4c2abf1792b5, with the profiler (issue 21 item 10)'" --quiet --timeout 500
  job 500 fid_fused_wy_c3-7 0 fidelity kernels/fused_wy.py --problem $PROBLEM --rounds 2 --cases 3,7 --timeout 300
} > $R/jobs.txt
bash scripts/gpu_pool.sh $R/jobs.txt $R/logs $DEADLINE
cat $R/logs/*.log
# One export of every run the jobs made (not the seed's).
python3 - $R <<'PY'
import json, subprocess, sys
from pathlib import Path

root = Path(sys.argv[1])
(root / "exports").mkdir(exist_ok=True)
def ids(store):
    out = subprocess.run([sys.executable, "-m", "tracker", "list", "--store", str(store), "--json", "--limit", "100000"],
                         capture_output=True, text=True).stdout
    return {r["run_id"] for r in json.loads(out or "[]")}
seed = ids(root / "seed.duckdb")
for store in sorted((root / "stores").glob("*.duckdb")):
    new = sorted(ids(store) - seed)
    if new:
        subprocess.run([sys.executable, "-m", "tracker", "export", "--store", str(store), "--out",
                        str(root / "exports" / store.stem), *new], capture_output=True)
PY
if ls -d $R/exports/*/ > /dev/null 2>&1; then
  python3 -m tracker import --store $R/all.duckdb $R/exports/*/ > /dev/null 2>&1
  python3 -m tracker export --store $R/all.duckdb --out $R/export $(python3 -m tracker list --store $R/all.duckdb \
    --json --limit 100000 | python3 -c "import json,sys;print(' '.join(r['run_id'] for r in json.load(sys.stdin)))") \
    > /dev/null 2>&1
fi
python3 validation/fidelity_sessions.py $R | tee $R/fidelity.md
python3 validation/pairs_table.py $R | tee $R/pairs.md
rm -rf $R/stores $R/seed.duckdb* $R/all.duckdb* $R/exports
tar czf $OUT/pool.tgz -C /tmp pool
