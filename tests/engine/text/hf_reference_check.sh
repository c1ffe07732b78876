#!/usr/bin/env bash
# The Hugging Face tokenizer against the Rust `tokenizers` library (0.22.2,
# through npm's @anush008/tokenizers) over >= 20,000 generated strings per
# fixture of ../shared/data/tokenizers: every string's ids must be equal.
#
#   tests/engine/text/hf_reference_check.sh HF_ENCODE [--strings N] [--seed S]
#
# HF_ENCODE is the hf_encode program (build/tests/engine/hf_encode). The npm
# package goes into build's ignored tree (LINSERVE_NPM_DIR, default
# build/hf-reference-npm), installed once. Skips (exit 77) without the
# fixtures, Node or the package.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
hf_encode=$1
shift
fixtures=${LINSERVE_SHARED_DATA_DIR:-$root/../shared/data}/tokenizers
npm_dir=${LINSERVE_NPM_DIR:-$root/build/hf-reference-npm}

if [ ! -f "$fixtures/gpt-2/tokenizer.json" ]; then
  echo "skip: no tokenizer fixtures in $fixtures"
  exit 77
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "skip: no node/npm"
  exit 77
fi
if [ ! -d "$npm_dir/node_modules/@anush008/tokenizers" ]; then
  mkdir -p "$npm_dir"
  if ! npm install --prefix "$npm_dir" --no-audit --no-fund --silent \
      @anush008/tokenizers@0.6.0 >/dev/null 2>&1; then
    echo "skip: npm could not install @anush008/tokenizers"
    exit 77
  fi
fi
NODE_PATH="$npm_dir/node_modules" exec node "$root/tests/engine/text/hf_reference_check.js" \
  "$hf_encode" "$fixtures" "$@"
