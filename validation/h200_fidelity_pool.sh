#!/usr/bin/env bash
# Launch-bound timing fidelity of one kernel: 3 runs of the tracker and 3 of validation/spec_loop.py on cases
# 0, 1 and 2, as a pool of one-case jobs spread over every GPU of the machine (one job per GPU at a time, so no
# job shares its GPU). Needed for kernels whose cases run into the method's 120 s case limit: householder_torch
# takes ~5 min per round of the three cases, so 6 rounds do not fit one 10-minute call on one GPU.
#
#   bash validation/h200_fidelity_pool.sh COMMIT [KERNEL] [DEADLINE_S]
#
# Results: $OUT/fidelity.tgz (one JSON per job, the per-GPU stores and their exports, a log per GPU).
# Read them with: python validation/fidelity_table.py DIR
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KERNELBEAM_GIT_COMMIT=${1:?commit} KERNELBEAM_GIT_BRANCH=main
KERNEL=${2:-kernels/householder_torch.py}
DEADLINE=${3:-570}
R=/tmp/fid JOBS=/tmp/fid/jobs NEXT=/tmp/fid/next
mkdir -p $R && : > $NEXT
T0=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
bundle() { tar czf $OUT/fidelity.tgz -C /tmp fid 2>/dev/null; }
nvidia-smi -L > $R/gpus.txt 2>&1
NGPU=$(grep -c '^GPU' $R/gpus.txt)
# Longest first (cases 1 and 2 hit the 120 s case limit, case 0 takes ~75 s), tracker and spec loop alternating.
{
  for r in 1 2 3; do for c in 1 2; do echo "tracker $c $r"; echo "spec $c $r"; done; done
  for r in 1 2 3; do echo "tracker 0 $r"; echo "spec 0 $r"; done
} > $JOBS
take() {  # the next job line, or nothing; one taker at a time
  (
    flock 9
    n=$(wc -l < $NEXT)
    line=$(sed -n "$((n + 1))p" $JOBS)
    [ -n "$line" ] && echo x >> $NEXT
    echo "$line"
  ) 9> $R/take.lock
}
worker() {
  local g=$1
  export CUDA_VISIBLE_DEVICES=$g
  while true; do
    local job; job=$(take)
    [ -n "$job" ] || break
    set -- $job
    local kind=$1 c=$2 r=$3 need=$([ "$2" = 0 ] && echo 100 || echo 150)
    if [ $(left) -lt $need ]; then echo "skip $job: $(left) s left"; continue; fi
    local t=$(date +%s)
    if [ $kind = tracker ]; then
      python3 -m tracker run $KERNEL --store $R/gpu$g.duckdb --cases $c --quiet --json --timeout 300 \
        --family fidelity --note "fidelity round $r, case $c, GPU $g" > $R/fid_tracker_c${c}_r$r.json
    else
      timeout 300 python3 validation/spec_loop.py $KERNEL --cases $c --json $R/fid_spec_c${c}_r$r.json \
        > $R/fid_spec_c${c}_r$r.log 2>&1
    fi
    echo "$job on GPU $g: $(( $(date +%s) - t )) s (at $(( $(date +%s) - T0 )) s)"
    bundle
  done
}
for ((g = 0; g < NGPU; g++)); do worker $g > $R/worker$g.log 2>&1 & done
wait
for ((g = 0; g < NGPU; g++)); do
  [ -f $R/gpu$g.duckdb ] && python3 -m tracker export --store $R/gpu$g.duckdb --out $R/export$g > /dev/null 2>&1
done
cat $R/worker*.log
bundle
echo "all done at $(( $(date +%s) - T0 )) s"
