#!/usr/bin/env bash
# The Hugging Face tokenizer against the Rust `tokenizers` library (0.22.2,
# through npm's @anush008/tokenizers): first every code point's classes and
# normalization (hf_unicode_classes.js), then >= 20,000 generated strings per
# fixture of ../shared/data/tokenizers (hf_reference_check.js): every string's
# ids must be equal.
#
#   tests/engine/text/hf_reference_check.sh HF_ENCODE HF_CLASSES [--strings N] [--seed S]
#
# HF_ENCODE and HF_CLASSES are the hf_encode and hf_classes programs
# (build/tests/engine/). The npm
# package goes into build's ignored tree (LINSERVE_NPM_DIR, default
# build/hf-reference-npm), installed once. Skips (exit 77) without the
# fixtures, Node or the package.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
hf_encode=$1
hf_classes=$2
shift 2
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
export NODE_PATH="$npm_dir/node_modules"
node "$root/tests/engine/text/hf_unicode_classes.js" "$hf_classes" "$fixtures/gpt-2/tokenizer.json"
exec node "$root/tests/engine/text/hf_reference_check.js" "$hf_encode" "$fixtures" "$@"
