# shellcheck shell=bash
# Sourced by the HTTP API tests here: starts a linserve with its HTTP port on
# a free loopback port and stops it when the sourcing script exits.

# shellcheck source=SCRIPTDIR/../linserve_process.sh
source "$(dirname "${BASH_SOURCE[0]}")/../linserve_process.sh"

http_server_pid=
http_work=$(mktemp -d)

http_server_stop() {
  if [ -n "$http_server_pid" ]; then
    kill -TERM "$http_server_pid" 2>/dev/null || true
    wait "$http_server_pid" 2>/dev/null || true
    http_server_pid=
  fi
}

http_cleanup() {
  http_server_stop
  rm -rf "$http_work"
}
trap http_cleanup EXIT

# fail MESSAGE: prints MESSAGE and the server log's tail, exits 1.
fail() {
  echo "FAIL: $*" >&2
  if [ -f "$http_work/server.log" ]; then
    echo "--- server log (tail)" >&2
    tail -n 20 "$http_work/server.log" >&2
  fi
  exit 1
}

# http_server_start BINARY MODEL_DIR [FLAGS...]: starts the server (one BLAS
# thread: other suites run beside it) and sets http_port and base_url
# (http://127.0.0.1:PORT) once it serves.
# shellcheck disable=SC2034  # base_url is for the scripts that source this
http_server_start() {
  local binary=$1 model=$2
  shift 2
  : >"$http_work/server.log"  # there before the first look at it
  OPENBLAS_NUM_THREADS=1 "$binary" --model="$model" --listen=127.0.0.1:0 \
    --http_listen=127.0.0.1:0 --metrics_port=0 --store_dir="$http_work/store" \
    --warmup_steps=0 "$@" 2>"$http_work/server.log" &
  http_server_pid=$!
  linserve_wait_serving "$http_server_pid" "$http_work/server.log" 60 || fail "$linserve_error"
  http_port=$linserve_http_port
  if [ -z "$http_port" ] || [ "$http_port" = 0 ]; then
    fail "no http_port in the listening event"
  fi
  base_url="http://127.0.0.1:$http_port"
  echo "server serving HTTP on $base_url"
}
