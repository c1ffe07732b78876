#!/usr/bin/env bash
# Soak version of kill_during_save_test: N kills (default 5000) at random
# moments of a save loop, each followed by a check that the state file is
# exactly the old or the new state. SEED picks the random moments (default:
# from the clock; printed, so a failing run can be replayed). The file lives
# on the disk under DIR (default /tmp: real fsyncs) rather than in memory as
# in the quick CI run.
#   tests/crash/kill-during-save.sh [N] [SEED] [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

iterations=${1:-5000}
seed=${2:-$(date +%s)}
binary=${LINSERVE_BUILD_DIR:-build}/tests/crash/kill_during_save_test
if [[ ! -x $binary ]]; then
  echo "$binary is missing: build the tests first (scripts/test, or cmake --build build)" >&2
  exit 1
fi
dir=${3:-/tmp}
echo "kill-during-save soak: $iterations kills, seed $seed, in $dir"
LINSERVE_KILL_ITERATIONS=$iterations LINSERVE_KILL_SEED=$seed LINSERVE_KILL_DIR=$dir \
  exec "$binary"
