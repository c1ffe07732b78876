#!/usr/bin/env bash
# qwen35_agreement.sh: checks bench/gguf/qwen35_to_gguf.py end to end. For
# each shape it writes a random Qwen3.5 checkpoint, converts it to a float32
# GGUF, serves the checkpoint with linserve (float32, gRPC) and the GGUF with
# llama.cpp's llama-server, and asks both for greedy continuations of the same
# prompt token ids. The converter is right when the tokens agree: a wrong
# transform (norm offset, -exp(A_log), value-head order) changes them within a
# few tokens (without the value-head reorder 4 of 128 tokens agreed on the
# tiny untied shape, without the norm offset none, with A_log for ssm_a 4).
#
#   bench/gguf/qwen35_agreement.sh [SHAPE...]     (default: tiny tiny-untied)
#
# SHAPE is tiny, 0.8b, 2b or 4b, with -untied for a separate lm_head. The tiny
# shape has twice as many value heads as key heads, so it exercises the
# value-head reorder; the tied tiny model mostly repeats its last token, the
# untied one does not. Both servers get the same logit biases: the ids
# linserve never samples, the tokens that are not whole UTF-8 on their own
# (llama-server fails a request whose text is not UTF-8) and the
# end-of-generation tokens llama-server bans under ignore_eos. Environment: LLAMA_CPP_BIN (llama-server's directory,
# default /work/ext/llama.cpp/build/bin), LINSERVE_BUILD_DIR (default build),
# WORK_DIR (default a fresh temporary directory), TOKENS (default 32),
# PROMPTS (default 4), THREADS (default 2).
# Prints one line per prompt and a summary; exits 1 when any token differs.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${LINSERVE_BUILD_DIR:-$root/build}"
llama_bin="${LLAMA_CPP_BIN:-/work/ext/llama.cpp/build/bin}"
tokens="${TOKENS:-32}"
prompts="${PROMPTS:-4}"
threads="${THREADS:-2}"
work="${WORK_DIR:-$(mktemp -d /tmp/qwen35-agreement.XXXXXX)}"
mkdir -p "$work"
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(tiny tiny-untied)

for bin in "$build/bench/linserve-qwen35-random-model" "$build/server/linserve" \
           "$llama_bin/llama-server"; do
  [ -x "$bin" ] || { echo "qwen35_agreement: $bin is missing (build it first)" >&2; exit 2; }
done
command -v curl >/dev/null || { echo "qwen35_agreement: needs curl" >&2; exit 2; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_for() {  # URL, seconds, log
  for _ in $(seq 1 "$(($2 * 10))"); do
    curl -sf "$1" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "qwen35_agreement: $1 did not answer in $2 s; log:" >&2
  tail -20 "$3" >&2
  return 1
}

# The client for both servers: linserve over gRPC (protobuf framed by hand, sent
# with curl's HTTP/2), llama-server over its /completion endpoint.
cat >"$work/compare.py" <<'EOF'
import json, random, struct, subprocess, sys, urllib.request

grpc_addr, llama_url, model_dir, n_tokens, n_prompts = sys.argv[1:6]
n_tokens, n_prompts = int(n_tokens), int(n_prompts)

def varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)

def field(num, wire, payload):
    return varint(num << 3 | wire) + payload

def delimited(num, data):
    return field(num, 2, varint(len(data)) + data)

def read_varint(b, i):
    n = s = 0
    while True:
        c = b[i]; i += 1; n |= (c & 0x7F) << s; s += 7
        if not c & 0x80:
            return n, i

def fields(b):
    i = 0
    while i < len(b):
        key, i = read_varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = read_varint(b, i)
        elif wire == 2:
            n, i = read_varint(b, i); v = b[i:i + n]; i += n
        elif wire == 5:
            v = b[i:i + 4]; i += 4
        elif wire == 1:
            v = b[i:i + 8]; i += 8
        else:
            raise ValueError(f"wire type {wire}")
        yield num, v

def linserve(prompt):
    # GenerateRequest: prompt_tokens 10, sampling 3 {temperature 1}, max_new_tokens 4,
    # ignore_eos 6, logprobs 7, logit_bias 14 (map entries {key 1, value 2}). GenerateResponse.tokens 2 -> SampledToken.token 1 ->
    # TokenLogprob {token 1, logprob 3}.
    msg = (delimited(10, b"".join(varint(t) for t in prompt))
           + delimited(3, field(1, 5, struct.pack("<f", 0.0)))
           + field(4, 0, varint(n_tokens)) + field(6, 0, varint(1)) + field(7, 0, varint(1))
           + b"".join(delimited(14, field(1, 0, varint(i)) + field(2, 5, struct.pack("<f", BIAS)))
                      for i in banned))
    body = b"\0" + struct.pack(">I", len(msg)) + msg
    r = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-H", "content-type: application/grpc",
                        "-H", "te: trailers", "--data-binary", "@-",
                        f"http://{grpc_addr}/linserve.v1.Linserve/Generate"],
                       input=body, capture_output=True, check=True)
    b, i, out = r.stdout, 0, []
    while i + 5 <= len(b):
        (length,) = struct.unpack(">I", b[i + 1:i + 5])
        for num, v in fields(b[i + 5:i + 5 + length]):
            if num == 2:
                for n2, tl in fields(v):
                    if n2 == 1:
                        tok = dict(fields(tl))
                        out.append((tok.get(1, 0), struct.unpack("<f", tok[3])[0] if 3 in tok else 0.0))
        i += 5 + length
    if not out:
        sys.exit(f"linserve answered no tokens: {b[:300]!r}")
    return out

