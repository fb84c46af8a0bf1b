#!/usr/bin/env bash
# Issue 23 on one H200, in one call: knob variants written from their family file, a quick screen of them in
# the development harness, and full tracker runs (family, parent, hypothesis note, and a verdict against the
# parent's run with its reason) while the deadline allows; the call's runs are exported into $OUT.
#
#   bash scripts/h200_fused.sh COMMIT SECONDS LIST
#
# LIST lines (# comments):
#   VARIANT NAME FAMILY_FILE KNOB=VALUE ... | hypothesis   writes .kscratch/variants/NAME.py (scripts/knob_variant.py)
#   DEV NEED CASES PATH ...        scripts/qr_devbench.py --reps 3 on those cases (screen; not recorded); the first
#                                  PATH is the baseline, the others are ranked by the weighted geomean of their
#                                  best repetitions (each screened case counts as many times as its shape has qr_v2
#                                  benchmarks, 20x32 none; best, not mean: three repetitions, and 640x512 is bimodal)
#   PAIRED NEED CASES REPS ROUNDS PATH ...   scripts/paired_screen.py: each PATH (PATH@KNOB=V,... too) in its own
#                                  devbench process per round, the first the baseline, judged by per-round ratios
#                                  (the screen for 640x512, which is bimodal between processes; not recorded)
#   BEST K NEED FAMILY PARENT [tracker args]   a tracker run (as below) of the K-th best screened variant
#   BENCH / GATES PATH             the WY-update microbenchmark / the gate script on every case type and seeds
#   SOURCE NAME RUN                writes .kscratch/variants/NAME.py from the stored source of RUN (a run in samples/):
#                                  a variant that no family file generates any more, for a repeat
#   REPEAT NEED PATH FAMILY PARENT [tracker args]   a run as below that takes no verdict (a repeat of known code)
#   AFTERPASS NEED PATH FAMILY PARENT [tracker args]   a run as below, only if the run before it passed
#   AFTERFAIL NEED PATH FAMILY PARENT [tracker args]   a run as below, only if the last run did not pass (a
#                                  fallback: the call's time goes to the parent when a variant fails its tests)
#   AB NEED A B [tracker ab args]  `tracker ab A B` (files or stored variant names): both interleaved per round, each
#                                  case judged by its paired per-round ratios; the pair's runs join the export. A
#                                  full fused_wy run takes about 300 s on the H200 (every repetition rechecked, as
#                                  in the contest), so a pair that fits one call names its cases (--cases 5,6:
#                                  about 150 s a run)
#   PROBE NEED SCRIPT [args]       python3 SCRIPT args --json under $R (a kernel probe; not recorded in the store)
#   NEED PATH FAMILY PARENT [tracker args]   a tracker run (skipped when fewer than NEED seconds are left);
#       PARENT is a variant name or run id; a benchmark run gets the verdict promoted when its geomean is below
#       the parent's newest passed benchmark run in the store, else rejected, with both figures as the reason.
# Results under $OUT: export.tgz (the Parquet export of this call's runs), logs.tgz (with MEMLOG_ON=1, mem.csv: GPU
# memory per process, every second).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KERNELBEAM_GIT_COMMIT=${1:?commit} KERNELBEAM_GIT_BRANCH=kernels
[ -x .tools/bwrap ] && export KERNELBEAM_BWRAP=$PWD/.tools/bwrap
export KERNELBEAM_LOCK_DIR=/tmp/locks
DEADLINE=$(( $(date +%s) + ${2:?seconds} ))
S=/tmp/fused.duckdb
R=/tmp/r
mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,utilization.gpu --format=csv > $R/gpu.txt 2>&1
# With MEMLOG_ON=1, GPU memory per process every second into mem.csv (session 40 found the checker's cache growing
# beside the worker with it). Off by default: nvidia-smi's process query may stall the timed loops it runs beside.
MEMLOG=
if [ "${MEMLOG_ON:-0}" = 1 ]; then
  while :; do
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1 | sed "s/^/$(date +%s), /"
    sleep 1
  done > $R/mem.csv &
  MEMLOG=$!
