#!/usr/bin/env python3
"""n > 1 by one prefill and n forks, against n separate requests sent at once.

Over the OpenAI HTTP API of a running server (bench/n_choices.sh starts one
with the prefix-state cache off): one streamed request with n choices beside
n streamed requests with n = 1 sent together, the same prompt, seeds and
output length, in alternating rounds. Time to first token is the time to
the first text of any choice (of any request); total time is until the
last choice ends. Medians over the rounds, and their ratio, side by side.

  bench/n_choices.py --port=PORT [--n=8] [--prompt_tokens=2000] [--max_tokens=64] [--rounds=5]
"""

import argparse
import http.client
import json
import statistics
import threading
import time


def stream(port, body, marks):
    """POSTs one streamed completion; records (first text, end) times."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    reply = conn.getresponse()
    if reply.status != 200:
        raise RuntimeError(f"HTTP {reply.status}: {reply.read()[:300]!r}")
    first = None
    tokens = 0
    for raw in reply:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        for choice in event.get("choices", []):
            if choice.get("text") and first is None:
                first = time.monotonic()
    marks.append((first, time.monotonic(), tokens))
    conn.close()


def one_round(port, prompt, n, max_tokens, seed, mode):
    base = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 1.0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    marks = []
    start = time.monotonic()
    if mode == "n":
        stream(port, dict(base, n=n, seed=seed), marks)
    elif mode == "alone":
        stream(port, dict(base, n=1, seed=seed), marks)
    else:
        threads = [threading.Thread(target=stream,
                                    args=(port, dict(base, n=1, seed=seed + i), marks))
                   for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ttft = min(m[0] for m in marks) - start
    total = max(m[1] for m in marks) - start
    tokens = sum(m[2] for m in marks)
    return ttft, total, tokens


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--prompt_tokens", type=int, default=2000)
    parser.add_argument("--max_tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    # The default model reads bytes: one token a byte. A varied text, so
    # the prompt is no run of one token.
    words = ("When forty winters shall besiege thy brow and dig deep trenches in thy "
             "beauty's field, thy youth's proud livery so gazed on now will be a tattered "
             "weed of small worth held. ")
    prompt = (words * (args.prompt_tokens // len(words) + 1))[: args.prompt_tokens]
    one_round(args.port, prompt[:64], 2, 4, 1, "n")  # warm-up
    modes = ["n", "separate", "alone"]
    results = {mode: [] for mode in modes}
    for r in range(args.rounds):
        for k, mode in enumerate(modes[r % 3:] + modes[: r % 3]):
            # A prompt of its own each time: nothing is reused.
            text = f"{r:03d}{k} " + prompt[5:]
            results[mode].append(one_round(args.port, text, args.n, args.max_tokens, 100 * r, mode))
    print(f"n = {args.n} by one prefill and {args.n} forks vs {args.n} separate requests sent "
          f"at once; {args.prompt_tokens}-token prompt, {args.max_tokens} tokens per choice, "
          f"prefix-state cache off, medians of {args.rounds} rounds (order rotated each round); "
          f"one request alone beside them")
    print(f"{'':24} | {'TTFT s':>9} | {'total s':>9} | {'tokens':>7}")
    med = {}
    names = {"n": f"n = {args.n}", "separate": f"{args.n} x n = 1 at once",
             "alone": "1 request alone"}
    for mode in modes:
        ttft = statistics.median(x[0] for x in results[mode])
        total = statistics.median(x[1] for x in results[mode])
        tokens = statistics.median(x[2] for x in results[mode])
        med[mode] = (ttft, total)
        print(f"{names[mode]:24} | {ttft:9.3f} | {total:9.3f} | {tokens:7.0f}")
    print(f"{'n / separate':24} | {med['n'][0] / med['separate'][0]:9.2f} | "
          f"{med['n'][1] / med['separate'][1]:9.2f} |")
    print(f"{'n / alone':24} | {med['n'][0] / med['alone'][0]:9.2f} | "
          f"{med['n'][1] / med['alone'][1]:9.2f} |")
    for mode in modes:
        print(f"rounds of {names[mode]} (TTFT s, total s):",
              [(round(a, 3), round(b, 3)) for a, b, _ in results[mode]])


if __name__ == "__main__":
    main()
