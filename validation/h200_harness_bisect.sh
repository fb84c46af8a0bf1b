#!/usr/bin/env bash
# Issue 19 item 3 on one H200: which part of the contest's harness costs launch-bound cases their time. Case 0
# (20x32) of KERNEL, one run per configuration per round in rotated order, each JSON under $OUT:
#   contest      the contest's qr_v2 folder as published, `--method contest`
#   inproc       the same harness with its benchmarks in its own process (no spawned pool worker)
#   norecheck    the same harness without the per-repetition recheck
#   tracker      the tracker's own method on the published folder
# (validation/harness_variants.py writes the two edited folders beside the published one, on the device only.)
#
#   bash validation/h200_harness_bisect.sh COMMIT SECONDS [KERNEL] [ROUNDS]   (about 60 s a run)
# `python validation/harness_bisect_table.py DIR` prints the table.
. validation/device_env.sh "${1:-}" "${2:-}"
KERNEL=${3:-kernels/graphed.py} ROUNDS=${4:-2}
PROBLEM=artifacts/rk/problems/linalg/qr_v2
S=/tmp/bisect.duckdb R=/tmp/bisect
mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
python3 validation/harness_variants.py $PROBLEM inproc norecheck || exit 1
configs=(contest inproc norecheck tracker)
for ((k = 1; k <= ROUNDS; k++)); do
  for ((j = 0; j < 4; j++)); do
    c=${configs[$(( (j + k - 1) % 4 ))]}
    [ $(left) -lt 70 ] && { echo "no time left for $c in round $k"; break 2; }
    case $c in
      contest) args="--problem $PROBLEM --method contest" ;;
      tracker) args="--problem $PROBLEM" ;;
      *) args="--problem ${PROBLEM}_$c --method contest" ;;
    esac
    timeout -s TERM $(( $(left) - 5 )) python3 -m tracker run $KERNEL $args --cases 0 --store $S --json --quiet \
      --family bisect --note "$c, round $k" --timeout 300 > $R/$c-r$k.json 2> $R/$c-r$k.err
    echo "round $k: $c rc $?, $(left) s left"
  done
done
python3 validation/harness_bisect_table.py $R | tee $R/table.md
tar czf $OUT/bisect.tgz -C /tmp bisect
