#!/usr/bin/env bash
# linserve beside llama.cpp's llama-server, side by side on the same RWKV-7
# weights (0.1B shape, random, 65,536-token World vocabulary): linserve in
# bfloat16, llama-server on the GGUF bench/gguf/rwkv7_to_gguf.py writes
# (bf16 and f16). Both are driven by the same load tester,
# `linserve-client bench --protocol=http` (streamed POST /v1/completions,
# prompts of random token ids, greedy, ignore_eos), in rounds that alternate
# the servers, at each thread count:
#   - time to first token of a 512-token prompt and of a 16-token prompt
#     (concurrency 1, one output token, 5 requests after 1 warm-up);
#   - time per output token at concurrency 1 (16-token prompt, 128 output
#     tokens, 4 requests after 1 warm-up);
#   - output tokens/s at concurrency 32 (16-token prompt, 128 output tokens,
#     32 requests after 16 warm-up).
# The 486 World tokens whose bytes are not UTF-8 by themselves (the single
# bytes 0x80-0xFF and pieces of characters) are kept out of both servers'
# outputs (--logit_bias, -100): a random model strings them into invalid
# UTF-8, which llama-server's output parser refuses mid-stream (HTTP 500,
# "does not match the expected Content-only format").
# Nothing is cached between requests: linserve runs with
# --prefix_cache_bytes=0, llama-server with --no-cache-prompt --cache-ram 0
# (and the prompts are random). llama-server gets one slot for concurrency 1
# and -np 32 (1,024 tokens of context each) for concurrency 32; linserve one
# server for both. Each timing run holds /tmp/linserve-bench.lock (flock) so
# that it does not overlap another benchmark; each round records `uptime`.
# bench/gguf/rwkv7_agreement.sh checks first that both compute the same
# tokens.
#
#   bench/gguf/ttft_beside_llama.sh [--rounds=3] [--threads="1 2"]
#       [--llama_types="bf16 f16"] [--quick] [MODEL_DIR]
#
# Binaries: linserve's from $LINSERVE_BUILD_DIR (default build),
# llama.cpp's from $LLAMA_CPP_BIN (default /work/ext/llama.cpp/build/bin).
# Every run's JSON stays in $BENCH_OUT (default a new temporary directory,
# named at the end); the summary (medians over rounds, and linserve's figure
# over llama-server's) is printed as Markdown tables and kept there as
# summary.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=SCRIPTDIR/../../tests/linserve_process.sh
source tests/linserve_process.sh
build=${LINSERVE_BUILD_DIR:-build}
llama_bin=${LLAMA_CPP_BIN:-/work/ext/llama.cpp/build/bin}
rounds=3 threads_list="1 2" llama_types="bf16 f16" model="" quick=0
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds=${arg#*=} ;;
    --threads=*) threads_list=${arg#*=} ;;
    --llama_types=*) llama_types=${arg#*=} ;;
    --quick) quick=1 ;;
    --*) echo "unknown argument $arg" >&2; exit 2 ;;
    *) model=$arg ;;
  esac
done
for tool in "$build/server/linserve" "$build/client/linserve-client" "$llama_bin/llama-server"; do
  [ -x "$tool" ] || { echo "ttft_beside_llama: $tool is not built" >&2; exit 2; }
done
export OPENBLAS_NUM_THREADS=1
out=${BENCH_OUT:-$(mktemp -d /tmp/ttft-beside-llama.XXXXXX)}
mkdir -p "$out"
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "$model" ]; then
  model=$work/rwkv7
  "$build/bench/linserve-rwkv7-random-model" --shape=0.1b --vocab_size=65536 "$model"
fi
for type in $llama_types; do
  python3 bench/gguf/rwkv7_to_gguf.py "$model" "$work/rwkv7-$type.gguf" --outtype="$type"
done

vocab=${RWKV_VOCAB:-/work/shared/data/rwkv7/rwkv_vocab_v20230424.txt}
not_utf8=$(python3 - "$vocab" <<'PY'
import ast, sys
ids = []
for line in open(sys.argv[1], encoding="utf-8"):
    parts = line.rstrip("\n").split(" ")
    token = ast.literal_eval(" ".join(parts[1:-1]))
    try:
        (token.encode("utf-8") if isinstance(token, str) else token).decode("utf-8")
    except UnicodeDecodeError:
        ids.append(f"{parts[0]}:-100")
print(",".join(ids))
PY
)

# The runs: name, then linserve-client bench flags.
ttft512=(--concurrency=1 --requests=5 --warmup=1 --prompt_tokens=512 --output_tokens=1)
ttft16=(--concurrency=1 --requests=5 --warmup=1 --prompt_tokens=16 --output_tokens=1)
decode=(--concurrency=1 --requests=4 --warmup=1 --prompt_tokens=16 --output_tokens=128)
batch32=(--concurrency=32 --requests=32 --warmup=16 --prompt_tokens=16 --output_tokens=128)
if [ "$quick" = 1 ]; then
  ttft512=(--concurrency=1 --requests=2 --warmup=1 --prompt_tokens=512 --output_tokens=1)
  ttft16=(--concurrency=1 --requests=2 --warmup=1 --prompt_tokens=16 --output_tokens=1)
  decode=(--concurrency=1 --requests=1 --warmup=1 --prompt_tokens=16 --output_tokens=16)
  batch32=(--concurrency=32 --requests=32 --warmup=0 --prompt_tokens=16 --output_tokens=16)
