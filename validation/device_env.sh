# Sourced by the H200 call scripts in validation/ (h200_fidelity.sh, h200_pairs.sh): installs the carried
# wheels, sets the tracker's environment for a working tree without git history (the commit passed in, the
# carried sandbox, a lock folder of the call's own) and the call's deadline, with left() for the seconds to go.
#
#   . validation/device_env.sh COMMIT SECONDS
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KERNELBEAM_GIT_COMMIT=${1:?commit} KERNELBEAM_GIT_BRANCH=main
[ -x .tools/bwrap ] && export KERNELBEAM_BWRAP=$PWD/.tools/bwrap
export KERNELBEAM_LOCK_DIR=/tmp/locks
DEADLINE=$(( $(date +%s) + ${2:?seconds} ))
left() { echo $(( DEADLINE - $(date +%s) )); }
