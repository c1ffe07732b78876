#!/usr/bin/env bash
# Runs the built image's server the way `docker run` would and talks to it
# with the image's own client: the entry point and command, user, environment,
# working directory, volumes and health check are all read back from the
# image, so what runs is what the image declares. The server is PID 1 of its
# own PID namespace; only the addresses are moved to free loopback ports
# (a later flag overrides the entry point's), and each volume is a fresh
# folder under RUN_DIR holding a copy of the image's content there, as a new
# named volume would.
#
# Checks: health SERVING (the image's HEALTHCHECK command, exit 0), the HTTP
# port's GET /health answers ok, a Generate returns text, a session turn
# lands in the volume as a state file owned by the image's user, /metrics
# counts the generated tokens, the server runs as that user with no group 0,
# and SIGTERM to PID 1 ends it with exit code 0.
#
#   tests/docker/run_image.sh IMAGE RUN_DIR   (with the test's CONTAINERS_STORAGE_CONF)
set -euo pipefail
image=$1
run_dir=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/../linserve_process.sh
source "$here/../linserve_process.sh"

fail() { echo "FAIL: $*" >&2; [ -s "$run_dir/server.log" ] && tail -n 20 "$run_dir/server.log" >&2; exit 1; }
config() { podman image inspect --format "{{json .Config.$1}}" "$image"; }
json_array() { jq -j '(. // [])[] | ., "\u0000"'; }

root=$(podman image mount "$image")
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid"  # unshare --kill-child takes the server with it
    wait "$server_pid" 2>/dev/null || true
  fi
  podman image unmount "$image" >/dev/null || true
}
trap cleanup EXIT

readarray -d '' entrypoint < <(config Entrypoint | json_array)
readarray -d '' command < <(config Cmd | json_array)
readarray -d '' health < <(config Healthcheck | jq '.Test' | json_array)
[ "${health[0]:-}" = CMD ] || fail "the health check is not exec form: ${health[*]:-none}"
client=${health[1]}
workdir=$(config WorkingDir | jq -r '. // "" | if . == "" then "/" else . end')
user=$(config User | jq -r .)
ids=$(awk -F: -v u="${user%%:*}" '$1 == u || $3 == u { print $3 ":" $4; exit }' "$root/etc/passwd")
[ -n "$ids" ] || fail "user $user is not in the image's /etc/passwd"
uid=${ids%%:*}
home=$(awk -F: -v u="$uid" '$3 == u { print $6; exit }' "$root/etc/passwd")

config Env | jq -r '(. // [])[]' >"$run_dir/env"
grep -q '^HOME=' "$run_dir/env" || echo "HOME=${home:-/}" >>"$run_dir/env"
: >"$run_dir/volumes"
n=0
while read -r volume; do
  n=$((n + 1))
  mkdir "$run_dir/volume$n"
  cp -a "$root$volume/." "$run_dir/volume$n/"
  echo "$run_dir/volume$n $volume" >>"$run_dir/volumes"
done < <(config Volumes | jq -r '(. // {}) | keys[]')
[ "$n" -gt 0 ] || fail "the image declares no volume"

# Prefix of a command run from the image, in a mount namespace of its own.
enter=(unshare --mount --propagation private -- "$here/enter_image.sh"
       "$root" "$ids" "$workdir" "$run_dir/env" "$run_dir/volumes")
# image_client ARGS...: the image's client against this server.
image_client() { "${enter[@]}" "$client" --server="127.0.0.1:$port" "$@"; }

# --- Start: entry point + command, then the loopback addresses.
echo "entry point: ${entrypoint[*]} ${command[*]}"
# Its own PID namespace too: the server is PID 1 there, as in a container.
"${enter[0]}" --pid --fork --kill-child "${enter[@]:1}" "${entrypoint[@]}" "${command[@]}" \
  --listen=127.0.0.1:0 --http_listen=127.0.0.1:0 --health_listen=127.0.0.1:0 --metrics_host=127.0.0.1 --metrics_port=0 \
  2>"$run_dir/server.log" &
server_pid=$!
linserve_wait_serving "$server_pid" "$run_dir/server.log" 120 || fail "$linserve_error"
port=$linserve_port
metrics_port=$linserve_metrics_port
http_port=$linserve_http_port
echo "serving: gRPC 127.0.0.1:$port, HTTP 127.0.0.1:$http_port, metrics 127.0.0.1:$metrics_port"

