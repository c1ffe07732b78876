#!/usr/bin/env bash
# The end-to-end benchmark: starts a server with the default model on a free
# loopback port, runs linserve-e2e-bench against it, stops the server.
#
#   bench/e2e.sh [--quick] [--record] [--no-rwkv7] [--named-states-only]
#
# --quick: tiny sizes (a smoke run). --record: also add the output to
# bench/RESULTS.md, newest first. Last, the server is measured against its
# engine at a 65,536-token vocabulary: RWKV-7 of the 0.1B shape with random
# weights written at run time (380 MB in bfloat16, under the run's temporary
# directory; the tiny shape, still with 65,536 tokens, with --quick),
# concurrency 32 in rounds beside the same closed loop run by the engine
# alone (bench/server_work.h: what any server could reach here);
# --no-rwkv7 leaves that out.
# Then section 8, named states, for both models (the default and, unless
# --no-rwkv7, the RWKV-7 one), each on a server with the prefix-state cache
# off: time to first token of a turn from a state made once from a 4,096-token
# prompt (256 with --quick) vs the whole prompt sent, and CreateNamedState vs
# one cold prefill. --named-states-only runs section 8 alone.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=SCRIPTDIR/../tests/linserve_process.sh
source tests/linserve_process.sh
build=${LINSERVE_BUILD_DIR:-build}
quick=() record=0 rwkv7=1 named_only=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=(--quick) ;;
    --record) record=1 ;;
    --no-rwkv7) rwkv7=0 ;;
    --named-states-only) named_only=1 ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# The server measured, and beside it the same model with the prefix-state
# cache off (section 6 compares their throughput).
start_server() {
  local name=$1; shift
  "$build/server/linserve" --model="${model:-models/default}" --listen=127.0.0.1:0 \
    --http_listen=127.0.0.1:0 --store_dir="$work/$name-store" --max_prompt_bytes=20000 "$@" \
    2> "$work/$name.log" &
  pids+=($!)
  linserve_wait_serving "$!" "$work/$name.log" 60 ||
    { echo "$linserve_error" >&2; cat "$work/$name.log" >&2; exit 1; }
}
shape=0.1b
[ ${#quick[@]} -eq 0 ] || shape=tiny
if [ "$rwkv7" = 1 ]; then
  "$build/bench/linserve-rwkv7-random-model" --shape="$shape" --vocab_size=65536 "$work/rwkv7"
fi
: > "$work/out.txt"
if [ "$named_only" = 0 ]; then
  start_server main --metrics_port=0
  port=$linserve_port metrics_port=$linserve_metrics_port
  start_server nocache --metrics_port=-1 --prefix_cache_bytes=0
  nocache_port=$linserve_port

  "$build/bench/linserve-e2e-bench" --server="127.0.0.1:$port" --model=models/default \
    --fsync_dir="$work/main-store" --server_without_prefix_cache="127.0.0.1:$nocache_port" "${quick[@]}" | tee "$work/out.txt"
  echo "the measured server's prefix-state cache after the run:" | tee -a "$work/out.txt"
  curl -s "http://127.0.0.1:$metrics_port/metrics" | grep '^linserve_prefix_cache' |
    sed 's/^/  /' | tee -a "$work/out.txt"

  if [ "$rwkv7" = 1 ]; then
    echo | tee -a "$work/out.txt"
    echo "7. A 65,536-token vocabulary: RWKV-7 of the $shape shape, random weights in bfloat16" |
      tee -a "$work/out.txt"
    model=$work/rwkv7 start_server rwkv7 --metrics_port=-1
    "$build/bench/linserve-e2e-bench" --server="127.0.0.1:$linserve_port" --model="$work/rwkv7" \
      --overhead_only "${quick[@]}" | tee -a "$work/out.txt"
  fi
fi

# 8. Named states, each model on a server of its own with the prefix-state
# cache off, so that every prefill measured is cold.
# Repeats: 11 of the default model (a 4,096-token prefill is a quarter of a
# second), 5 of RWKV-7 (about 12 s each, three of them per repeat).
named_tokens=4096 named_repeats=(11 5)
[ ${#quick[@]} -eq 0 ] || { named_tokens=256 named_repeats=(3 3); }
named_models=(models/default)
named_labels=("the default model (byte tokenizer)")
if [ "$rwkv7" = 1 ]; then
  named_models+=("$work/rwkv7")
  named_labels+=("RWKV-7 of the $shape shape, random weights in bfloat16, 65,536-token World vocabulary")
fi
for i in "${!named_models[@]}"; do
  named_model=${named_models[$i]} named_store=named-$(basename "${named_models[$i]}")
  echo | tee -a "$work/out.txt"
  echo "8. Named states, ${named_labels[$i]}" | tee -a "$work/out.txt"
  model=$named_model start_server "$named_store" --metrics_port=-1 --prefix_cache_bytes=0 \
    --max_prompt_bytes=65536
  "$build/bench/linserve-e2e-bench" --server="127.0.0.1:$linserve_port" --model="$named_model" \
    --named_state_prompt_tokens="$named_tokens" --named_state_repeats="${named_repeats[$i]}" \
    --fsync_dir="$work/$named_store-store" | tee -a "$work/out.txt"
  kill "${pids[-1]}" 2>/dev/null || true
  wait "${pids[-1]}" 2>/dev/null || true
done

if [ "$record" = 1 ]; then
  {
    echo "## End-to-end benchmark, $(date -u +%F), $(nproc) cores (CPU)"
    echo
    echo "Command (after \`scripts/setup && scripts/build\`): \`bench/e2e.sh $*\`"
    echo
    echo '```'
    cat "$work/out.txt"
    echo '```'
    echo
  } > "$work/section.md"
  # Newest first: after the file's introduction, before the first run.
  awk -v section="$work/section.md" '
    /^## / && !done { while ((getline line < section) > 0) print line; done = 1 }
    { print }' bench/RESULTS.md > "$work/results.md"
  cp "$work/results.md" bench/RESULTS.md
fi
