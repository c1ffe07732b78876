"""Starting a linserve for a test: run it with its log on a file, wait for
the "serving" event, and read the ports it bound from the "listening" event.
The Python counterpart of tests/linserve_process.sh (shell) and
tests/server/server_process.cc (C++)."""
import json
import os
import subprocess
import time


class StartError(Exception):
    """The server exited, or was not serving in time; `log` holds its log."""

    def __init__(self, what: str, log: str):
        super().__init__(what)
        self.log = log


class Started:
    """A serving linserve: its process and the ports from "listening"
    (http_port 0: HTTP off)."""

    def __init__(self, process: subprocess.Popen, listening: dict):
        self.process = process
        self.port = listening["port"]
        self.metrics_port = listening["metrics_port"]
        self.http_port = listening.get("http_port", 0)


def read_log(log) -> str:
    """Everything the server wrote so far to `log` (an open file, readable
    or not), read through a file description of its own so that the offset
    the server writes at never moves."""
    with open(f"/proc/self/fd/{log.fileno()}", "rb") as own:
        return own.read().decode(errors="replace")


def log_events(text: str) -> list:
    """The JSON objects of a log, one a line; other lines are skipped."""
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def start(command: list, log, timeout: float = 120.0, stdout=None) -> Started:
    """Runs `command` (the binary, then its flags: pass --listen=127.0.0.1:0
    and --http_listen=127.0.0.1:0 for free ports; --http_listen's default,
    localhost:8080, clashes between servers) with stderr on `log`, an open
    file, and OPENBLAS_NUM_THREADS=1, and returns once it logs "serving".
    On an early exit, or with no "serving" after `timeout` s, raises
    StartError; the process is never left running when this raises."""
    process = subprocess.Popen(command, stdout=stdout, stderr=log,
                               env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listening = None
            for event in log_events(read_log(log)):
                if event.get("event") == "listening":
                    listening = event
                elif event.get("event") == "serving" and listening is not None:
                    return Started(process, listening)
            if process.poll() is not None:
                raise StartError(f"exited {process.returncode} at start", read_log(log))
            time.sleep(0.05)
        raise StartError(f"was not serving after {timeout:g} s", read_log(log))
    except BaseException:
        # Not serving: leave nothing running behind the caller.
        if process.poll() is None:
            process.kill()
            process.wait()
        raise
