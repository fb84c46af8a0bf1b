#!/usr/bin/env bash
# Issue 19 item 3 on one H200: `tracker fidelity` sessions (the contest's own qr_v2 harness against the tracker,
# alternating rounds), one after another within a deadline, each session's JSON and the store's export under $OUT.
#
#   bash validation/h200_fidelity.sh COMMIT SECONDS KERNEL:CASES[:PAIR_ID] [KERNEL:CASES[:PAIR_ID] ...]
#   e.g. bash validation/h200_fidelity.sh 85f0c24 560 kernels/fused_wy.py:1,2 kernels/graphed.py:1,2
#
# ROUNDS (default 5) rounds per session. A session still running at the deadline gets SIGTERM: its table is what
# its stored runs say, and KERNEL:CASES:PAIR_ID in the next call (on the same, still warm machine) adds ROUNDS
# rounds to it (`tracker fidelity --resume`). The store comes back as $OUT/fidelity.duckdb; placed at
# artifacts/fidelity.duckdb and carried, the next call goes on with it. Needs the contest's folder under
# artifacts/rk (see README, "Fidelity"), never committed.
# `python validation/fidelity_sessions.py DIR` prints the tables of every session in DIR.
. validation/device_env.sh "${1:-}" "${2:-}"
shift 2
# PROBLEM: another copy of the folder (validation/harness_variants.py writes edited ones beside it); its sessions'
# files are named after it
PUBLISHED=artifacts/rk/problems/linalg/qr_v2
PROBLEM=${PROBLEM:-$PUBLISHED}
TAG=$([ "$PROBLEM" = "$PUBLISHED" ] || echo _$(basename "$PROBLEM"))
S=/tmp/fidelity.duckdb R=/tmp/fidelity
mkdir -p $R
[ -f artifacts/fidelity.duckdb ] && [ ! -f $S ] && cp artifacts/fidelity.duckdb $S
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
for target in "$@"; do
  IFS=: read -r kernel cases pair <<< "$target"
  [ $(left) -lt 90 ] && { echo "no time left for $target"; break; }
  name=$(basename $kernel .py)_c${cases//,/-}${pair:+_$pair}$TAG
  # 480 s a run: the folder route's 640x512 case takes up to 200 repetitions of about 0.77 s (its checker awaited
  # first), so cases 3 and 7 together need about 320 s
  # stopped 30 s short of the deadline: the export and the archive below must fit (session 46 lost a call's store
  # with no margin)
  timeout -s TERM $(( $(left) - 30 )) python3 -m tracker fidelity $kernel --problem $PROBLEM --rounds ${ROUNDS:-5} \
    --cases $cases ${pair:+--resume $pair} --store $S --json --timeout 480 > $R/$name.json 2> $R/$name.err
  echo "$target: rc $?, $(left) s left"
done
python3 -m tracker export --store $S --out $R/export $(python3 -m tracker list --store $S --json --limit 1000 |
  python3 -c "import json,sys;print(' '.join(r['run_id'] for r in json.load(sys.stdin)))") > /dev/null 2>&1
python3 validation/fidelity_sessions.py $R | tee $R/tables.md
tar czf $OUT/fidelity.tgz -C /tmp fidelity
cp $S $OUT/fidelity.duckdb
