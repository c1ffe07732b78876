#!/usr/bin/env bash
# n > 1 against n separate requests (bench/n_choices.py), on a server with
# the default model and the prefix-state cache off, started here on free
# loopback ports and stopped at the end. Arguments go to n_choices.py.
#
#   bench/n_choices.sh [--n=8] [--prompt_tokens=2000] [--max_tokens=64] [--rounds=5]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=SCRIPTDIR/../tests/linserve_process.sh
source tests/linserve_process.sh
build=${LINSERVE_BUILD_DIR:-build}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d)
pid=''
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
"$build/server/linserve" --model=models/default --listen=127.0.0.1:0 --http_listen=127.0.0.1:0 \
  --store_dir="$work/store" --prefix_cache_bytes=0 --max_prompt_bytes=20000 --metrics_port=-1 \
  2> "$work/server.log" &
pid=$!
linserve_wait_serving "$pid" "$work/server.log" 60 ||
  { echo "$linserve_error" >&2; cat "$work/server.log" >&2; exit 1; }
python3 bench/n_choices.py --port="$linserve_http_port" "$@"
