#!/usr/bin/env bash
# linserve's Jinja engine against npm's @huggingface/jinja (what
# transformers.js renders chat templates with): the templates of
# templates/ that jinja_conformance.mjs names, over the conversations of
# conversations.json, must render byte-identically, or fail in both.
#
#   tests/engine/jinja/jinja_conformance.sh JINJA_RENDER
#
# JINJA_RENDER is the jinja_render program (build/tests/engine/). The npm
# package goes into the build's ignored tree (LINSERVE_NPM_DIR, default
# build/jinja-reference-npm), installed once; later runs need no network.
# Skips (exit 77) without node and npm, or when the package cannot be
# installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
render=$1
npm_dir=$(realpath -m "${LINSERVE_NPM_DIR:-$root/build/jinja-reference-npm}")
version=0.5.11

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
installed_version() {
  node -p "require('$npm_dir/node_modules/@huggingface/jinja/package.json').version" 2>/dev/null || true
}
if [ "$(installed_version)" != "$version" ]; then
  # Installed beside npm_dir and moved in whole, so that an interrupted
  # install never looks like a finished one.
  staging="$npm_dir.installing.$$"
  rm -rf "$staging"
  mkdir -p "$staging"
  if ! npm install --prefix "$staging" --no-audit --no-fund --loglevel=error \
      "@huggingface/jinja@$version" >"$staging.log" 2>&1; then
    tail -n 20 "$staging.log"
    rm -rf "$staging" "$staging.log"
    echo "SKIP: npm could not install @huggingface/jinja@$version"
    exit 77
  fi
  rm -f "$staging.log"
  rm -rf "$npm_dir"
  mv "$staging" "$npm_dir"
fi
exec node "$here/jinja_conformance.mjs" "$render" "$here/templates" "$npm_dir"
