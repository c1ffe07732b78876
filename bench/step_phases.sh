#!/usr/bin/env bash
# Where a server step goes: starts a server on a free loopback port, runs
# `linserve-client bench` at each concurrency, and prints the time per engine
# iteration of each phase of linserve_step_phase_seconds (docs/DESIGN.md,
# section 7), read from the server's metrics before and after each run.
#
#   bench/step_phases.sh [MODEL_DIR] [CONCURRENCY...]     (default: models/default 1 32)
#
# Each run sends 8 requests per concurrency slot: 16 prompt tokens, 128 output
# tokens, the sampling BlinkDL recommends for chat (temperature 1, top_p 0.3,
# presence and frequency penalties 0.5).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=SCRIPTDIR/../tests/linserve_process.sh
source tests/linserve_process.sh
build=${LINSERVE_BUILD_DIR:-build}
model=${1:-models/default}
shift || true
concurrencies=("$@")
[ ${#concurrencies[@]} -gt 0 ] || concurrencies=(1 32)
export OPENBLAS_NUM_THREADS=1

work=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$build/server/linserve" --model="$model" --listen=127.0.0.1:0 --http_listen= \
  --metrics_port=0 --metrics_host=127.0.0.1 --store_dir="$work/store" 2> "$work/server.log" &
server=$!
linserve_wait_serving "$server" "$work/server.log" 120 ||
  { echo "$linserve_error" >&2; cat "$work/server.log" >&2; exit 1; }
port=$linserve_port metrics_port=$linserve_metrics_port

scrape() {
  curl -s "http://127.0.0.1:$metrics_port/metrics" | grep '^linserve_step_phase_seconds_\(sum\|count\)' || true
}

echo "model $model, $(nproc) cores"
for c in "${concurrencies[@]}"; do
  scrape > "$work/before"
  "$build/client/linserve-client" bench --server="127.0.0.1:$port" --concurrency="$c" \
    --requests=$((c * 8)) --prompt_tokens=16 --output_tokens=128 --temperature=1 --top_p=0.3 \
    --presence_penalty=0.5 --frequency_penalty=0.5 \
    --progress=false > "$work/bench.txt" 2>&1
  scrape > "$work/after"
  echo
  echo "concurrency $c: $(grep -m1 'throughput' "$work/bench.txt" || echo 'no throughput line')"
  python3 - "$work/before" "$work/after" <<'PY'
import re
import sys

def parse(path):
    series = {}
    for line in open(path):
        m = re.match(r'linserve_step_phase_seconds_(sum|count)\{phase="(\w+)"\} (\S+)', line)
        if m:
            series[(m.group(1), m.group(2))] = float(m.group(3))
    return series

before, after = parse(sys.argv[1]), parse(sys.argv[2])
delta = lambda kind, phase: after.get((kind, phase), 0) - before.get((kind, phase), 0)
# Every iteration that ran the model observes its scheduling.
iterations = delta("count", "scheduling")
if iterations <= 0:
    sys.exit("no engine iterations were observed")
phases = ["restack", "engine", "prefill", "sampling", "emission", "finish", "scheduling"]
per_iteration = {p: delta("sum", p) / iterations * 1000 for p in phases}
total = sum(per_iteration.values())
print(f"| phase | ms per iteration ({int(iterations)} iterations) | share |")
print("|---|---:|---:|")
for p in phases:
    print(f"| {p} | {per_iteration[p]:.3f} | {per_iteration[p] / total * 100:.1f}% |")
print(f"| total | {total:.3f} | |")
PY
done
