#!/usr/bin/env bash
# Constrained output through a live server for one model:
# structured_output_check.py does the requests and the validation.
# Usage: structured_output_test.sh LINSERVE_BINARY MODEL SEEDS [RANDOM_MODEL_TOOL]
# With RANDOM_MODEL_TOOL, MODEL is a directory the tool fills with a random
# tiny RWKV-7 with the World vocabulary first. Exits 77 (ctest's skip)
# without python3-jsonschema or without the model.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/http_server.sh
source "$here/http_server.sh"

binary=$1 model=$2 seeds=$3 random_tool=${4:-}
python3 -c "import jsonschema" 2>/dev/null || { echo "SKIP: python3-jsonschema missing"; exit 77; }
if [ -n "$random_tool" ]; then
  model=$http_work/random-rwkv7
  "$random_tool" --shape=tiny --vocab_size=65536 "$model" >/dev/null
fi
[ -e "$model" ] || { echo "SKIP: $model missing"; exit 77; }
http_server_start "$binary" "$model"
python3 "$here/structured_output_check.py" "$base_url" "$seeds" || fail "constrained output"
