#!/usr/bin/env bash
# The attention-kind quality table: trains every entry with the same budget
# (same config apart from the attention kind, same tokens seen, same seed),
# scores each on the corpus's whole held-out 10% at 1x, 4x and 16x the
# training context, and writes a Markdown table (default bench/QUALITY.md).
#
#   bench/quality.sh --corpus=tinyshakespeare.txt [--steps=600] [--batch_size=16]
#                    [--context=256] [--config=cfg.json] [--out=bench/QUALITY.md]
#                    [--work=/tmp/linserve-quality] [--jobs=2] [--quick]
#
# Every entry uses token shift (--token_shift, the shipped architecture) but
# one, which shows what it is worth. --jobs trainings run at once (each uses
# one core). --quick: a smoke run (tiny model, a few steps) that checks the
# pipeline. Extra training flags can be given with --train_args="...".
# Anything in the output file from the line "## Reading the table" on is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

corpus="" steps=600 batch=16 context=256 config="" out=bench/QUALITY.md
work=/tmp/linserve-quality train_args="" quick=0 windows=0 jobs=2
for arg in "$@"; do
  case "$arg" in
    --corpus=*) corpus=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --batch_size=*) batch=${arg#*=} ;;
    --context=*) context=${arg#*=} ;;
    --config=*) config=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --work=*) work=${arg#*=} ;;
    --train_args=*) train_args=${arg#*=} ;;
    --jobs=*) jobs=${arg#*=} ;;
    --quick) quick=1 ;;
    *) echo "quality.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
[ -n "$corpus" ] || { echo "quality.sh: --corpus is required" >&2; exit 2; }
build=${LINSERVE_BUILD_DIR:-build}
train=$build/tools/train/linserve-train
eval=$build/tools/train/linserve-eval
export OPENBLAS_NUM_THREADS=1

if [ "$quick" = 1 ]; then
  steps=4 batch=2 context=32 windows=2 jobs=1
  config=$work/tiny.json
  mkdir -p "$work"
  cat > "$config" <<'JSON'
{"d_model": 32, "n_layers": 1, "n_heads": 2, "head_dim": 16, "mlp_hidden": 64,
 "attention": {"kind": "linear_elu", "chunk_size": 16, "codebook_size": 8, "window": 8, "slots": 4}}
JSON
fi

# name | linserve-train flags (after the shared --token_shift)
entries=(
  "softmax (baseline)|--kind=softmax"
  "softmax + entropy-invariant scale|--kind=softmax --entropy_invariant"
  "linear_elu|--kind=linear_elu"
  "linear_elu, no token shift|--kind=linear_elu --token_shift=false"
  "linear_elu + rope|--kind=linear_elu --rope"
  "linear_softmax|--kind=linear_softmax"
  "linear_cosine|--kind=linear_cosine"
  "vq|--kind=vq"
  "vq + entropy-invariant scale|--kind=vq --entropy_invariant"
  "compressed|--kind=compressed"
  "compressed + entropy-invariant scale|--kind=compressed --entropy_invariant"
)

# Trains and scores one entry; prints its table row.
run_entry() {
  local name=$1 flags=$2 dir=$3
  local line rate losses=() loss state params
  # shellcheck disable=SC2086
  line=$("$train" --corpus="$corpus" --out="$dir" ${config:+--config="$config"} --token_shift \
           $flags --steps="$steps" --batch_size="$batch" --context="$context" --progress=false \
           --eval_windows=32 $train_args | tail -n 1)
  rate=$(echo "$line" | sed -n 's/.*, \([0-9]*\) tokens\/s.*/\1/p')
  for factor in 1 4 16; do
    loss=$("$eval" --model="$dir" --corpus="$corpus" --context=$((context * factor)) \
             --windows="$windows" | sed -n 's/^chunked *\([0-9.]*\) nats.*/\1/p')
    losses+=("$loss")
  done
  state=$("$eval" --model="$dir" --corpus="$corpus" --context="$context" --windows=1 \
            --forms= | sed -n 's/^state bytes per session: //p')
  params=$(python3 -c "import json, math, struct
f = open('$dir/model.safetensors', 'rb'); n = struct.unpack('<Q', f.read(8))[0]
h = json.loads(f.read(n))
print(sum(math.prod(v['shape']) for k, v in h.items() if k != '__metadata__'))")
  echo "| $name | ${losses[0]} | ${losses[1]} | ${losses[2]} | $rate | $state | $params |"
}

mkdir -p "$work"
index=0
for entry in "${entries[@]}"; do
  name=${entry%%|*}
  flags=${entry#*|}
  dir=$work/$(echo "$name" | tr -c 'a-z0-9\n' '_')
  echo "quality.sh: $name" >&2
  run_entry "$name" "$flags" "$dir" > "$work/row.$index" &
  index=$((index + 1))
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
done
wait

reading=""
if [ -f "$out" ]; then reading=$(sed -n '/^## Reading the table/,$p' "$out"); fi
{
  echo "# Attention kinds: quality at one budget"
  echo
  echo "Produced by \`bench/quality.sh --corpus=$(basename "$corpus") --steps=$steps --batch_size=$batch --context=$context${config:+ --config=$(basename "$config")}\`"
  echo "on $(nproc) cores, $(date -u +%Y-%m-%d), $jobs trainings at a time. Every entry: the same"
  echo "config apart from the attention, $((steps * batch * context)) training tokens, seed 1."
  echo "Validation: nats/byte on the held-out last 10% of the corpus (every"
  echo "non-overlapping window of the context), chunked form. Every entry has token shift"
  echo "(\`--token_shift\`) except the one marked."
  echo
  echo "| entry | val @ ${context} | val @ $((context * 4)) | val @ $((context * 16)) | train tokens/s | state bytes/session | parameters |"
  echo "|---|---|---|---|---|---|---|"
  for ((i = 0; i < index; i++)); do cat "$work/row.$i"; done
  if [ -n "$reading" ]; then echo; echo "$reading"; fi
} > "$out"
echo "quality.sh: wrote $out" >&2
