"""A real redis-server and a real linserve for the deploy checks, started
with the flags the deployment files give them (addresses and paths moved to
this machine)."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import linserve_process  # noqa: E402  (tests/linserve_process.py)

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
        try:
            started = linserve_process.start(self.args, self.log, timeout,
                                             stdout=subprocess.DEVNULL)
        except linserve_process.StartError as e:
            self.log.close()
            raise RuntimeError(f"{self.args} {e}: {e.log}") from None
        self.process = started.process
        self.port, self.metrics_port = started.port, started.metrics_port
        self.http_port = started.http_port

    def logs(self) -> str:
        return linserve_process.read_log(self.log)

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read().decode()

    def http_get(self, path: str) -> tuple:
        """(status, body) of GET `path` on the HTTP API's port, whatever the
        status."""
        url = f"http://127.0.0.1:{self.http_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

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
