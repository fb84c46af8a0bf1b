#!/usr/bin/env bash
# The kernel search on the H200, through the tracker, in one call: every variant of ours that runs the fast
# Triton route gets a full qr_v2 benchmark run (family, parent and hypothesis recorded), then the best three
# by geomean get two more runs each (three in all), the best one the 22 tests with the default seed and two
# hidden seeds, and a profiled run of its two slowest cases. Runs spread over every GPU (scripts/gpu_pool.sh).
#
#   bash scripts/h200_search.sh COMMIT [SECONDS] [LIST]
#
# LIST (default scripts/search-variants.txt): lines `NAME FAMILY PARENT FAMILY_FILE [KNOB=VALUE ...] [| hypothesis]`,
# parents first; knob variants are written from their family file into .kscratch/variants by scripts/knob_variant.py.
#
# The store starts from the shipped samples, so parents can be named by variant. Results: $OUT/search.tgz
# (the store, its export of this call's runs, the logs). Verdicts are recorded afterwards, by a person.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KERNELBEAM_GIT_COMMIT=${1:?commit} KERNELBEAM_GIT_BRANCH=main
DEADLINE=$(( $(date +%s) + ${2:-570} ))
R=/tmp/search S=/tmp/search/search.duckdb
mkdir -p $R
nvidia-smi -L > $R/gpus.txt 2>&1
python3 -m tracker import --store $S samples/*/ > $R/import.txt 2>&1
note() {  # the file's first string (contest files put it after `from task import ...`), on one line
  python3 - "$1" <<'PY'
import ast, sys
body = ast.parse(open(sys.argv[1]).read()).body
doc = next((n.value.value for n in body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)), "")
print(" ".join(str(doc).split()))
PY
}
T0=$(date +%s)
bench() {  # NEED NAME FAMILY PARENT SINCE PATH: one full benchmark run, its docstring (idea, parent, hypothesis) as the note
  printf '%s python3 scripts/wait_for_run.py %s %s %s 90; python3 -m tracker run %s --store %s --family %s --parent %s --note %q --quiet --json --timeout 200 > %s/%s.json\n' \
    "$1" $S "$4" "$5" "$6" $S "$3" "$4" "$(note $6)" $R "$2"
}
# Parents before children (a free GPU takes the next line): a child whose parent is earlier in the list waits
# until this call's run of it has started, then names the parent by variant, which gives that run; a parent
# from an earlier call is named the same way (its newest run in the samples).
LIST=${3:-scripts/search-variants.txt}
seen=" "
{
  python3 scripts/knob_variant.py --list "$LIST" .kscratch/variants | while read -r name family parent path; do
    since=0; [[ "$seen" == *" $parent "* ]] && since=$T0
    bench 100 "$name" "$family" "$parent" "$since" "$path"
    seen="$seen$name "
  done
} > $R/jobs-a
python3 scripts/knob_variant.py --list "$LIST" .kscratch/variants > $R/paths.txt
path_of() { awk -v n="$1" '$1 == n {print $4}' $R/paths.txt; }
bash scripts/gpu_pool.sh $R/jobs-a $R/logs $DEADLINE
# The best three passed full runs of this call, by geomean.
python3 - $R > $R/best.txt <<'PY'
import json, sys
from pathlib import Path
docs = {p.stem: json.loads(p.read_text()) for p in Path(sys.argv[1]).glob("*.json") if p.stat().st_size}
ranked = sorted((d["geomean_us"], name) for name, d in docs.items() if d.get("geomean_us"))
for _, name in ranked[:3]:
    print(name)
PY
cat $R/best.txt
{
  for k in $(cat $R/best.txt); do for i in 2 3; do
    printf '45 python3 -m tracker run %s --store %s --family repeat --parent %s --note "repeat %s of the best three" --quiet --json --timeout 200 > %s/%s-rep%s.json\n' "$(path_of $k)" $S $k $i $R $k $i
  done; done
  best=$(head -1 $R/best.txt)
  for seed in default 4242 90125; do
    extra=$([ $seed = default ] || echo "--seed $seed")
    printf '30 python3 -m tracker run %s --store %s --mode test %s --family tests --note "the 22 tests, seed %s" --quiet --json --timeout 200 > %s/test-%s.json\n' "$(path_of $best)" $S "$extra" $seed $R $seed
  done
  printf '45 python3 -m tracker run %s --store %s --cases 5,6 --profile --family profile --note "profile of the two slowest cases" --quiet --json --timeout 200 > %s/profile.json\n' "$(path_of $best)" $S $R
} > $R/jobs-b
bash scripts/gpu_pool.sh $R/jobs-b $R/logs $DEADLINE
python3 -m tracker list --store $S --limit 40 > $R/list.txt 2>&1
cat $R/list.txt
python3 -m tracker export --store $S --out $R/export > /dev/null 2>&1
cat $R/logs/gpu*.log | grep -E "^rc|^skipped"
tar czf $OUT/search.tgz -C /tmp search
