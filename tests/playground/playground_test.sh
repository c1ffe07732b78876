#!/usr/bin/env bash
# The playground page (GET /) in a real browser: Debian's chromium driven by
# npm's playwright-core against a live linserve; playground_test.mjs does
# the checks and saves a screenshot (SCREENSHOT, a CI artifact).
# Usage: playground_test.sh LINSERVE_BINARY MODEL_DIR NODE_DIR SCREENSHOT
# Installs the pinned playwright-core under NODE_DIR (in the build tree) once.
# Exits 77 (ctest's skip), naming why, without chromium, node or npm, when
# the package cannot be installed, or when Chromium cannot start here.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../http/http_server.sh
source "$here/../http/http_server.sh"

if [ "$#" -ne 4 ]; then
  echo "usage: $0 LINSERVE_BINARY MODEL_DIR NODE_DIR SCREENSHOT" >&2
  exit 2
fi
binary=$1 model=$2 node_dir=$(realpath -m "$3") screenshot=$(realpath -m "$4")
playwright_version=1.65.1
chromium=${CHROMIUM:-/usr/bin/chromium}

for tool in node npm "$chromium"; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/setup installs it)"; exit 77; }
done

installed_version() {
  node -p "require('$node_dir/node_modules/playwright-core/package.json').version" 2>/dev/null || true
}
if [ "$(installed_version)" != "$playwright_version" ]; then
  staging="$node_dir.installing.$$"
  rm -rf "$staging"
  mkdir -p "$staging"
  echo "installing playwright-core@$playwright_version under $node_dir"
  if ! npm install --prefix "$staging" --no-audit --no-fund --loglevel=error \
      "playwright-core@$playwright_version" >"$http_work/npm.log" 2>&1; then
    tail -n 20 "$http_work/npm.log"
    rm -rf "$staging"
    echo "SKIP: npm could not install playwright-core@$playwright_version"
    exit 77
  fi
  rm -rf "$node_dir"
  mv "$staging" "$node_dir"
fi

http_server_start "$binary" "$model"
status=0
node "$here/playground_test.mjs" "$base_url" "$node_dir" "$chromium" "$screenshot" || status=$?
[ "$status" = 77 ] && exit 77
[ "$status" = 0 ] || fail "playground_test.mjs exited $status"
echo "PASS"
