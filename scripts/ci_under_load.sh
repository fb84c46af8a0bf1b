#!/usr/bin/env bash
# Issue 20, item 6: the whole test suite, twice in a row, while another tracker run holds this machine's CPU
# device lock (the machine-wide lock folder, as any user's run takes it: tracker/capture/devicelock.py).
#
#   bash scripts/ci_under_load.sh            # the holder sleeps in its kernel: the lock is held, the CPU is not
#   BUSY=1 bash scripts/ci_under_load.sh     # the holder is real CPU work: smoke benchmark runs of
#                                            # kernels/householder_torch.py one after another (the lock is free
#                                            # for the moment between two of them)
#   RUNS=1 ... / SUITE_CMD="..."             # how many suite runs (default 2), and the command (default .ci/run)
#
# Prints each suite run's wall time and exit status, the load average before and after, and whether the lock was
# held (by the holder's pid) before and after each suite run. Exit status: 0 when every suite run passed and the
# lock was held throughout, else 1. Writes nothing into the checkout: the holder's store is a temporary file.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-2}
SUITE_CMD=${SUITE_CMD:-bash .ci/run}
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3

# The machine's lock folder, as a run outside the tests finds it (the tests set their own per test).
unset KERNELBEAM_LOCK_DIR
lock_dir=$("$PY" -c 'from tracker.capture.devicelock import lock_dir; print(lock_dir())')
lock="$lock_dir/cpu.lock"
work=$(mktemp -d /tmp/kb-under-load.XXXXXX)

holder_loop() {
  if [ "${BUSY:-0}" = 1 ]; then
    while :; do
      "$PY" -m tracker run kernels/householder_torch.py --suite smoke --device cpu --store "$work/holder.duckdb" \
        --quiet >>"$work/holder.log" 2>&1
    done
  else
    # 9 correctness cases of 400 s each: one run holds the lock for an hour.
    KERNELBEAM_WORKER_ENV=KB_CALL_SLEEP KB_CALL_SLEEP=400 exec "$PY" -m tracker run tests/variants/slow_calls.py \
      --suite smoke --mode test --device cpu --timeout 7200 --compile-timeout 900 --store "$work/holder.duckdb" \
      --quiet >>"$work/holder.log" 2>&1
  fi
}

lock_held() { # 0 when someone holds the CPU lock (a non-blocking flock of it fails)
  [ -e "$lock" ] && ! flock -n "$lock" true
}

set -m # the holder in a process group of its own, ended whole at the end
holder_loop &
holder=$!
set +m
trap 'kill -- -$holder 2>/dev/null; wait $holder 2>/dev/null' EXIT
for _ in $(seq 1 120); do lock_held && break; sleep 1; done
if ! lock_held; then
  echo "ci_under_load: the holder run never took $lock; its log:" >&2
  cat "$work/holder.log" >&2
  exit 1
fi
echo "ci_under_load: $lock held by a tracker run ($(cat "$lock_dir/cpu.holder" 2>/dev/null); ours: pid $holder, BUSY=${BUSY:-0}); $(uptime)"

status=0
for i in $(seq 1 "$RUNS"); do
  before=$(lock_held && echo held || echo FREE)
  start=$(date +%s)
  bash -c "$SUITE_CMD" >"$work/suite-$i.log" 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  after=$(lock_held && echo held || echo FREE)
  echo "ci_under_load: suite run $i: exit $rc in $((secs / 60)) min $((secs % 60)) s; lock $before before," \
    "$after after; $(tail -n 1 "$work/suite-$i.log"); $(uptime)"
  [ "$rc" = 0 ] && [ "$before" = held ] && [ "$after" = held ] || status=1
done
echo "ci_under_load: logs in $work"
exit $status
