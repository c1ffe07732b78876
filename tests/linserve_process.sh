# shellcheck shell=bash
# Sourced by the shell scripts that start a linserve (tests, bench/e2e.sh):
# waits until it serves and reads the ports it bound. The shell counterpart
# of tests/linserve_process.py (Python) and tests/server/server_process.cc
# (C++).

# linserve_wait_serving PID LOG SECONDS: waits until LOG (the server's
# stderr) has the "serving" event, then sets linserve_port,
# linserve_metrics_port and linserve_http_port (0: HTTP off) from its
# "listening" event (start the server with --listen=127.0.0.1:0 and
# --http_listen=127.0.0.1:0 for free ports: --http_listen's default,
# localhost:8080, clashes between servers). Returns 1, with the reason in
# linserve_error, when PID exits first, SECONDS pass, or the log names no
# port.
# shellcheck disable=SC2034  # the results are for the scripts that source this
linserve_wait_serving() {
  local pid=$1 log=$2 seconds=$3 i listening
  linserve_port='' linserve_metrics_port='' linserve_http_port='' linserve_error=''
  for ((i = 0; i < seconds * 10; i++)); do
    grep -q '"event":"serving"' "$log" && break
    if ! kill -0 "$pid" 2>/dev/null; then
      linserve_error="the server exited before serving"
      return 1
    fi
    sleep 0.1
  done
  if ! grep -q '"event":"serving"' "$log"; then
    linserve_error="the server was not serving after $seconds s"
    return 1
  fi
  listening=$(grep -m 1 '"event":"listening"' "$log" || true)
  linserve_port=$(sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' <<<"$listening")
  linserve_metrics_port=$(sed -n 's/.*"metrics_port":\(-\{0,1\}[0-9][0-9]*\).*/\1/p' <<<"$listening")
  linserve_http_port=$(sed -n 's/.*"http_port":\([0-9][0-9]*\).*/\1/p' <<<"$listening")
  if [ -z "$linserve_port" ]; then
    linserve_error="no port in the listening line"
    return 1
  fi
}
