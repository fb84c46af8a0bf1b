#!/usr/bin/env bash
# Issue 12 item 4, on the 2-GPU H200 machine, in one call: 4 variants as a queue over every GPU (`--gpus all`,
# one Dask worker per GPU), and the same 4 one after another on GPU 0, into one store; prints per-case means
# of each variant in both modes with their ratio, and the two wall clocks with theirs. Order: a first queue
# (it compiles), the sequential runs (the history the second queue orders by), the queue that is compared. Needs the wheels of
# scripts/fetch-scaleout-wheels.sh in .whl/. The store and the JSON outputs are left in $OUT.
set -u
# A dry run on a CPU machine: SUITE=smoke EXTRA="--cases 0,1 --device cpu" GPUS=2 bash scripts/h200_scaleout.sh
if [ -d .whl ] && ! python3 -c "import dask, distributed, duckdb" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
SUITE=${SUITE:-qr_v2}; GPUS=${GPUS:-all}; EXTRA=${EXTRA:-}
OUT=${OUT:-/tmp/scaleout-out}
mkdir -p "$OUT"
S=$OUT/scaleout.duckdb
# triton_panel_wy: graphed's route without the graph, written from the family file (scripts/knob_variant.py)
EAGER=$(python3 scripts/knob_variant.py kernels/graphed.py .kscratch/variants triton_panel_wy "the route without the graph" _GRAPH_MAX_ELEMS=0)
K=(kernels/graphed.py "$EAGER" kernels/geqrf_reference.py kernels/householder_torch.py)
nvidia-smi -L 2>/dev/null
python3 -c "import dask, distributed; print('dask', dask.__version__, 'distributed', distributed.__version__)" || exit 1

# A first queue compiles (Triton's cache is on disk, shared by both GPUs' processes); its wall is reported too.
c0=$(date +%s.%N)
python3 -m tracker run "${K[@]}" --gpus "$GPUS" --suite "$SUITE" $EXTRA --store "$S" --family scaleout-queue-cold --json \
  --quiet --timeout 400 > "$OUT/queue-cold.json" 2> "$OUT/queue-cold.err"
c1=$(date +%s.%N)
# Then one after another on GPU 0: its runs are the history the second queue orders by (longest first).
t1=$(date +%s.%N)
echo '[' > "$OUT/sequential.json"
for i in "${!K[@]}"; do
  CUDA_VISIBLE_DEVICES=0 python3 -m tracker run "${K[$i]}" --suite "$SUITE" $EXTRA --store "$S" --family scaleout-sequential \
    --json --quiet --timeout 400 >> "$OUT/sequential.json" 2>> "$OUT/sequential.err"
  [ "$i" -lt $(( ${#K[@]} - 1 )) ] && echo ',' >> "$OUT/sequential.json"
done
echo ']' >> "$OUT/sequential.json"
t2=$(date +%s.%N)
t0=$(date +%s.%N)
python3 -m tracker run "${K[@]}" --gpus "$GPUS" --suite "$SUITE" $EXTRA --store "$S" --family scaleout-queue --json --quiet \
  --timeout 400 > "$OUT/queue.json" 2> "$OUT/queue.err"
echo "queue exit $?"; tail -5 "$OUT/queue.err"
t1q=$(date +%s.%N)

python3 - "$OUT" "$t0" "$t1q" "$t1" "$t2" "$c0" "$c1" "${K[@]}" <<'PY'
import json, sys
from pathlib import Path
out, q0, q1, s0, s1, c0, c1 = sys.argv[1], *map(float, sys.argv[2:8])
names = [Path(k).stem for k in sys.argv[8:]]
queue, seq = json.load(open(f"{out}/queue.json")), json.load(open(f"{out}/sequential.json"))
queue = queue if isinstance(queue, list) else [queue]
print(f"\n{'variant':22} {'case':24} {'queue us':>12} {'seq us':>12} {'seq err':>9} {'q/s':>7}")
worst = 0.0
for name, q, s in zip(names, queue, seq):
    print(f"-- queue run {q['run_id']} ({q['status']}, {q['gpu']}) / sequential run {s['run_id']} ({s['status']}, {s['gpu']})")
    for cq, cs in zip(q["cases"], s["cases"]):
        mq, ms = cq.get("mean_us"), cs.get("mean_us")
        ratio = mq / ms if mq and ms else float("nan")
        if mq and ms:
            worst = max(worst, abs(ratio - 1))
        print(f"{name:22} {cq['spec']:24} {mq or 0:12.1f} {ms or 0:12.1f} {cs.get('err_us') or 0:9.1f} {ratio:7.4f}")
    gq, gs = q.get("geomean_us"), s.get("geomean_us")
    if gq and gs:
        print(f"{'':22} {'geomean':24} {gq:12.1f} {gs:12.1f} {'':9} {gq / gs:7.4f}")
wq, ws = q1 - q0, s1 - s0
print(f"\nwall: queue (--gpus all) {wq:.1f} s, sequential (GPU 0) {ws:.1f} s, ratio {wq / ws:.3f} (target <= 0.6)")
print(f"first queue, compiling, in request order: {c1 - c0:.1f} s")
print(f"largest per-case mean difference: {100 * worst:.2f}% (target 2%; launch-bound cases: within the spread)")
PY
python3 -m tracker list --store "$S" | head -12
