#!/usr/bin/env bash
# Launch-bound timing fidelity of one kernel: 3 runs of the tracker and 3 of validation/spec_loop.py on cases
# 0, 1 and 2, as one-case jobs spread over every GPU of the machine (scripts/gpu_pool.sh: one job per GPU at a
# time). For kernels whose cases run into the method's 120 s case limit: householder_torch needs ~35 GPU-minutes
# for the 18 jobs, so one 10-minute call needs a 4-GPU machine.
#
#   bash validation/h200_fidelity_pool.sh COMMIT [KERNEL] [SECONDS]
#
# Results: $OUT/fidelity.tgz (one JSON per job, the per-GPU stores and their exports, the logs); the table:
# python validation/fidelity_table.py DIR (DIR: fid/ from the archive). The script prints it at the end too.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KERNELBEAM_GIT_COMMIT=${1:?commit} KERNELBEAM_GIT_BRANCH=main
KERNEL=${2:-kernels/householder_torch.py}
DEADLINE=$(( $(date +%s) + ${3:-570} ))
R=/tmp/fid
mkdir -p $R
nvidia-smi -L > $R/gpus.txt 2>&1
# Longest first (cases 1 and 2 hit the 120 s case limit, case 0 takes ~75 s), tracker and spec loop alternating.
job() {  # NEED KIND CASE ROUND
  local out=$R/fid_$2_c$3_r$4
  if [ $2 = tracker ]; then
    echo "$1 python3 -m tracker run $KERNEL --store $R/gpu\$GPU.duckdb --cases $3 --quiet --json --timeout 300 --family fidelity --note 'fidelity round $4, case $3' > $out.json"
  else
    echo "$1 timeout 300 python3 validation/spec_loop.py $KERNEL --cases $3 --json $out.json > $out.log 2>&1"
  fi
}
{
  for r in 1 2 3; do for c in 1 2; do job 150 tracker $c $r; job 150 spec $c $r; done; done
  for r in 1 2 3; do job 100 tracker 0 $r; job 100 spec 0 $r; done
} > $R/jobs
bash scripts/gpu_pool.sh $R/jobs $R/logs $DEADLINE
for s in $R/gpu*.duckdb; do
  [ -f "$s" ] && python3 -m tracker export --store "$s" --out "${s%.duckdb}-export" > /dev/null 2>&1
done
cat $R/logs/gpu*.log
python3 validation/fidelity_table.py $R | tee $R/table.md
tar czf $OUT/fidelity.tgz -C /tmp fid
