#!/usr/bin/env bash
# The HTTP API's wire format through curl: server-sent events framed as
# `data: JSON` + blank line and ended by `data: [DONE]`, the content types,
# /health, /v1/models, errors in OpenAI's shape (413 over the body limit, 404
# for an unknown path) and the session header.
# Usage: curl_test.sh LINSERVE_BINARY MODEL_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/http_server.sh
source "$here/http_server.sh"

if [ "$#" -ne 2 ]; then
  echo "usage: $0 LINSERVE_BINARY MODEL_DIR" >&2
  exit 2
fi
binary=$1 model=$2
python=/usr/bin/python3
body_limit=4096
for tool in curl "$python"; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done

http_server_start "$binary" "$model" --max_http_body_bytes=$body_limit --metrics_on_http

# request NAME METHOD PATH [BODY]: the response's headers to $http_work/NAME.headers
# (CR removed), its body to $http_work/NAME.body; prints the status code.
request() {
  local name=$1 method=$2 path=$3 body=${4-}
  local args=(-sN -X "$method" -D "$http_work/$name.raw_headers" -o "$http_work/$name.body"
    -w '%{http_code}')
  if [ -n "$body" ]; then
    args+=(-H 'Content-Type: application/json' --data-binary "$body")
  fi
  curl "${args[@]}" "$base_url$path" || fail "curl $method $path exited $?"
  tr -d '\r' <"$http_work/$name.raw_headers" >"$http_work/$name.headers"
}

# expect_status NAME GOT WANT
expect_status() {
  [ "$2" = "$3" ] || fail "$1: status $2, expected $3; body: $(head -c 500 "$http_work/$1.body")"
}

# header NAME FIELD: the value of the response header FIELD (any case).
header() {
  sed -n "s/^$2: *//Ip" "$http_work/$1.headers" | head -n 1
}

# expect_content_type NAME TYPE: the Content-Type is TYPE (parameters aside).
expect_content_type() {
  local got
  got=$(header "$1" content-type)
  [ "${got%%;*}" = "$2" ] || fail "$1: Content-Type '$got', expected $2"
}

# check_sse NAME OBJECT USAGE: NAME's body is a sequence of `data: X` lines
# each followed by a blank line; every X but the last is a JSON chunk of
# OBJECT, the last is [DONE]; with USAGE=usage the chunk before [DONE] has
# `choices: []` and usage, and no other one has. Prints the streamed text.
check_sse() {
  "$python" - "$http_work/$1.body" "$2" "$3" <<'EOF'
import json, sys
path, kind, want_usage = sys.argv[1], sys.argv[2], sys.argv[3] == "usage"
body = open(path, "rb").read().decode()

def fail(what):
    sys.exit(f"{what}\nbody: {body[:2000]!r}")

if not body.endswith("\n\n"):
    fail("the stream does not end with a blank line")
events = body[:-2].split("\n\n")
for event in events:
    if "\n" in event or not event.startswith("data: "):
        fail(f"an event is not one `data: ` line and a blank line: {event!r}")
data = [event[len("data: "):] for event in events]
if data[-1] != "[DONE]":
    fail(f"the last event is {data[-1]!r}, not [DONE]")
chunks = []
for text in data[:-1]:
    try:
        chunks.append(json.loads(text))
    except json.JSONDecodeError as error:
        fail(f"a data line is not JSON ({error}): {text!r}")
for chunk in chunks:
    if chunk.get("object") != kind:
        fail(f"a chunk's object is {chunk.get('object')!r}, not {kind}")
usage_chunks = [i for i, chunk in enumerate(chunks) if chunk.get("choices") == []]
if want_usage:
    if usage_chunks != [len(chunks) - 1]:
        fail(f"usage chunks at {usage_chunks}, expected only the last ({len(chunks) - 1})")
    usage = chunks[-1].get("usage") or {}
    for field in ("prompt_tokens", "completion_tokens", "total_tokens"):
        if not isinstance(usage.get(field), int):
            fail(f"the usage chunk has no integer {field}: {usage}")
    if usage["total_tokens"] != usage["prompt_tokens"] + usage["completion_tokens"]:
        fail(f"total_tokens is not prompt + completion: {usage}")
    content = chunks[:-1]
else:
    if usage_chunks:
        fail(f"a usage chunk without include_usage, at {usage_chunks}")
    content = chunks
if len(content) < 2:
    fail(f"{len(content)} content chunk(s)")
reasons = [chunk["choices"][0].get("finish_reason") for chunk in content]
if any(reason is not None for reason in reasons[:-1]) or reasons[-1] not in ("stop", "length"):
    fail(f"finish_reason per chunk: {reasons}")
if kind == "chat.completion.chunk":
    print("".join(chunk["choices"][0]["delta"].get("content", "") for chunk in content), end="")
else:
    print("".join(chunk["choices"][0]["text"] for chunk in content), end="")
EOF
}

# json NAME EXPRESSION: EXPRESSION (Python, over `r`, NAME's body as JSON).
json() {
  "$python" -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" \
    "$http_work/$1.body" || fail "$1: the body is not JSON: $(head -c 500 "$http_work/$1.body")"
}

