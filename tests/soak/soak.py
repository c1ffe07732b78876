#!/usr/bin/python3
"""Soak: a real linserve at ~70% of its measured capacity for a long time.

1. Starts a server (loopback, the shipped model, a fresh store) and measures
   its capacity: requests/s of a closed-loop `linserve-client bench` with
   --capacity_concurrency in flight (default 64, the server's default
   max_batch, so that its largest batch has run, and its memory reached that
   batch's high-water mark, before the first measured window).
2. Runs open-loop bench windows at --load x that rate for --minutes,
   sampling the server's resident memory, open file descriptors and threads
   from /proc every --sample_seconds, and each window's p99 latency.
3. Meanwhile drives --sessions seeded sessions, each receiving numbered
   turns with fixed seeds, and records every turn's text and position.
4. Then measures the drift of its latency against a control: a fresh server,
   started now and warmed up the same way, and the soaked one take turns
   (soaked-control, then control-soaked, --drift_rounds times) at the same
   open-loop rate, one --drift_window_s window each with the same seeded
   arrivals and lengths. The drift is the median over rounds of the soaked
   server's p99 over the control's. On this shared machine the speed of the
   same workload varies by tens of percent from one minute to the next (p50
   and p99 of identical windows moved 2x in a quiet run), which the windows of
   step 2 show and a first-third-against-last-third comparison cannot tell
   from drift; adjacent windows on two servers see the same machine.
5. At the end checks: memory, fds and threads flat (the last window's median
   within MAX_GROWTH of the first measured window's), p99 drift below
   MAX_P99_DRIFT, zero lost turns (every session's final position is what its
   last turn said, and replaying every turn on a fresh server gives the same
   texts and positions), and SIGTERM exit code 0.

Window 0 is a warm-up and is not compared. Exits 1 on any failure; --json
writes the figures.

--short is the version ctest runs in CI (soak_short): a minute, and every
check but the latency drift (no control server; a minute of this machine's
noise decides nothing): no failed request, memory, file descriptors and
threads flat, no lost or differing turn, clean exits.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import grpc

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import linserve_process  # noqa: E402  (tests/linserve_process.py)

MAX_GROWTH = 0.05
MAX_P99_DRIFT = 0.10
SERVICE = "/linserve.v1.Linserve/"


class Server:
    def __init__(self, binary, model, work, name):
        self.log_path = f"{work}/{name}.log"
        command = [binary, f"--model={model}", "--listen=127.0.0.1:0",
                   "--http_listen=127.0.0.1:0", "--metrics_port=-1",
                   f"--store_dir={work}/{name}-store"]
        try:
            started = linserve_process.start(command, open(self.log_path, "w"))
        except linserve_process.StartError as e:
            sys.exit(f"FAIL: the server {e}:\n{e.log}")
        self.proc, self.port = started.process, started.port
        self.address = f"127.0.0.1:{self.port}"

    def sample(self):
        pid = self.proc.pid
        status = open(f"/proc/{pid}/status").read()
        rss_kib = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
        threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return {"t": time.time(), "rss_mib": rss_kib / 1024, "fds": fds, "threads": threads}

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "hung on SIGTERM"


def bench(client, address, out, **flags):
    args = [client, "bench", f"--server={address}", "--progress=false", f"--json={out}"]
    args += [f"--{k}={v}" for k, v in flags.items()]
    subprocess.run(args, check=True, capture_output=True)
    return json.load(open(out))["results"]


class SeededSessions:
    """Sessions that each receive numbered turns with fixed seeds."""

    def __init__(self, pb, address, count):
        self.pb = pb
        self.channel = grpc.insecure_channel(address)
        self.generate = self.channel.unary_stream(SERVICE + "Generate")
        create = self.channel.unary_unary(SERVICE + "CreateSession")
        self.ids = [pb.Session.FromString(create(pb.CreateSessionRequest(
            prompt=b"Session %d.\n" % i).SerializeToString(), timeout=60)).id for i in range(count)]
        self.turns = [[] for _ in range(count)]  # (text, position) per turn
        self.errors = []

    def turn(self, i):
        """Turn n of session i: prompt and seed are functions of (i, n)."""
        n = len(self.turns[i])
        request = self.pb.GenerateRequest(
            prompt=b"\nTurn %d:" % n, session_id=self.ids[i], max_new_tokens=16,
            sampling=self.pb.SamplingParams(seed=1 + 1000 * i + n, temperature=0.8))
        text, position = b"", None
        for message in self.generate(request.SerializeToString(), timeout=120):
            response = self.pb.GenerateResponse.FromString(message)
            text += response.text
            if response.HasField("finished"):
                position = response.finished.position
        self.turns[i].append((text, position))

    def run(self, stop, interval):
        i = 0
        while not stop.is_set():
            try:
                self.turn(i % len(self.ids))
            except grpc.RpcError as e:
                self.errors.append(f"session {i % len(self.ids)}: {e.code()} {e.details()}")
            i += 1
            stop.wait(interval)

    def positions(self):
        get = self.channel.unary_unary(SERVICE + "GetSession")
        return [self.pb.Session.FromString(get(self.pb.GetSessionRequest(session_id=sid).SerializeToString(),
                                               timeout=60)).position for sid in self.ids]


def window_median(samples, key, start, end):
    values = [s[key] for s in samples if start <= s["t"] < end]
    return statistics.median(values) if values else None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--linserve", required=True)
    ap.add_argument("--client", required=True, help="the linserve-client binary")
    ap.add_argument("--generated", required=True, help="dir of the protoc-generated Python modules")
    ap.add_argument("--model", default=os.path.join(here, "../../models/default"))
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--load", type=float, default=0.7, help="fraction of the measured capacity")
    ap.add_argument("--sessions", type=int, default=6)
    ap.add_argument("--sample_seconds", type=float, default=2)
    ap.add_argument("--capacity_concurrency", type=int, default=64)
    ap.add_argument("--drift_rounds", type=int, default=6)
    ap.add_argument("--drift_window_s", type=float, default=20)
    ap.add_argument("--short", action="store_true", help="the CI version; see above")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.short:
        args.drift_rounds = 0
    sys.path.insert(0, args.generated)
    from linserve.v1 import linserve_pb2 as pb

    work = tempfile.mkdtemp(prefix="linserve-soak-")
    shape = {"prompt_tokens": "16:64", "output_tokens": "16:64"}
    server = Server(args.linserve, args.model, work, "soak")
    failures = []

    def warm_up(address, out):
        return bench(args.client, address, out, concurrency=args.capacity_concurrency,
                     duration=20, warmup=args.capacity_concurrency, **shape)

    capacity_rps = warm_up(server.address, f"{work}/capacity.json")["request_throughput_rps"]
    rate = args.load * capacity_rps

    seeded = SeededSessions(pb, server.address, args.sessions)
    samples = []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            samples.append(server.sample())
            stop.wait(args.sample_seconds)

    threads = [threading.Thread(target=sampler),
               threading.Thread(target=seeded.run, args=(stop, 0.5))]
    for t in threads:
        t.start()
    total = args.minutes * 60
    windows = max(4, min(20, int(total // 30)))
    window_s = total / windows
    results = []
    for w in range(windows):
        start = time.time()
        r = bench(args.client, server.address, f"{work}/window{w}.json", rate=round(rate, 3),
                  duration=round(window_s, 1), **shape)
        results.append({"start": start, "end": time.time(), "p99_ms": r["e2e_ms"]["p99"],
                        "p50_ms": r["e2e_ms"]["p50"], "ok": r["ok"], "failed": r["failed"],
                        "rps": r["request_throughput_rps"]})
        if r["failed"]:
            failures.append(f"window {w}: {r['failed']} failed requests {r['by_code']}")
    stop.set()
    for t in threads:
        t.join()

    # Drift against a fresh control server, in alternating pairs of windows.
    rounds = []
    control = Server(args.linserve, args.model, work, "control") if args.drift_rounds else None
    if control:
        warm_up(control.address, f"{work}/control-warmup.json")
    for n in range(args.drift_rounds):
        p99 = {}
        for name in (("soaked", "control") if n % 2 == 0 else ("control", "soaked")):
            address = server.address if name == "soaked" else control.address
            r = bench(args.client, address, f"{work}/drift{n}-{name}.json", rate=round(rate, 3),
                      duration=args.drift_window_s, **shape)
            if r["failed"]:
                failures.append(f"drift round {n}, {name}: {r['failed']} failed requests {r['by_code']}")
            p99[name] = r["e2e_ms"]["p99"]
        rounds.append(p99)
    control_rss = control.sample()["rss_mib"] if control else None
    control_exit = control.stop() if control else 0

    # Flat resources: the last window against the first measured one.
    growth = {}
    first, last = results[1], results[-1]
    for key in ("rss_mib", "fds", "threads"):
        a = window_median(samples, key, first["start"], first["end"])
        b = window_median(samples, key, last["start"], last["end"])
        growth[key] = {"first": a, "last": b, "growth": (b - a) / a}
        if growth[key]["growth"] > MAX_GROWTH:
            failures.append(f"{key} grew {growth[key]['growth']:.1%} ({a} -> {b})")
    third = max(1, (windows - 1) // 3)
    p99_first = statistics.median(r["p99_ms"] for r in results[1:1 + third])
    p99_last = statistics.median(r["p99_ms"] for r in results[-third:])
    drift = statistics.median(r["soaked"] / r["control"] for r in rounds) - 1 if rounds else None
    if drift is not None and drift > MAX_P99_DRIFT:
        failures.append(f"p99 drifted {drift:.1%} against a fresh control server")

    # Zero lost turns: positions as the last turns said, and a replay on a
    # fresh server gives the same texts and positions.
    failures += [f"seeded turn failed: {e}" for e in seeded.errors]
    positions = seeded.positions()
    turns = sum(len(t) for t in seeded.turns)
    lost = sum(1 for i, t in enumerate(seeded.turns) if t and positions[i] != t[-1][1])
    exit_code = server.stop()
    replay_server = Server(args.linserve, args.model, work, "replay")
    replay = SeededSessions(pb, replay_server.address, args.sessions)
    mismatched = 0
    for i, recorded in enumerate(seeded.turns):
        for text, position in recorded:
            replay.turn(i)
            if replay.turns[i][-1] != (text, position):
                mismatched += 1
    replay_exit = replay_server.stop()
    if lost:
        failures.append(f"{lost} sessions are not where their last turn left them")
    if mismatched:
        failures.append(f"{mismatched} of {turns} turns differ on replay")
    if exit_code != 0 or replay_exit != 0 or control_exit != 0:
        failures.append(f"exit codes on SIGTERM: {exit_code}, {replay_exit}, {control_exit}")

    result = {
        "minutes": args.minutes, "capacity_rps": round(capacity_rps, 2), "load": args.load,
        "rate_rps": round(rate, 2), "windows": windows, "window_s": round(window_s, 1),
        "requests_ok": sum(r["ok"] for r in results), "requests_failed": sum(r["failed"] for r in results),
        "capacity_concurrency": args.capacity_concurrency,
        "p99_ms_by_window": [round(r["p99_ms"], 1) for r in results],
        "p50_ms_by_window": [round(r["p50_ms"], 1) for r in results],
        "rss_mib_by_window": [round(window_median(samples, "rss_mib", r["start"], r["end"]), 1)
                              for r in results],
        "p99_ms_first_third": round(p99_first, 1), "p99_ms_last_third": round(p99_last, 1),
        "drift_rounds": [{k: round(v, 1) for k, v in r.items()} for r in rounds],
        "drift_window_s": args.drift_window_s,
        "p99_drift": round(drift, 4) if rounds else None,
        "control_rss_mib": round(control_rss, 1) if control else None,
        "growth": {k: {kk: round(vv, 4) for kk, vv in v.items()} for k, v in growth.items()},
        "samples": len(samples), "seeded_sessions": args.sessions, "seeded_turns": turns,
        "lost_turns": lost, "replay_mismatches": mismatched, "server_exit_code": exit_code,
        "failures": failures,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures), file=sys.stderr)
        print(f"logs: {work}", file=sys.stderr)
        return 1
    shutil.rmtree(work)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
