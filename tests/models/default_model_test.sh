#!/usr/bin/env bash
# The shipped model: it loads, fits in 10 MB, and its validation loss on the
# corpus's whole held-out 10%, computed by linserve-eval in each of the
# engine's three forms, is within 0.02 of what MODEL_CARD.md states (and the
# forms agree with each other).
#
#   tests/models/default_model_test.sh EVAL_BINARY [MODEL_DIR]
#
# The corpus is not part of the repository: $LINSERVE_CORPUS, or
# ../shared/data/tinyshakespeare.txt beside the checkout. Without it the test
# exits 77 (skipped) and says so.
set -euo pipefail
eval_binary=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
model=${2:-$root/models/default}
corpus=${LINSERVE_CORPUS:-$root/../shared/data/tinyshakespeare.txt}

fail() { echo "FAIL: $*" >&2; exit 1; }

size=$(stat -c %s "$model/model.safetensors")
[ "$size" -le 10000000 ] || fail "model.safetensors is $size bytes, over 10 MB"
echo "model.safetensors: $size bytes"

card=$(sed -n 's/^Validation loss (linserve-eval[^:]*: \([0-9.]*\) nats\/byte.*/\1/p' \
         "$model/MODEL_CARD.md")
[ -n "$card" ] || fail "MODEL_CARD.md states no 'Validation loss (linserve-eval ...): X nats/byte'"
echo "MODEL_CARD.md states $card nats/byte"

if [ ! -f "$corpus" ]; then
  echo "SKIP: corpus not found at $corpus (set LINSERVE_CORPUS)" >&2
  exit 77
fi

export OPENBLAS_NUM_THREADS=1
output=$("$eval_binary" --model="$model" --corpus="$corpus" --windows=0 \
           --forms=chunked,reference,recurrent)
echo "$output"
for form in chunked reference recurrent; do
  loss=$(echo "$output" | sed -n "s/^$form *\([0-9.]*\) nats.*/\1/p")
  [ -n "$loss" ] || fail "no $form loss in linserve-eval's output"
  awk -v a="$loss" -v b="$card" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02) }' ||
    fail "$form loss $loss is more than 0.02 from the card's $card"
done
spread=$(echo "$output" | sed -n 's/^largest difference between forms: \(.*\) nats\/byte/\1/p')
awk -v d="$spread" 'BEGIN { exit !(d + 0 <= 1e-4) }' || fail "the forms differ by $spread nats/byte"
echo "PASS"