# expect_error NAME STATUS: the body has OpenAI's error shape with code STATUS.
expect_error() {
  local shape
  shape=$(json "$1" "isinstance(r['error']['message'], str) and isinstance(r['error']['type'], str)
    and 'param' in r['error'] and r['error']['code'] == $2")
  [ "$shape" = True ] || fail "$1: not an OpenAI error with code $2: $(head -c 500 "$http_work/$1.body")"
}

completion='{"model":"default","prompt":"ROMEO:","max_tokens":24,"temperature":0.8,"seed":3,"ignore_eos":true'

echo "check: a streamed completion is 200 text/event-stream, data: lines, then [DONE]"
status=$(request stream POST /v1/completions "$completion,\"stream\":true}")
expect_status stream "$status" 200
expect_content_type stream text/event-stream
streamed=$(check_sse stream text_completion plain) || fail "stream: $streamed"

echo "check: a non-streamed completion is application/json, with the streamed text"
status=$(request whole POST /v1/completions "$completion}")
expect_status whole "$status" 200
expect_content_type whole application/json
[ "$(json whole "r['object']")" = text_completion ] || fail "whole: object is not text_completion"
whole=$(json whole "r['choices'][0]['text']")
[ "$whole" = "$streamed" ] || fail "streamed text '$streamed' differs from the whole '$whole'"

echo "check: with include_usage the chunk before [DONE] has choices [] and usage"
status=$(request usage POST /v1/completions \
  "$completion,\"stream\":true,\"stream_options\":{\"include_usage\":true}}")
expect_status usage "$status" 200
check_sse usage text_completion usage >/dev/null || fail "usage stream"

echo "check: a streamed chat completion has the same framing"
status=$(request chat POST /v1/chat/completions '{"model":"default","max_tokens":24,
  "messages":[{"role":"user","content":"Who is there?"}],"stream":true,"seed":5,
  "stream_options":{"include_usage":true}}')
expect_status chat "$status" 200
expect_content_type chat text/event-stream
check_sse chat chat.completion.chunk usage >/dev/null || fail "chat stream"

echo "check: \"session\":\"new\" answers the header x-session-id, equal to the body's session_id"
status=$(request session POST /v1/completions \
  '{"model":"default","prompt":"ROMEO:","max_tokens":8,"session":"new"}')
expect_status session "$status" 200
session_id=$(json session "r['session_id']")
[ -n "$session_id" ] || fail "session: no session_id"
[ "$(header session x-session-id)" = "$session_id" ] ||
  fail "session: x-session-id '$(header session x-session-id)', body's session_id '$session_id'"

echo "check: GET /health is 200"
status=$(request health GET /health)
expect_status health "$status" 200
[ "$(json health "r['status']")" = ok ] || fail "health: status is not ok"

echo "check: GET /v1/models lists one model, \"default\""
status=$(request models GET /v1/models)
expect_status models "$status" 200
expect_content_type models application/json
[ "$(json models "r['object']")" = list ] || fail "models: object is not list"
[ "$(json models "[m['id'] for m in r['data']]")" = "['default']" ] ||
  fail "models: $(head -c 500 "$http_work/models.body")"

echo "check: GET /v1/models/default is that model; another id is 404 naming it (models.retrieve)"
status=$(request model GET /v1/models/default)
expect_status model "$status" 200
[ "$(json model "r['object'], r['id']")" = "model default" ] ||
  fail "model: $(head -c 500 "$http_work/model.body")"
status=$(request no_model GET /v1/models/gpt-4)
expect_status no_model "$status" 404
expect_error no_model 404
grep -q "gpt-4" "$http_work/no_model.body" || fail "no_model: the message does not name the id"

echo "check: with --metrics_on_http, GET /metrics on the API port is Prometheus text"
status=$(request metrics GET /metrics)
expect_status metrics "$status" 200
expect_content_type metrics text/plain
grep -q '^linserve_requests_total' "$http_work/metrics.body" || fail "metrics: no linserve_requests_total"

echo "check: PUT /v1/states/NAME with an empty body (curl's @FILE of a missing file) is 400 naming the body"
status=$(curl -s -X PUT -H 'Content-Type: application/octet-stream' --data-binary '' \
  -o "$http_work/empty_put.body" -w '%{http_code}' "$base_url/v1/states/empty")
expect_status empty_put "$status" 400
grep -q 'the body is empty' "$http_work/empty_put.body" || fail "empty_put: $(cat "$http_work/empty_put.body")"

echo "check: GET / is the playground page, confined by its Content-Security-Policy"
status=$(request page GET /)
expect_status page "$status" 200
expect_content_type page text/html
header page content-security-policy | grep -q "default-src 'none'" || fail "page: no CSP"
grep -q 'src="/playground.js"' "$http_work/page.body" || fail "page: no script"

echo "check: the page's own origin may call the API; the same page under another host name (DNS rebinding) may not"
own=$(curl -s -o /dev/null -w '%{http_code}' -H "Origin: $base_url" "$base_url/v1/models")
[ "$own" = 200 ] || fail "the page's own origin got $own"
rebound=$(curl -s -o "$http_work/rebound.body" -w '%{http_code}' \
  -H "Host: rebound.example:$http_port" -H "Origin: http://rebound.example:$http_port" \
  "$base_url/v1/models")
[ "$rebound" = 403 ] || fail "a rebound host got $rebound"
grep -q -- '--http_allowed_hosts' "$http_work/rebound.body" || fail "rebound: the message names no flag"

echo "check: a body over --max_http_body_bytes=$body_limit is 413 in OpenAI's error shape"
long_prompt=$(head -c $((body_limit * 2)) /dev/zero | tr '\0' a)
status=$(request too_big POST /v1/completions "{\"model\":\"default\",\"prompt\":\"$long_prompt\"}")
expect_status too_big "$status" 413
expect_error too_big 413

echo "check: an unknown path is 404 in OpenAI's error shape, naming the endpoints, not a file"
status=$(request unknown GET /v1/no_such_path)
expect_status unknown "$status" 404
expect_error unknown 404
grep -q 'POST /v1/chat/completions' "$http_work/unknown.body" || fail "unknown: no endpoints named"
if grep -q 'README' "$http_work/unknown.body"; then fail "unknown: the message names a file"; fi

echo "PASS"