# The server is the namespace's PID 1, as the image's user.
pid=$(cat "/proc/$server_pid/task/$server_pid/children")
pid=${pid%% *}
status=$(cat "/proc/$pid/status")
[ "$(awk '/^NSpid:/ { print $NF }' <<<"$status")" = 1 ] || fail "the server is not PID 1 of its namespace"
[ "$(readlink "/proc/$pid/exe")" = "$root${entrypoint[0]}" ] ||
  fail "PID 1 is $(readlink "/proc/$pid/exe"), not the entry point ${entrypoint[0]}"
awk -v u="$uid" '/^Uid:/ { exit !($2 == u && $3 == u && $4 == u && $5 == u) }' <<<"$status" ||
  fail "the server does not run as uid $uid: $(grep '^Uid:' <<<"$status")"
awk '/^Groups:/ { for (i = 2; i <= NF; i++) if ($i == 0) exit 1 }' <<<"$status" ||
  fail "the server keeps group 0: $(grep '^Groups:' <<<"$status")"
echo "ok: PID 1 of its namespace is ${entrypoint[0]}, uid $uid"

# --- Health, through the image's HEALTHCHECK command, then over HTTP.
"${enter[@]}" "${health[@]:1}" --server="127.0.0.1:$port" || fail "health check: not SERVING"
echo "ok: health check (${health[*]:1}) exits 0"
[ "${http_port:-0}" -gt 0 ] || fail "the HTTP port is off"
http_health=$(curl -sf "http://127.0.0.1:$http_port/health") || fail "HTTP GET /health did not answer 200"
[ "$(jq -r .status <<<"$http_health")" = ok ] || fail "HTTP GET /health answered $http_health"
echo "ok: HTTP GET /health: $http_health"

# --- A Generate. The client prints the text on stdout and the finished
# message, with the generated token count, on stderr.
generated_total=0
generate() {  # generate ARGS...: sets text; adds up the generated tokens
  local count
  text=$(image_client generate "$@" 2>"$run_dir/generate.err") ||
    { cat "$run_dir/generate.err" >&2; fail "Generate $* failed"; }
  count=$(sed -n 's/.*\[finished: .*, generated \([0-9]*\);.*/\1/p' "$run_dir/generate.err")
  [ -n "$text" ] && [ "${count:-0}" -gt 0 ] ||
    { cat "$run_dir/generate.err" >&2; fail "Generate $* returned no text"; }
  generated_total=$((generated_total + count))
}
generate --max_new_tokens=48 --temperature=0.8 --seed=7 "ROMEO:"
echo "ok: Generate: $(head -c 80 <<<"$text" | tr '\n' ' ')"

# --- A session turn, written to the volume by the image's user.
session=$(image_client session create --prompt="JULIET:" | jq -r .id)
[ -n "$session" ] && [ "$session" != null ] || fail "CreateSession returned no id"
generate --session="$session" --max_new_tokens=16 --seed=3 " O Romeo"
state_files=$(find "$run_dir"/volume* -name '*.state' -user "$uid")
[ -n "$state_files" ] || fail "no state file owned by uid $uid in the volume"
echo "ok: session $session stored as ${state_files//$run_dir\//}"

# --- /metrics.
metrics=$(curl -sf "http://127.0.0.1:$metrics_port/metrics") || fail "/metrics did not answer"
generated=$(awk '$1 == "linserve_generated_tokens_total" { print $2 }' <<<"$metrics")
[ "${generated:-none}" = "$generated_total" ] ||
  fail "/metrics counts ${generated:-no} generated tokens, the streams had $generated_total"
echo "ok: /metrics: linserve_generated_tokens_total $generated"

# --- SIGTERM to PID 1: drain, exit 0.
kill -TERM "$pid"
for _ in $(seq 600); do
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$server_pid" 2>/dev/null && fail "still running 60 s after SIGTERM"
exit_code=0
wait "$server_pid" || exit_code=$?
server_pid=
[ "$exit_code" -eq 0 ] || fail "exit code $exit_code after SIGTERM"
grep -q '"event":"stopped"' "$run_dir/server.log" || fail "no stopped event in the log"
echo "ok: SIGTERM -> drained, exit code 0"
