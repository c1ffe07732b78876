#!/usr/bin/env bash
# The official `openai` npm package (a client nobody here wrote) against a
# live linserve's HTTP API: openai_sdk_test.mjs does the checks.
# Usage: openai_sdk_test.sh LINSERVE_BINARY MODEL_DIR NODE_DIR [SCRIPT [SERVER_FLAG...]]
# (SCRIPT: the checks, openai_sdk_test.mjs unless named; the flags go to the
# server).
# Installs the pinned package (and LINSERVE_SDK_EXTRA_PACKAGES, pinned npm
# specs separated by spaces) under NODE_DIR (in the build tree) once; later
# runs find them there and need no network. Exits 77 (ctest's skip) without
# node and npm, or when the package cannot be installed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/http_server.sh
source "$here/http_server.sh"

if [ "$#" -lt 3 ]; then
  echo "usage: $0 LINSERVE_BINARY MODEL_DIR NODE_DIR [SCRIPT [SERVER_FLAG...]]" >&2
  exit 2
fi
binary=$1 model=$2 node_dir=$(realpath -m "$3")
script=${4:-$here/openai_sdk_test.mjs}
shift $(($# < 4 ? $# : 4))
# 6.x declares no `engines` and runs on Node 20; 7.x asks for Node >= 22.
openai_version=6.49.0

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done

packages="openai@$openai_version ${LINSERVE_SDK_EXTRA_PACKAGES:-}"
packages=${packages% }

installed_version() {
  node -p "require('$node_dir/node_modules/openai/package.json').version" 2>/dev/null || true
}

if [ "$(installed_version)" != "$openai_version" ] ||
    [ "$(cat "$node_dir/installed-packages" 2>/dev/null)" != "$packages" ]; then
  # Installed beside NODE_DIR and moved in whole, so that an interrupted
  # install never looks like a finished one.
  staging="$node_dir.installing.$$"
  rm -rf "$staging"
  mkdir -p "$staging"
  echo "installing $packages under $node_dir"
  # shellcheck disable=SC2086 # one word per package
  if ! npm install --prefix "$staging" --no-audit --no-fund --loglevel=error \
      $packages >"$http_work/npm.log" 2>&1; then
    tail -n 20 "$http_work/npm.log"
    rm -rf "$staging"
    echo "SKIP: npm could not install $packages"
    exit 77
  fi
  echo "$packages" >"$staging/installed-packages"
  rm -rf "$node_dir"
  mv "$staging" "$node_dir"
fi
echo "openai $(installed_version) from $node_dir"

http_server_start "$binary" "$model" "$@"
node "$script" "$base_url" "$node_dir" || fail "$(basename "$script") exited $?"
echo "PASS"
