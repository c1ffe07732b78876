"""A real redis-server and a real linserve for the deploy checks, started
with the flags the deployment files give them (addresses and paths moved to
this machine)."""
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

REDIS_SERVER = "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """redis-server with the deployment's options, on a free loopback port
    and a scratch directory."""

    def __init__(self, options: dict):
        self.port = free_port()
        self.dir = tempfile.TemporaryDirectory(prefix="linserve-deploy-redis-")
        args = [REDIS_SERVER]
        for name, value in options.items():
            args += [f"--{name}"] + (value.split(" ") if value else [""])
        args += ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir.name,
                 "--daemonize", "no", "--loglevel", "warning"]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.process.stdout.read()
                self.process.stdout.close()
                raise RuntimeError(f"redis-server {args} exited: {output!r}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not listen on {self.port}")

    def config_get(self, name: str) -> str:
        out = subprocess.run(["redis-cli", "-p", str(self.port), "CONFIG", "GET", name],
                             capture_output=True, text=True, check=True).stdout.split("\n")
        return out[1]

    def keys(self, pattern: str) -> list:
        out = subprocess.run(["redis-cli", "-p", str(self.port), "--scan", "--pattern", pattern],
                             capture_output=True, text=True, check=True).stdout
        return out.split()

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()
        self.dir.cleanup()


class Linserve:
    """A linserve process; `args` as a deployment gives them. Waits for the
    "serving" log line and records the ports from "listening"."""

    def __init__(self, binary: str, args: list, timeout: float = 60):
        self.args = [binary] + args
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=self.log,
                                        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        self.port = self.metrics_port = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self._events()
            for event in events:
                if event.get("event") == "listening":
                    self.port, self.metrics_port = event["port"], event["metrics_port"]
                if event.get("event") == "serving":
                    return
            if self.process.poll() is not None:
                self._fail(f"exited {self.process.returncode}")
            time.sleep(0.05)
        self.process.kill()
        self.process.wait()
        self._fail(f"not serving after {timeout} s")

    def _fail(self, what: str):
        logs = self.logs()
        self.log.close()
        raise RuntimeError(f"{self.args} {what}: {logs}")

    def logs(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def _events(self) -> list:
        events = []
        for line in self.logs().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                pass
        return events

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read().decode()

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, as a container runtime stops it; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        finally:
            self.log.close()