fi
python3 -m tracker import --store $S samples/*/ > /dev/null 2>&1
note() {
  python3 - "$1" <<'PY'
import ast, sys
body = ast.parse(open(sys.argv[1]).read()).body
doc = next((n.value.value for n in body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)), "")
print(" ".join(str(doc).split()))
PY
}
left() { echo $(( DEADLINE - $(date +%s) )); }
verdict() {  # RUN_JSON PARENT: promoted/rejected against the parent's newest passed benchmark run on this GPU model
  python3 - "$1" "$2" "$S" <<'PY'
import json, subprocess, sys
doc, parent, store = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
doc = doc[0] if isinstance(doc, list) else doc
if doc.get("mode") != "benchmark" or doc.get("cases") is None or len(doc["cases"]) != 12:
    sys.exit()
runs = json.loads(subprocess.run(["python3", "-m", "tracker", "list", "--store", store, "--json", "--limit", "500"],
                                 capture_output=True, text=True).stdout or "[]")
prev = [r for r in runs if (r["variant"] == parent or r["run_id"] == parent) and r["status"] == "passed"
        and r.get("geomean_us") and r["run_id"] != doc["run_id"] and r.get("gpu") == doc.get("gpu")]
g = doc.get("geomean_us")
if g is None and doc.get("status") in ("timeout", "cancelled"):
    kind, reason = "inconclusive", f"{doc['status']} before every case was timed"
elif g is None and "not judged" in (doc.get("error") or ""):  # the checker failed, not the kernel's answer
    kind, reason = "inconclusive", f"cases not judged: {doc['error'][:400]}"
elif g is None:
    kind, reason = "rejected", f"did not pass: {(doc.get('error') or doc.get('status'))[:200]}"
elif not prev:
    kind, reason = "inconclusive", f"geomean {g:.0f} us; no passed benchmark run of parent {parent} on {doc.get('gpu')} in the store"
else:
    p = prev[0]
    show = json.loads(subprocess.run(["python3", "-m", "tracker", "show", p["run_id"], "--store", store, "--json"],
                                     capture_output=True, text=True).stdout)
    pm = {c["case_idx"]: c["mean_us"] for c in show["cases"]}
    per = ", ".join(f"{c['case_idx']}: {pm.get(c['case_idx'], 0):.0f}->{c['mean_us']:.0f}" for c in doc["cases"])
    kind = "promoted" if g < p["geomean_us"] else "rejected"
    reason = (f"geomean {g:.0f} us vs parent {parent} {p['geomean_us']:.0f} us (run {p['run_id']}); "
              f"per case mean us {per}")
v = subprocess.run(["python3", "-m", "tracker", "verdict", doc["run_id"], kind, "--reason", reason, "--store", store],
                   capture_output=True, text=True)
print("verdict", doc["run_id"], kind, reason, v.stderr.strip() if v.returncode else "")
PY
}
run_job() {  # NEED PATH FAMILY PARENT [tracker args]
    local need=$1 path=$2 family=$3 parent=$4; shift 4; local extra="$*"
    if [ $(left) -lt $need ]; then echo "skipped $path $extra (left $(left) s < $need)"; return; fi
    name=$(basename $path .py); tag=$name$(echo $extra | tr -dc 'a-z0-9')
    python3 -m tracker run $path --store $S --family $family --parent $parent --note "$(note $path)" $extra \
      --quiet --json --timeout $(( $(left) - 15 )) < /dev/null > $R/run-$tag.json 2> $R/run-$tag.err
    rm -f $R/last-status
    seen=$(cat $R/summary.txt 2>/dev/null | wc -l)
    python3 - $R/run-$tag.json $R/last-status >> $R/summary.txt <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    d = d[0] if isinstance(d, list) else d
except Exception as e:
    print("no json", sys.argv[1], e); sys.exit()
open("/tmp/run_ids", "a").write(f"{d.get('run_id')}\n")
open(sys.argv[2], "w").write(str(d.get("status")))
print(d.get("run_id"), d.get("variant"), d.get("mode"), d.get("status"), round(d.get("geomean_us") or 0),
      [round(c.get("mean_us") or 0) for c in d.get("cases") or []], (d.get("error") or "")[:200],
      {k: round(v) for k, v in (d.get("time") or {}).items()})
for c in d.get("cases") or []:  # why each failed case failed (an OOM in the checker reads like a wrong answer above)
    if c.get("passed") is False:
        print(f"  case {c.get('case_idx')}: {(c.get('message') or '')[:300]}")
PY
    tail -n +$(( seen + 1 )) $R/summary.txt
    [ "${REPEAT:-}" = 1 ] || verdict $R/run-$tag.json $parent
}
while IFS= read -r line; do
  set -- ${line%%|*}
  [ $# -gt 0 ] && [ "${1:0:1}" != "#" ] || continue
  case $1 in
  VARIANT)
    hyp=${line#*|}; [ "$hyp" = "$line" ] && hyp="(none given)"
    python3 scripts/knob_variant.py "$3" .kscratch/variants "$2" "$(echo $hyp)" "${@:4}"
    # the hypothesis is part of the source: another hypothesis under a stored name is another variant, not a repeat
    old=$(python3 -m tracker show "$2" --store $S --json 2>/dev/null |
      python3 -c "import json,sys; d=json.load(sys.stdin); print(d['variant_sha256'], d['run_id'])" 2>/dev/null)
    new=$(sha256sum .kscratch/variants/$2.py | cut -d' ' -f1)
    [ -z "$old" ] || [ "${old%% *}" = "$new" ] || echo "VARIANT $2: its source differs from the stored $2 (run" \
      "${old##* }): a new variant under that name; a repeat takes SOURCE $2 ${old##* } and REPEAT lines" ;;
  DEV)
    [ $(left) -gt $2 ] || { echo "skipped DEV $4 (left $(left) s)"; continue; }
    timeout $(( $(left) - 20 )) python3 scripts/qr_devbench.py --suite bench --reps 3 --budget 1 --cases $3 "${@:4}" \
      --json $R/dev.json < /dev/null 2>&1 | tee -a $R/dev.log | grep -vE "^\s*$" | tail -80
    python3 - $R/dev.json > $R/ranked.txt <<'PY'
import json, math, sys
# 20x32 does not rank: between processes its best of three moves 35..64 us on unchanged code (session 24)
weight = {"20x32": 0, "40x176": 1, "40x352": 1, "640x512": 4, "60x1024": 3, "8x2048": 1, "2x4096": 1}
res = json.load(open(sys.argv[1]))
base = next(iter(res))
score = {}
for spec, rows in res.items():
    if rows and all(r["ok"] for r in rows):
        w = sum(weight[r["shape"]] for r in rows) or 1
        score[spec] = math.exp(sum(weight[r["shape"]] * math.log(r["best_us"]) for r in rows) / w)
for spec in sorted((k for k in score if k != base), key=score.get):
    print(spec, round(score[spec]), round(score.get(base, 0)))
PY
    cat $R/ranked.txt ;;
  PAIRED)
    [ $(left) -gt $2 ] || { echo "skipped PAIRED $6 ... (left $(left) s)"; continue; }
    timeout $(( $(left) - 20 )) python3 scripts/paired_screen.py --cases $3 --reps $4 --rounds $5 "${@:6}" \
      --json $R/paired-$(date +%s).json < /dev/null 2>&1 | tee -a $R/paired.log | tail -40 ;;
  BEST)
    path=$(sed -n "${2}p" $R/ranked.txt 2>/dev/null | cut -d' ' -f1)
    [ -n "$path" ] || { echo "no screened variant of rank $2"; continue; }
    shift 2; run_job "$1" "$path" "${@:2}" ;;
  BENCH)
    timeout $(( $(left) - 20 )) python3 scripts/wy_update_bench.py --out $R/bench.json < /dev/null 2>&1 | tee $R/bench.log | tail -50 ;;
  GATES)
    timeout $(( $(left) - 20 )) python3 scripts/qr_gates_seeds.py $2 < /dev/null 2>&1 | tee -a $R/gates.log | grep -E "FAIL|seed 0 dense|^Trace|Error"; echo "gates rc=${PIPESTATUS[0]}" ;;
  SOURCE)
    mkdir -p .kscratch/variants
    python3 -m tracker show "$3" --source --store $S > ".kscratch/variants/$2.py" && echo "wrote .kscratch/variants/$2.py from run $3" ;;
  REPEAT) shift; REPEAT=1 run_job "$@" ;;
  AB)
    [ $(left) -gt $2 ] || { echo "skipped AB $3 $4 (left $(left) s)"; continue; }
    f=$R/ab-$(date +%s).json
    timeout $(( $(left) - 10 )) python3 -m tracker ab "$3" "$4" --store $S --json --timeout 600 "${@:5}" \
      < /dev/null > $f 2> ${f%.json}.err
    python3 - $f <<'PY' | tee -a $R/summary.txt
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("AB: no json", sys.argv[1], e); sys.exit()
ids = [r for side in ("a", "b") for r in d[side]["runs"] if r]
open("/tmp/run_ids", "a").write("".join(f"{r}\n" for r in ids))
print(f"pair {d['pair_id']}: {d['a']['variant']} -> {d['b']['variant']}, {d['rounds']} rounds, runs {' '.join(ids)}")
for c in d["cases"]:
    seen = f"ratio {c['ratio']:.4f}" if c["ratio"] else " ".join(f"{r:.4f}" for r in c.get("ratios") or ()) + " (rounds)"
    print(f"  {c['case']:<24} {c['mark']} {c['verdict']:<8} {seen}", c.get("reason", ""))
PY
    ;;
  PROBE)
    [ $(left) -gt $2 ] || { echo "skipped PROBE $3 (left $(left) s)"; continue; }
    probes=$(( ${probes:-0} + 1 ))  # numbered: two probes of one script keep both JSONs
    timeout $(( $(left) - 10 )) python3 "$3" "${@:4}" --json $R/probe-$(basename $3 .py)-$probes.json < /dev/null 2>&1 |
      tee -a $R/probe.log | tail -30 ;;
  AFTERPASS)  # a run line that runs only if the run before it passed (no benchmark of a kernel that failed its tests)
    shift
    if [ "$(cat $R/last-status 2>/dev/null)" = passed ]; then run_job "$@"; else echo "skipped $2: the run before did not pass"; fi ;;
  AFTERFAIL)  # a run line that runs only if the last run did not pass
    shift
    if [ "$(cat $R/last-status 2>/dev/null)" != passed ]; then run_job "$@"; else echo "skipped $2: the last run passed"; fi ;;
  *) run_job "$@" ;;
  esac
done < ${3:?list}
python3 -m tracker list --store $S --limit 12 2>&1 | tail -14
[ -s /tmp/run_ids ] && python3 -m tracker export --store $S --out /tmp/export $(grep -v None /tmp/run_ids) > /dev/null 2>&1
[ -n "$MEMLOG" ] && kill $MEMLOG 2>/dev/null
tar czf $OUT/export.tgz -C /tmp export
tar czf $OUT/logs.tgz -C /tmp r