fi

# run_bench FILE HTTP_PORT FLAGS...: one timing run under the lock.
run_bench() {
  local file=$1 port=$2; shift 2
  flock /tmp/linserve-bench.lock "$build/client/linserve-client" bench --protocol=http \
    --http_server="127.0.0.1:$port" --temperature=0 --logit_bias="$not_utf8" --progress=false --json="$file" "$@" > /dev/null
}

stop_last() {
  kill "${pids[-1]}" 2>/dev/null || true
  wait "${pids[-1]}" 2>/dev/null || true
  unset 'pids[-1]'
}

# start_linserve THREADS: sets port.
start_linserve() {
  "$build/server/linserve" --model="$model" --dtype=bfloat16 --threads="$1" --listen=127.0.0.1:0 \
    --http_listen=127.0.0.1:0 --metrics_port=-1 --store_dir="$work/store" --prefix_cache_bytes=0 \
    2> "$work/linserve.log" &
  pids+=($!)
  linserve_wait_serving "$!" "$work/linserve.log" 120 ||
    { echo "$linserve_error" >&2; cat "$work/linserve.log" >&2; exit 1; }
  port=$linserve_http_port
}

# start_llama TYPE THREADS SLOTS CONTEXT: sets port.
start_llama() {
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$llama_bin/llama-server" -m "$work/rwkv7-$1.gguf" --host 127.0.0.1 --port "$port" -t "$2" -tb "$2" \
    -np "$3" -c "$4" --no-cache-prompt --cache-ram 0 --cache-reuse 0 > "$work/llama.log" 2>&1 &
  pids+=($!)
  local i
  for ((i = 0; i < 600; i++)); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.2
  done
  echo "llama-server did not start" >&2
  cat "$work/llama.log" >&2
  exit 1
}

servers=(linserve-bf16)
for type in $llama_types; do servers+=("llama-$type"); done
: > "$out/rounds.txt"
for threads in $threads_list; do
  for ((round = 1; round <= rounds; round++)); do
    # Alternate the order: forwards in odd rounds, backwards in even ones.
    order=("${servers[@]}")
    if ((round % 2 == 0)); then
      order=()
      for ((i = ${#servers[@]} - 1; i >= 0; i--)); do order+=("${servers[$i]}"); done
    fi
    echo "threads $threads round $round: ${order[*]}; $(uptime)" | tee -a "$out/rounds.txt"
    for server in "${order[@]}"; do
      tag=$out/$server-t$threads-r$round
      if [ "$server" = linserve-bf16 ]; then
        start_linserve "$threads"
      else
        start_llama "${server#llama-}" "$threads" 1 4096
      fi
      run_bench "$tag-ttft512.json" "$port" "${ttft512[@]}"
      run_bench "$tag-ttft16.json" "$port" "${ttft16[@]}"
      run_bench "$tag-decode.json" "$port" "${decode[@]}"
      if [ "$server" != linserve-bf16 ]; then
        stop_last
        start_llama "${server#llama-}" "$threads" 32 32768
      fi
      run_bench "$tag-batch32.json" "$port" "${batch32[@]}"
      stop_last
    done
  done
done
echo "load after the last round: $(uptime)" | tee -a "$out/rounds.txt"

python3 - "$out" "$rounds" "$threads_list" "${servers[@]}" <<'EOF' | tee "$out/summary.md"
import json, os, statistics, sys
out, rounds, threads_list, servers = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
rows = [("ttft512", "time to first token, 512-token prompt (ms, p50)"),
        ("ttft16", "time to first token, 16-token prompt (ms, p50)"),
        ("decode", "time per output token, concurrency 1 (ms, p50)"),
        ("batch32", "output tokens/s, concurrency 32")]
failed = []

# One run's figure, from its OK requests; a run with failed requests is
# listed after the tables.
def figure(server, threads, run, r):
    path = f"{out}/{server}-t{threads}-r{r}-{run}.json"
    if not os.path.exists(path):
        return None
    res = json.load(open(path))["results"]
    if res["ok"] != res["sent"]:
        failed.append(f"{server}, {threads} thread(s), round {r}, {run}: {res['by_code']}")
    if run in ("ttft512", "ttft16"):
        return res["ttft_ms"]["p50"]
    if run == "decode":
        return res["tpot_ms"]["p50"]
    return res["output_token_throughput_tps"]

for threads in threads_list:
    print(f"\n{threads} thread{'s' if threads != '1' else ''} (medians over rounds; each round's figure in brackets)\n")
    print("| | " + " | ".join(servers) + " | " + " | ".join(f"linserve / {s}" for s in servers[1:]) + " |")
    print("|---" * (len(servers) * 2) + "|")
    for run, label in rows:
        cells, medians = [], []
        for server in servers:
            values = [v for v in (figure(server, threads, run, r) for r in range(1, rounds + 1))
                      if v is not None]
            m = statistics.median(values) if values else float("nan")
            medians.append(m)
            fmt = (lambda v: f"{v:,.0f}") if run == "batch32" else (lambda v: f"{v:.2f}" if v < 100 else f"{v:.1f}")
            cells.append(f"{fmt(m)} ({', '.join(fmt(v) for v in values)})")
        ratios = [f"{medians[0] / m:.2f}" for m in medians[1:]]
        print(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
print()
for f in failed:
    print("- not OK:", f)
EOF
echo "runs and summary in $out"
