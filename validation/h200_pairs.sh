#!/usr/bin/env bash
# Issue 19 item 6 on one H200: paired A/B sessions (`tracker ab`) as many as the deadline allows, in one of two
# phases, each session's JSON and the store's export under $OUT.
#
#   bash validation/h200_pairs.sh COMMIT SECONDS aa        A/A: kernels/graphed.py against itself, all 12 benchmark
#                                                         cases, --rounds ${AA_ROUNDS:-2} (60 to 135 s a run, planned
#                                                         at ${AA_RUN_S:-130}: a 2-round session needs a
#                                                         call of about 585 s; on an H100 a session took
#                                                         over 540 s in session 46: H200s only, needs_h200)
#                                                         AA_RESUME=PAIR_ID first adds one round to a session
#                                                         that a deadline cut (tables.md names it)
#   bash validation/h200_pairs.sh COMMIT SECONDS planted   graphed.py against validation/planted_regression.py
#                                                         (+${PLANT_PCT:-2}% on 40x352), cases 1,2 (40x176 the
#                                                         unplanted control), --rounds ${PLANTED_ROUNDS:-4}
#   bash validation/h200_pairs.sh COMMIT SECONDS aa,planted   both, in that order: A/A sessions while a whole one
#                                                         fits, then planted ones in the time that is left
#
# The planted delay is PLANT_PCT of graphed's 40x352 mean from a first calibration run, timed as the contest times
# (the same route as validation/h200_stats.sh). `python validation/pairs_table.py DIR` prints the tables.
. validation/device_env.sh "${1:-}" "${2:-}"
PHASE=${3:?aa, planted or aa,planted}
S=/tmp/pairs.duckdb R=/tmp/pairs
mkdir -p $R
[ -f artifacts/pairs.duckdb ] && [ ! -f $S ] && cp artifacts/pairs.duckdb $S
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
aa_session() {  # aa_session NAME [tracker ab args]: one A/A session into $R/NAME.json, stopped short of the deadline
  local name=$1
  shift
  timeout -s TERM $(( $(left) - 20 )) python3 -m tracker ab kernels/graphed.py kernels/graphed.py "$@" --store $S \
    --json --timeout 300 > $R/$name.json 2> $R/$name.err
}
aa() {
  # a run's seconds as planned (session 31: three runs took 420 s; sessions 29-30: 300-410 s a 2-round session)
  local rounds=${AA_ROUNDS:-2} run_s=${AA_RUN_S:-130} i=0 f n
  # AA_RESUME=PAIR_ID: first the round that a deadline cut from that session (its store still in /tmp on a warm
  # machine, or carried as artifacts/pairs.duckdb); its JSON from the earlier call goes, the whole session's comes
  [ -n "${AA_RESUME:-}" ] && grep -l "\"pair_id\": \"$AA_RESUME\"" $R/aa-*.json 2>/dev/null | xargs -r rm -f
  # numbered after the sessions an earlier call on this warm machine left in $R
  for f in $R/aa-*.json; do [ -e "$f" ] && n=$(basename $f .json) && [ ${n#aa-} -gt $i ] && i=${n#aa-}; done
  if [ -n "${AA_RESUME:-}" ]; then
    i=$((i + 1))
    aa_session aa-$i --rounds 1 --resume $AA_RESUME
    echo "A/A session $AA_RESUME resumed (rc $?), $(left) s left"
  fi
  while [ $(left) -gt $(( rounds * 2 * run_s + 20 )) ]; do
    i=$((i + 1))
    # stopped short of the deadline, so that the export and the archive below always happen (session 31 lost one)
    aa_session aa-$i --rounds $rounds
    # no JSON: the command itself failed (not a run in it), and would fail the same way again
    [ -s $R/aa-$i.json ] || { echo "A/A session $i failed:"; tail -n 5 $R/aa-$i.err; return 1; }
    echo "A/A session $i done, $(left) s left"
  done
}
planted() {
  local rounds=${PLANTED_ROUNDS:-4} i=0
  [ $(left) -gt $(( rounds * 2 * 12 + 40 )) ] || { echo "no time left for a planted session"; return; }
  python3 -m tracker run kernels/graphed.py --cases 2 --store $S --json --quiet --family pairs-calibration \
    > $R/calibration.json 2> $R/calibration.err
  mean=$(python3 -c "import json; d=json.load(open('$R/calibration.json')); print(d['cases'][0]['mean_us'])") || return
  export PLANT_SHAPE=40x352 PLANT_DELAY_US=$(python3 -c "print($mean * ${PLANT_PCT:-2} / 100)")
  export KERNELBEAM_WORKER_ENV=PLANT_SHAPE,PLANT_DELAY_US
  echo "40x352 mean $mean us: planted $PLANT_DELAY_US us a call" | tee $R/planted.txt
  while [ $(left) -gt $(( rounds * 2 * 12 + 20 )) ]; do
    i=$((i + 1))
    timeout -s TERM $(( $(left) - 20 )) python3 -m tracker ab kernels/graphed.py validation/planted_regression.py \
      --cases 1,2 --rounds $rounds --min-effect 0.01 --store $S --json --timeout 120 > $R/planted-$i.json 2> $R/planted-$i.err
    [ -s $R/planted-$i.json ] || { echo "planted session $i failed:"; tail -n 5 $R/planted-$i.err; return 1; }
    echo "planted session $i done, $(left) s left"
  done
  unset PLANT_SHAPE PLANT_DELAY_US KERNELBEAM_WORKER_ENV
}
for phase in ${PHASE//,/ }; do
  case $phase in
    aa) aa ;;
    planted) planted ;;
    *) echo "phase: aa, planted or aa,planted" >&2; exit 2 ;;
  esac
done
python3 -m tracker export --store $S --out $R/export $(python3 -m tracker list --store $S --json --limit 1000 |
  python3 -c "import json,sys;print(' '.join(r['run_id'] for r in json.load(sys.stdin)))") > /dev/null 2>&1
python3 validation/pairs_table.py $R | tee $R/tables.md
tar czf $OUT/pairs-${PHASE//,/-}.tgz -C /tmp pairs
cp $S $OUT/pairs.duckdb  # carried as artifacts/pairs.duckdb, a later call resumes a cut session
