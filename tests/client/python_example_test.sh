#!/usr/bin/env bash
# End to end: client/python/generate.py against a live linserve.
# Usage: python_example_test.sh LINSERVE_BINARY GENERATED_DIR SOURCE_DIR
# GENERATED_DIR holds the Python modules protoc made from proto/.
# Exits 77 (ctest's skip) where Debian's python3-grpcio is missing.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../linserve_process.sh
source "$(dirname "${BASH_SOURCE[0]}")/../linserve_process.sh"

if [ "$#" -ne 3 ]; then
  echo "usage: $0 LINSERVE_BINARY GENERATED_DIR SOURCE_DIR" >&2
  exit 2
fi
binary=$1 generated=$2 source=$3
# The python3 on PATH may be another install without Debian's grpc modules.
python=/usr/bin/python3
example=$source/client/python/generate.py

if ! "$python" -c 'import grpc' 2>/dev/null; then
  echo "SKIP: $python cannot import grpc (apt-get install python3-grpcio python3-protobuf)"
  exit 77
fi

work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.out "$work"/*.err "$work/server.log"; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
  done
  exit 1
}

# One BLAS thread: the test machine runs other suites in parallel.
OPENBLAS_NUM_THREADS=1 "$binary" --model="$source/models/default" --listen=127.0.0.1:0 \
  --http_listen=127.0.0.1:0 --metrics_port=-1 --store_dir="$work/store" --warmup_steps=0 \
  2>"$work/server.log" &
server_pid=$!

linserve_wait_serving "$server_pid" "$work/server.log" 60 || fail "$linserve_error"
port=$linserve_port
echo "server serving on 127.0.0.1:$port"

run_example() {  # NAME ARGS...: stdout to $work/NAME.out, stderr to $work/NAME.err
  local name=$1
  shift
  PYTHONPATH=$generated "$python" "$example" "$@" >"$work/$name.out" 2>"$work/$name.err"
}

for run in first second; do
  echo "check: run $run with --seed=42 exits 0 with text, reason LENGTH and 60 tokens"
  run_example "$run" --server="127.0.0.1:$port" --seed=42 --max_new_tokens=60 \
    --temperature=0.8 "ROMEO:" || fail "run $run exited $?"
  [ -s "$work/$run.out" ] || fail "run $run printed no text"
  grep -q 'FINISH_REASON_LENGTH' "$work/$run.err" || fail "run $run did not report LENGTH"
  grep -q '60 generated' "$work/$run.err" || fail "run $run did not report 60 generated tokens"
done

echo "check: the same seed gives the same text"
cmp -s "$work/first.out" "$work/second.out" || fail "the two runs' texts differ"

echo "check: two runs without --seed report two different seeds (the server picks each)"
for run in unseeded1 unseeded2; do
  run_example "$run" --server="127.0.0.1:$port" --max_new_tokens=4 "ROMEO:" ||
    fail "run $run exited $?"
done
seed1=$(sed -n 's/.*, seed \([0-9]*\),.*/\1/p' "$work/unseeded1.err")
seed2=$(sed -n 's/.*, seed \([0-9]*\),.*/\1/p' "$work/unseeded2.err")
[ -n "$seed1" ] && [ -n "$seed2" ] || fail "a run without --seed reported no seed"
[ "$seed1" != "$seed2" ] || fail "two runs without --seed both reported seed $seed1"
echo "  seeds $seed1 and $seed2"

echo "check: no server on the port exits non-zero with UNAVAILABLE"
# The server's own port once it is stopped: nothing listens there any more.
kill -TERM "$server_pid"
wait "$server_pid" || fail "the server exited $? on SIGTERM"
server_pid=
if run_example unavailable --server="127.0.0.1:$port" "ROMEO:"; then
  fail "the run against a closed port exited 0"
fi
grep -q 'UNAVAILABLE' "$work/unavailable.err" || fail "no UNAVAILABLE in the error"

echo "PASS"