# Ids linserve never samples (below vocab_size, no bytes, not BOS/EOS): llama.cpp
# is told the same with logit_bias false, so both choose among the same ids.
config = json.load(open(f"{model_dir}/config.json"))
vocab = config.get("text_config", config)["vocab_size"]
tok = json.load(open(f"{model_dir}/tokenizer.json"))
known = set(tok["model"]["vocab"].values()) | {a["id"] for a in tok["added_tokens"]}
never = [i for i in range(vocab) if i not in known]
normal = sorted(tok["model"]["vocab"].values())

# llama-server parses what it generates as UTF-8 text and fails a request whose
# text is not, so both servers get the same bias against the tokens that are
# not whole UTF-8 on their own (ByteLevel pieces of bytes 0x80-0xFF).
def byte_level_table():
    keep = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[chr(b)] = b
        else:
            table[chr(256 + n)] = b
            n += 1
    return table
table = byte_level_table()
def whole_utf8(text):
    try:
        bytes(table[ch] for ch in text).decode("utf-8")
        return True
    except (KeyError, UnicodeDecodeError):
        return False
BIAS = -100.0
banned = sorted(i for t, i in tok["model"]["vocab"].items() if not whole_utf8(t))
# With ignore_eos llama-server bans every end-of-generation token, which for
# Qwen's vocabulary are these (llama-vocab.cpp's lists); linserve's ignore_eos
# bans none, so both get the same bias against them.
EOG_TEXTS = {"<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}
banned += sorted(a["id"] for a in tok["added_tokens"] if a["content"] in EOG_TEXTS)
normal = [i for i in normal if i not in set(banned)]

def llama(prompt):
    req = {"prompt": prompt, "n_predict": n_tokens, "temperature": 0, "cache_prompt": False,
           "ignore_eos": True, "return_tokens": True, "n_probs": 1,
           "logit_bias": [[i, False] for i in never] + [[i, BIAS] for i in banned]}
    r = urllib.request.urlopen(urllib.request.Request(
        llama_url + "/completion", json.dumps(req).encode(), {"Content-Type": "application/json"}))
    d = json.load(r)
    probs = d.get("completion_probabilities") or []
    lp = [p.get("logprob", 0.0) for p in probs]
    return [(t, lp[k] if k < len(lp) else 0.0) for k, t in enumerate(d["tokens"])]

print(f"  {len(never)} ids never sampled by either, {len(banned)} biased by {BIAS:g} in both")
rng = random.Random(35)
total = agreed = 0
worst = 0.0
for p in range(n_prompts):
    prompt = [rng.choice(normal) for _ in range(8 + 8 * p)]
    a, b = linserve(prompt), llama(prompt)
    same = 0
    while same < min(len(a), len(b)) and a[same][0] == b[same][0]:
        same += 1
    diff = max((abs(a[k][1] - b[k][1]) for k in range(same)), default=0.0)
    worst = max(worst, diff)
    total += n_tokens
    agreed += same
    print(f"  prompt {p} ({len(prompt)} ids): {same}/{n_tokens} tokens agree, "
          f"max |logprob difference| {diff:.2e}")
    if same < n_tokens:
        print(f"    linserve:  {[t for t, _ in a]}")
        print(f"    llama.cpp: {[t for t, _ in b]}")
# llama-server's logprobs are of the distribution before the bias, linserve's
# after it, so the two differ by about the biased tokens' share.
print(f"  summary: {agreed}/{total} tokens agree; max |logprob difference| {worst:.2e} "
      "(llama.cpp's before the bias, linserve's after)")
sys.exit(0 if agreed == total else 1)
EOF

status=0
for shape in "${shapes[@]}"; do
  base="${shape%-untied}"
  extra=()
  [ "$base" != "$shape" ] && extra=(--untied)
  dir="$work/$shape"
  echo "== $shape"
  "$build/bench/linserve-qwen35-random-model" --shape="$base" --out="$dir" "${extra[@]}" >/dev/null
  python3 "$here/qwen35_to_gguf.py" "$dir" "$work/$shape-f32.gguf" --outtype=f32

  grpc=$(free_port); http=$(free_port); lport=$(free_port)
  mkdir -p "$work/store-$shape"
  "$build/server/linserve" --model="$dir" --dtype=float32 --threads="$threads" \
    --listen="127.0.0.1:$grpc" --http_listen="127.0.0.1:$http" --metrics_port=0 \
    --store_dir="$work/store-$shape" >"$work/linserve-$shape.log" 2>&1 &
  pids+=($!); lpid=$!
  "$llama_bin/llama-server" -m "$work/$shape-f32.gguf" --host 127.0.0.1 --port "$lport" \
    -c 1024 -np 1 -t "$threads" --reasoning-format none >"$work/llama-server-$shape.log" 2>&1 &
  pids+=($!); spid=$!
  wait_for "http://127.0.0.1:$http/health" 120 "$work/linserve-$shape.log"
  wait_for "http://127.0.0.1:$lport/health" 300 "$work/llama-server-$shape.log"
  python3 "$work/compare.py" "127.0.0.1:$grpc" "http://127.0.0.1:$lport" "$dir" "$tokens" "$prompts" ||
    status=1
  kill "$lpid" "$spid" 2>/dev/null || true
  wait "$lpid" "$spid" 2>/dev/null || true
done
exit $status
