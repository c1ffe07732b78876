#!/usr/bin/env bash
# Multi-turn chat through a session against re-prefilling the whole history,
# the prefix-state cache, fork and export: writes a Qwen3.5 model of random
# weights (the 0.8B shape; the tiny one with --quick), serves it and runs
# linserve-conversation-bench against it (whose stateless turns each have a
# cache salt of their own, so the prefix cache finds nothing for them).
#
#   bench/conversation.sh [--quick] [--shape=0.8b|2b|tiny] [bench flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=SCRIPTDIR/../tests/linserve_process.sh
source tests/linserve_process.sh
build=${LINSERVE_BUILD_DIR:-build}
shape=0.8b
bench_args=()
for arg in "$@"; do
  case "$arg" in
    --quick) shape=tiny
             bench_args+=(--turns=3 --answer_bytes=200 --message_bytes=100 --stateless_turns=1,3
                          --prefix_prompt_bytes=600 --fork_lengths=200 --repeats=1) ;;
    --shape=*) shape=${arg#--shape=} ;;
    *) bench_args+=("$arg") ;;
  esac
done
export OPENBLAS_NUM_THREADS=1

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$build/bench/linserve-qwen35-random-model" --shape="$shape" --out="$work/model" >/dev/null
"$build/server/linserve" --model="$work/model" --listen=127.0.0.1:0 --http_listen=127.0.0.1:0 \
  --metrics_port=-1 --store_dir="$work/store" \
  --max_prompt_bytes=1000000 > /dev/null 2> "$work/server.log" &
pid=$!
linserve_wait_serving "$pid" "$work/server.log" 300 ||
  { echo "$linserve_error" >&2; cat "$work/server.log" >&2; exit 1; }
echo "Qwen3.5, the $shape shape, random weights, the server's default dtype"
"$build/bench/linserve-conversation-bench" --server="127.0.0.1:$linserve_port" "${bench_args[@]}"
