#!/usr/bin/env bash
# Time from a server's start to its "serving" line, for one model directory
# served four ways: its float shards in bfloat16, quantized at load to int8
# and int4, and the int8 and int4 directories linserve-quantize wrote from it
# beforehand (which it writes first, beside DIR). Alternated, ROUNDS rounds;
# prints each figure's median. The page cache is warm after the first round:
# the figures are the load's compute and copying, not the disk.
#
#   bench/quantized_load.sh DIR [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
rounds=${2:-3}
bin=build/server/linserve
for dtype in int8 int4; do
  [ -e "$dir-$dtype/model.safetensors" ] ||
    build/tools/quantize/linserve-quantize "$dir" "$dir-$dtype/" --dtype="$dtype" >/dev/null
done

# Seconds until the server prints the line it prints once it serves.
time_to_serve() {
  local store log start
  store=$(mktemp -d)
  log=$(mktemp)
  start=$(date +%s.%N)
  "$bin" "$@" --listen=localhost:0 --http_listen=localhost:0 --metrics_port=-1 --store_dir="$store" >"$log" 2>&1 &
  local pid=$!
  until grep -q "linserve: serving" "$log"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      cat "$log" >&2
      return 1
    fi
    sleep 0.05
  done
  echo "$(date +%s.%N) - $start" | bc
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$store" "$log"
}

declare -A times
names=("bfloat16 shards" "int8 at load" "int8 file" "int4 at load" "int4 file")
for ((round = 0; round < rounds; ++round)); do
  times["bfloat16 shards"]+=" $(time_to_serve --model="$dir" --dtype=bfloat16)"
  times["int8 at load"]+=" $(time_to_serve --model="$dir" --dtype=int8)"
  times["int8 file"]+=" $(time_to_serve --model="$dir-int8")"
  times["int4 at load"]+=" $(time_to_serve --model="$dir" --dtype=int4)"
  times["int4 file"]+=" $(time_to_serve --model="$dir-int4")"
done
printf '%-18s %10s   %s\n' "load" "median s" "rounds"
for name in "${names[@]}"; do
  median=$(tr ' ' '\n' <<<"${times[$name]}" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%-18s %10.2f  %s\n' "$name" "$median" "${times[$name]}"
done
