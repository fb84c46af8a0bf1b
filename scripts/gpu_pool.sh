#!/usr/bin/env bash
# Run a file of shell commands over every GPU of this machine, one command per GPU at a time, in file order
# (each free GPU takes the next line), so that no two timed runs share a GPU.
#
#   bash scripts/gpu_pool.sh JOBS LOGDIR DEADLINE_EPOCH_S
#
# A line is `NEED COMMAND`: COMMAND is skipped when fewer than NEED seconds are left before the deadline.
# COMMAND runs with CUDA_VISIBLE_DEVICES and GPU set to its GPU. One log per GPU in LOGDIR; returns when all
# lines are taken and done. Used by the H200 validation and search scripts.
set -u
JOBS=${1:?job file} LOGDIR=${2:?log folder} DEADLINE=${3:?deadline, epoch seconds}
mkdir -p "$LOGDIR"
NEXT=$LOGDIR/.taken && : > "$NEXT"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$NGPU" -gt 0 ] || NGPU=1
take() {  # the next job line, or nothing; one taker at a time
  (
    flock 9
    n=$(wc -l < "$NEXT")
    line=$(sed -n "$((n + 1))p" "$JOBS")
    [ -n "$line" ] && echo x >> "$NEXT"
    echo "$line"
  ) 9> "$LOGDIR/.lock"
}
worker() {
  export CUDA_VISIBLE_DEVICES=$1 GPU=$1
  while true; do
    local line; line=$(take)
    [ -n "$line" ] || break
    local need=${line%% *} cmd=${line#* } t=$(date +%s)
    if [ $((DEADLINE - t)) -lt "$need" ]; then echo "skipped ($((DEADLINE - t)) s left): $cmd"; continue; fi
    bash -c "$cmd"
    echo "rc $? after $(( $(date +%s) - t )) s on GPU $1: $cmd"
  done
}
for ((g = 0; g < NGPU; g++)); do worker $g >> "$LOGDIR/gpu$g.log" 2>&1 & done
wait
