#!/usr/bin/env bash
# Issue 23 on one H200, in one call: the WY-update microbenchmark, the gates of a variant on every case type
# under hidden seeds, and full tracker benchmark runs of a list of variants while the deadline allows.
#
#   bash scripts/h200_fused.sh COMMIT SECONDS LIST
#
# LIST: lines `NEED PATH FAMILY PARENT [extra tracker args]` (NEED: seconds a job needs, else skipped); lines
# `BENCH` / `GATES PATH` run the microbenchmark / the gate script. Results under $OUT: bench.json, logs.tgz,
# the export of this call's runs (export.tgz).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KERNELBEAM_GIT_COMMIT=${1:?commit} KERNELBEAM_GIT_BRANCH=kernels
DEADLINE=$(( $(date +%s) + ${2:?seconds} ))
S=/tmp/fused.duckdb
R=/tmp/r
mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,utilization.gpu --format=csv > $R/gpu.txt 2>&1
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
while read -r need path family parent extra; do
  [ -n "$need" ] && [ "${need:0:1}" != "#" ] || continue
  if [ "$need" = BENCH ]; then
    timeout $(( $(left) - 20 )) python3 scripts/wy_update_bench.py --out $OUT/bench.json < /dev/null 2>&1 | tee $R/bench.log | tail -50
    continue
  fi
  if [ "$need" = GATES ]; then
    timeout $(( $(left) - 20 )) python3 scripts/qr_gates_seeds.py $path < /dev/null 2>&1 | tee -a $R/gates.log | grep -E "FAIL|seed 0 dense|^Trace|Error" ; echo "gates rc=${PIPESTATUS[0]}"
    continue
  fi
  if [ $(left) -lt $need ]; then echo "skipped $path (left $(left) s < $need)"; continue; fi
  name=$(basename $path .py)
  python3 -m tracker run $path --store $S --family $family --parent $parent --note "$(note $path)" $extra \
    --quiet --json --timeout $(( $(left) - 15 )) < /dev/null > $R/run-$name$(echo $extra | tr -dc 'a-z0-9').json 2> $R/run-$name.err
  python3 - $R/run-$name$(echo $extra | tr -dc 'a-z0-9').json >> $R/summary.txt <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    d = d[0] if isinstance(d, list) else d
except Exception as e:
    print("no json", sys.argv[1], e); sys.exit()
open("/tmp/run_ids", "a").write(f"{d.get('run_id')}\n")
print(d.get("run_id"), d.get("variant"), d.get("mode"), d.get("status"), round(d.get("geomean_us") or 0),
      [round(c.get("mean_us") or 0) for c in d.get("cases") or []], (d.get("error") or "")[:200])
PY
  tail -1 $R/summary.txt
done < ${3:?list}
python3 -m tracker list --store $S --limit 12 2>&1 | tail -14
python3 -m tracker export --store $S --out /tmp/export $(cat /tmp/run_ids 2>/dev/null | grep -v None) > /dev/null 2>&1
tar czf $OUT/export.tgz -C /tmp export
tar czf $OUT/logs.tgz -C /tmp r
