#!/usr/bin/env python3
"""Constrained output through a live linserve's HTTP API, at temperature 1
over many seeds: a JSON object, a nested schema, an enum and a required tool
call. Every answer that did not stop at max_tokens must parse and validate
(python3-jsonschema, a validator nobody here wrote); of the bounded schemas
(all but the free JSON object), at most 5% may stop there.

Usage: structured_output_check.py BASE_URL SEEDS
"""
import concurrent.futures
import json
import sys
import urllib.request

import jsonschema

NESTED = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 8},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            },
            "required": ["city", "zip"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "address", "tags", "age"],
    "additionalProperties": False,
}
ENUM = {"enum": ["red", "green", "blue", "dark gray"]}
TOOL = {
    "type": "function",
    "function": {
        "name": "book_table",
        "parameters": {
            "type": "object",
            "properties": {
                "guests": {"type": "integer", "minimum": 1, "maximum": 12},
                "when": {"type": "string", "format": "date"},
                "note": {"type": "string", "maxLength": 10},
            },
            "required": ["guests", "when", "note"],
            "additionalProperties": False,
        },
    },
}
MESSAGES = [{"role": "user", "content": "Answer in JSON."}]


def post(base_url, body):
    request = urllib.request.Request(base_url + "/v1/chat/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.load(response)


def run(base_url, case, seed):
    body = {"messages": MESSAGES, "temperature": 1.0, "seed": seed}
    if case == "json_object":
        body.update(response_format={"type": "json_object"}, max_tokens=200)
    elif case == "nested":
        body.update(response_format={"type": "json_schema",
                                     "json_schema": {"name": "n", "schema": NESTED}}, max_tokens=300)
    elif case == "enum":
        body.update(response_format={"type": "json_schema",
                                     "json_schema": {"name": "e", "schema": ENUM}}, max_tokens=300)
    else:
        body.update(tools=[TOOL], tool_choice="required", max_tokens=300)
    choice = post(base_url, body)["choices"][0]
    if choice["finish_reason"] == "length":
        return case, "cut", None
    try:
        if case == "tool":
            assert choice["finish_reason"] == "tool_calls", choice["finish_reason"]
            call = choice["message"]["tool_calls"][0]["function"]
            assert call["name"] == "book_table"
            value, schema = json.loads(call["arguments"]), TOOL["function"]["parameters"]
        else:
            value = json.loads(choice["message"]["content"])
            schema = {"json_object": {"type": "object"}, "nested": NESTED, "enum": ENUM}[case]
        jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())
        return case, "valid", None
    except Exception as error:  # noqa: BLE001 - every failure is reported
        return case, "invalid", f"seed {seed}: {error!r}: {json.dumps(choice)[:400]}"


def main():
    base_url, seeds = sys.argv[1], int(sys.argv[2])
    counts = {}
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        jobs = [pool.submit(run, base_url, case, seed)
                for case in ("json_object", "nested", "enum", "tool") for seed in range(1, seeds + 1)]
        for job in jobs:
            case, outcome, failure = job.result()
            counts.setdefault(case, {"valid": 0, "invalid": 0, "cut": 0})[outcome] += 1
            if failure:
                failures.append(failure)
    ok = not failures
    for case, c in counts.items():
        print(f"{case:12s} valid {c['valid']:4d}  invalid {c['invalid']:3d}  "
              f"stopped at max_tokens {c['cut']:3d}")
        if case != "json_object" and c["cut"] > 0.05 * seeds:
            print(f"FAIL: {case}: {c['cut']} of {seeds} stopped at max_tokens (at most 5%)")
            ok = False
    for failure in failures[:10]:
        print("FAIL:", failure)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
