#!/usr/bin/env bash
# Whether linserve and llama.cpp's llama-server compute the same RWKV-7: the
# same random weights (linserve-rwkv7-random-model, 0.1B shape, 65,536-token
# World vocabulary) served by both in float32, the same prompt token ids,
# greedy 32 tokens from each, compared id by id. The weights reach llama.cpp
# through bench/gguf/rwkv7_to_gguf.py --outtype=f32. What makes the
# side-by-side timings (bench/gguf/ttft_beside_llama.sh) a comparison of the
# same model.
#
#   bench/gguf/rwkv7_agreement.sh [MODEL_DIR]
#
# MODEL_DIR: a model the random-model tool wrote (default: one written now
# under a temporary directory). llama.cpp's binaries come from
# $LLAMA_CPP_BIN (default /work/ext/llama.cpp/build/bin), linserve's from
# $LINSERVE_BUILD_DIR (default build). Exit 0 when the tokens agree, 1 when
# they do not (both lists are printed), 2 on a setup failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=SCRIPTDIR/../../tests/linserve_process.sh
source tests/linserve_process.sh
build=${LINSERVE_BUILD_DIR:-build}
llama_bin=${LLAMA_CPP_BIN:-/work/ext/llama.cpp/build/bin}
tokens=32
prompt="The quick brown fox jumps over the lazy dog. In the beginning was the word, and 42 ways to say it."
for tool in "$build/server/linserve" "$build/client/linserve-client" "$llama_bin/llama-server"; do
  [ -x "$tool" ] || { echo "rwkv7_agreement: $tool is not built" >&2; exit 2; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

model=${1:-}
if [ -z "$model" ]; then
  model=$work/rwkv7
  "$build/bench/linserve-rwkv7-random-model" --shape=0.1b --vocab_size=65536 "$model"
fi
python3 bench/gguf/rwkv7_to_gguf.py "$model" "$work/rwkv7-f32.gguf" --outtype=f32

# linserve in float32: the prompt's ids (/tokenize), then greedy tokens with
# their ids (Generate with logprobs).
"$build/server/linserve" --model="$model" --dtype=float32 --listen=127.0.0.1:0 \
  --http_listen=127.0.0.1:0 --metrics_port=-1 --store_dir="$work/store" --prefix_cache_bytes=0 \
  2> "$work/linserve.log" &
pids+=($!)
linserve_wait_serving "$!" "$work/linserve.log" 120 ||
  { echo "$linserve_error" >&2; cat "$work/linserve.log" >&2; exit 2; }
prompt_json=$(python3 -c 'import json, sys; print(json.dumps({"prompt": sys.argv[1]}))' "$prompt")
ids=$(curl -sf -XPOST "http://127.0.0.1:$linserve_http_port/tokenize" -d "$prompt_json" |
  python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["tokens"]))')
"$build/client/linserve-client" generate --server="127.0.0.1:$linserve_port" --temperature=0 \
  --max_new_tokens="$tokens" --logprobs --top_logprobs=2 "$prompt" > /dev/null 2> "$work/linserve.tokens"
sed -n 's/^\[token \([0-9]*\) .*/\1/p' "$work/linserve.tokens" > "$work/linserve.ids"
grep -q "prompt $(python3 -c 'import json, sys; print(len(json.loads(sys.argv[1])))' "$ids") tokens" \
  "$work/linserve.tokens" ||
  { echo "rwkv7_agreement: Generate did not encode the prompt as /tokenize did" >&2;
    cat "$work/linserve.tokens" >&2; exit 2; }
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true

# llama-server on the converted file: the same ids, greedy, nothing cached.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$llama_bin/llama-server" -m "$work/rwkv7-f32.gguf" --host 127.0.0.1 --port "$port" -np 1 -c 4096 \
  --no-cache-prompt --cache-ram 0 > "$work/llama.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
  kill -0 "${pids[-1]}" 2>/dev/null || { echo "llama-server exited" >&2; cat "$work/llama.log" >&2; exit 2; }
  sleep 0.2
done
curl -sf -XPOST "http://127.0.0.1:$port/completion" -d "{\"prompt\": $ids, \"n_predict\": $tokens,
  \"temperature\": 0, \"cache_prompt\": false, \"return_tokens\": true, \"n_probs\": 2}" > "$work/llama.json" ||
  { echo "rwkv7_agreement: llama-server's /completion failed" >&2; cat "$work/llama.log" >&2; exit 2; }
python3 -c 'import json, sys; print("\n".join(str(t) for t in json.load(open(sys.argv[1]))["tokens"]))' \
  "$work/llama.json" > "$work/llama.ids"

echo "prompt ($(python3 -c 'import json, sys; print(len(json.loads(sys.argv[1])))' "$ids") ids): $ids"
echo "linserve    (float32): $(paste -sd' ' "$work/linserve.ids")"
echo "llama-server (f32):    $(paste -sd' ' "$work/llama.ids")"
if cmp -s "$work/linserve.ids" "$work/llama.ids" && [ "$(wc -l < "$work/linserve.ids")" -eq "$tokens" ]; then
  echo "agree: $tokens of $tokens greedy tokens"
  exit 0
fi
python3 - "$work/linserve.ids" "$work/llama.ids" "$work/linserve.tokens" "$work/llama.json" <<'EOF'
import json, sys
ours = open(sys.argv[1]).read().split()
theirs = open(sys.argv[2]).read().split()
first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
print(f"DISAGREE: the first {first} tokens agree; linserve {len(ours)}, llama-server {len(theirs)} tokens")
lines = [l for l in open(sys.argv[3]) if l.startswith("[token")]
if first < len(lines):
    print("  linserve at the first difference:", lines[first].strip())
probs = json.load(open(sys.argv[4])).get("completion_probabilities", [])
if first < len(probs):
    print("  llama-server at the first difference:",
          [(p["id"], round(p["logprob"], 4)) for p in probs[first]["top_logprobs"]])
EOF
exit 1
