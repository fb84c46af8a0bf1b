#!/usr/bin/env bash
# `run --ncu` on one H200, in one call: fused_wy on cases 0 and 3 with Nsight Compute, then what the tracker
# recorded (`show` and `show --json`), the run's export and its .ncu-rep reports, under $OUT.
#
#   bash scripts/h200_ncu.sh [SECONDS]     # SECONDS: the run's --timeout (default 200); the ncu pass spends what
#                                          # the timed cases leave of it
#
# Expects the wheels in .whl and bwrap in .tools (docs/gpu-machine.md), and KERNELBEAM_GIT_COMMIT set where the
# checkout travels without its .git. Results: run.json, run.err, show.txt, show.json, export.tgz, ncu-case*.ncu-rep,
# metrics.txt (the stall metrics the first report holds, to check the names tracker.capture.ncu reads).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KERNELBEAM_BWRAP=${KERNELBEAM_BWRAP:-$PWD/.tools/bwrap}
export KERNELBEAM_LOCK_DIR=${KERNELBEAM_LOCK_DIR:-/tmp/locks}
OUT=${OUT:-/tmp/ncu-out}
S=/tmp/n.duckdb
mkdir -p "$OUT" "$KERNELBEAM_LOCK_DIR"
# ncu runs above the sandbox's filter only where Yama keeps the kernel out of its memory; our own kernel is trusted
SANDBOX=$([ "$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)" -ge 1 ] || echo --no-sandbox)
python3 -m tracker run kernels/fused_wy.py --cases 0,3 --ncu $SANDBOX --store $S --timeout "${1:-200}" --quiet --json \
  < /dev/null > "$OUT/run.json" 2> "$OUT/run.err"
echo "run exit $?"
cat "$OUT/run.err"
RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_id'])" "$OUT/run.json") || exit 1
python3 -m tracker show --store $S "$RUN" | tee "$OUT/show.txt"
python3 -m tracker show --store $S "$RUN" --json > "$OUT/show.json"
python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['ncu'], indent=1)[:6000])" "$OUT/show.json"
python3 -m tracker export --store $S --out /tmp/export "$RUN"
tar czf "$OUT/export.tgz" -C /tmp export
cp $S.traces/"$RUN"/ncu-case*.ncu-rep "$OUT/" 2>/dev/null
python3 - "$S.traces/$RUN" > "$OUT/metrics.txt" 2>&1 <<'PY'
import glob, sys
sys.path[:0] = sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"))
import ncu_report
reports = sorted(glob.glob(sys.argv[1] + "/ncu-case*.ncu-rep"))
if reports:
    action = ncu_report.load_report(reports[0]).range_by_idx(0).action_by_idx(0)
    print(action.name())
    print("\n".join(n for n in sorted(action.metric_names()) if "stall" in n or n.startswith("launch__")))
PY
head -c 3000 "$OUT/metrics.txt"
