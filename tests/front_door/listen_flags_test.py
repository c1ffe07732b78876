#!/usr/bin/env python3
"""The listen flags against a real `linserve`: every form users write, a port
taken by another server, a name that does not resolve, malformed values,
and the loopback defaults.

- Forms: localhost:0, 127.0.0.1:0, [::1]:0 (where the machine has IPv6),
  0.0.0.0:0 and :0, each given to --listen, --http_listen and
  --health_listen (and its host to --metrics_host). The banner on stdout
  names every bound port; each is reached (gRPC and metrics by a TCP
  connect, HTTP and health by GET /health).
- A second server on the first one's gRPC, HTTP or metrics port exits
  non-zero naming the flag and the port.
- An unresolvable name, and malformed values, exit non-zero naming the
  flag before the model loads (the model path given does not exist: its
  error would show otherwise).
- Defaults, in a network namespace this test makes (`unshare -n`) with an
  address of its own, 10.99.0.1 on its loopback device: with no listen flag
  the server is reached on 127.0.0.1 and refused on 10.99.0.1, and logs no
  warning; with :0 it is reached on 10.99.0.1 and warns that it listens
  beyond loopback without tokens. Skipped, naming why, where a namespace
  cannot be made (not root).

Usage: listen_flags_test.py LINSERVE_BINARY MODEL_DIR
Exits 0 on success, 1 on a failure (named on stderr).
"""

import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

NAMESPACE_ADDRESS = '10.99.0.1'
START_SECONDS = 120  # a generous bound on start-up; events decide, not timing


class Failure(Exception):
    pass


class Server:
    """A linserve process; `banner` once it serves, `stderr` its log."""

    def __init__(self, binary, args, work):
        self.log_path = os.path.join(work, f'server-{time.monotonic_ns()}.log')
        self.log = open(self.log_path, 'w+')
        env = dict(os.environ, OPENBLAS_NUM_THREADS='1')
        self.process = subprocess.Popen([binary] + args, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, env=env)
        self.banner = None

    def wait_banner(self):
        """The banner, or None when the process exits first."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 1.0)
            if ready:
                line = self.process.stdout.readline()
                if not line:  # exited
                    self.process.wait()
                    return None
                if line.startswith('linserve: serving'):
                    self.banner = line.strip()
                    return self.banner
        raise Failure(f'no banner within {START_SECONDS} s; log:\n{self.stderr()}')

    def stderr(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            code = self.process.wait(timeout=60)
            if code != 0:
                raise Failure(f'the server exited {code} on SIGTERM')


def ports_of(banner):
    """{'grpc': [(ip, port)], 'http': [...], 'metrics': [...], 'health': [...]}"""
    found = {}
    for part in banner.split(') on ', 1)[1].split(', '):
        name, addresses = part.split(' ', 1)
        found[name] = []
        for address in addresses.split(' and '):
            m = re.search(r'(?:https?://)?(\[[^\]]+\]|[0-9.]+):([0-9]+)', address)
            found[name].append((m.group(1).strip('[]'), int(m.group(2))))
    return found


def connectable(ip, port):
    family = socket.AF_INET6 if ':' in ip else socket.AF_INET
    with socket.socket(family) as s:
        s.settimeout(10)
        try:
            s.connect((ip, port))
            return True
        except (ConnectionRefusedError, OSError):
            return False


def health(ip, port):
    host = f'[{ip}]' if ':' in ip else ip
    with urllib.request.urlopen(f'http://{host}:{port}/health', timeout=30) as r:
        return r.status


def reach_ip(ip):
    """Where a client reaches a server bound to `ip` (wildcards via loopback)."""
    return {'0.0.0.0': '127.0.0.1', '::': '::1'}.get(ip, ip)


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(('::1', 0))
        return True
    except OSError:
        return False


def base_args(model, work):
    return [f'--model={model}', f'--store_dir={work}/store', '--warmup_steps=0']


def check_forms(binary, model, work):
    forms = ['localhost:0', '127.0.0.1:0', '0.0.0.0:0', ':0']
    if has_ipv6_loopback():
        forms.insert(2, '[::1]:0')
    else:
        print('skip: [::1]:0 (this machine has no IPv6 loopback)')
    for form in forms:
        host = form.rsplit(':', 1)[0].strip('[]')
        server = Server(binary, base_args(model, work) + [
            f'--listen={form}', f'--http_listen={form}', f'--health_listen={form}',
            f'--metrics_host={host}', '--metrics_port=0'], work)
        try:
            banner = server.wait_banner()
            if banner is None:
                raise Failure(f'{form}: the server exited; log:\n{server.stderr()}')
            ports = ports_of(banner)
            print(f'{form}: {banner}')
            for name in ('grpc', 'http', 'metrics', 'health'):
                if not ports.get(name):
                    raise Failure(f'{form}: the banner names no {name} address')
                for ip, port in ports[name]:
                    if port == 0:
                        raise Failure(f'{form}: the banner gives {name} port 0, not the bound one')
                    if name in ('http', 'health'):
                        if health(reach_ip(ip), port) != 200:
                            raise Failure(f'{form}: GET /health on {ip}:{port} was not 200')
                    elif not connectable(reach_ip(ip), port):
                        raise Failure(f'{form}: {name} on {ip}:{port} refused the connection')
        finally:
            server.stop()


def expect_start_failure(binary, args, work, *needles):
    server = Server(binary, args, work)
    if server.wait_banner() is not None:
        server.stop()
        raise Failure(f'{args} started; it should have failed naming {needles}')
    log = server.stderr()
    if server.process.returncode == 0:
        raise Failure(f'{args} exited 0')
    for needle in needles:
        if needle not in log:
            raise Failure(f'{args}: the error does not name {needle!r}:\n{log}')
    if 'model_load_failed' in log:
        raise Failure(f'{args}: the model was loaded before the listen error:\n{log}')
    print(f'refused as expected: {" ".join(args[-1:])}')


def check_conflicts_and_errors(binary, model, work):
    first = Server(binary, base_args(model, work) + [
        '--listen=127.0.0.1:0', '--http_listen=127.0.0.1:0', '--metrics_host=127.0.0.1',
        '--metrics_port=0'], work)
    try:
        if first.wait_banner() is None:
            raise Failure(f'the first server did not start:\n{first.stderr()}')
        ports = ports_of(first.banner)
        missing = ['--model=/nonexistent/model', f'--store_dir={work}/store2']
        free = ['--listen=127.0.0.1:0', '--http_listen=127.0.0.1:0', '--metrics_port=0',
                '--metrics_host=127.0.0.1']
        for flag, name in (('--listen', 'grpc'), ('--http_listen', 'http')):
            port = ports[name][0][1]
            args = [a for a in free if not a.startswith(flag + '=')]
            expect_start_failure(binary, missing + args + [f'{flag}=127.0.0.1:{port}'], work,
                                 flag, str(port), 'in use')
        port = ports['metrics'][0][1]
        args = [a for a in free if not a.startswith('--metrics_port=')]
        expect_start_failure(binary, missing + args + [f'--metrics_port={port}'], work,
                             '--metrics_host', str(port), 'in use')
    finally:
        first.stop()
    missing = ['--model=/nonexistent/model', f'--store_dir={work}/store3',
               '--listen=127.0.0.1:0', '--http_listen=127.0.0.1:0', '--metrics_port=-1']
    for flag in ('--listen', '--http_listen', '--health_listen'):
        expect_start_failure(binary, missing + [f'{flag}=no-such-host.invalid:0'], work,
                             flag, 'no-such-host.invalid', 'does not resolve')
    expect_start_failure(binary, missing + ['--metrics_port=0',
                                            '--metrics_host=no-such-host.invalid'], work,
                         '--metrics_host', 'does not resolve')
    for bad in ('8080', '::1:8080', 'localhost:99999', 'local host:80', '[::1]8080'):
        expect_start_failure(binary, missing + [f'--http_listen={bad}'], work,
                             '--http_listen', 'expected HOST:PORT')


def check_banner_reader_gone(binary, model, work):
    """A reader of stdout that went away before the banner must not stop the
    server: it serves on, and SIGTERM still stops it with exit 0."""
    server = Server(binary, base_args(model, work) + [
        '--listen=127.0.0.1:0', '--http_listen=127.0.0.1:0', '--metrics_port=-1'], work)
    server.process.stdout.close()
    try:
        deadline = time.monotonic() + START_SECONDS
        while '"event":"serving"' not in server.stderr():
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise Failure(f'with stdout closed the server did not serve:\n{server.stderr()}')
            time.sleep(0.1)
        # SIGTERM is taken only after the banner is written (it waits in
        # sigwait, after the banner): an exit of 0, rather than death by
        # SIGPIPE, shows the write to the closed pipe did not end it.
    finally:
        server.stop()
    print('a closed stdout: the server serves on and stops cleanly')


def check_defaults_in_namespace(binary, model, work):
    """Runs inside `unshare -n`: only this test's addresses exist here."""
    subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)
    subprocess.run(['ip', 'addr', 'add', f'{NAMESPACE_ADDRESS}/32', 'dev', 'lo'], check=True)
    server = Server(binary, base_args(model, work), work)
    try:
        if server.wait_banner() is None:
            raise Failure(f'the server without listen flags did not start:\n{server.stderr()}')
        print(f'defaults: {server.banner}')
        for port in (50051, 8080, 9464):
            if not connectable('127.0.0.1', port):
                raise Failure(f'defaults: 127.0.0.1:{port} refused')
            if connectable(NAMESPACE_ADDRESS, port):
                raise Failure(f'defaults: {NAMESPACE_ADDRESS}:{port} accepted a connection')
        if 'listening_beyond_loopback' in server.stderr():
            raise Failure('defaults: a warning about listening beyond loopback')
    finally:
        server.stop()
    server = Server(binary, base_args(model, work) + [
        '--listen=:0', '--http_listen=:0', '--metrics_host=', '--metrics_port=0'], work)
    try:
        if server.wait_banner() is None:
            raise Failure(f'the server on :0 did not start:\n{server.stderr()}')
        ports = ports_of(server.banner)
        for name in ('grpc', 'http', 'metrics'):
            port = ports[name][0][1]
            if not connectable(NAMESPACE_ADDRESS, port):
                raise Failure(f':0: {name} port {port} refused on {NAMESPACE_ADDRESS}')
        warnings = [l for l in server.stderr().splitlines() if 'listening_beyond_loopback' in l]
        if len(warnings) != 1:
            raise Failure(f':0 without tokens: {len(warnings)} warnings, expected one')
    finally:
        server.stop()
    print('defaults: loopback only; :0 reaches every interface, with one warning')


def main():
    if len(sys.argv) == 4 and sys.argv[3] == '--defaults-in-namespace':
        binary, model = sys.argv[1:3]
        with tempfile.TemporaryDirectory() as work:
            check_defaults_in_namespace(binary, model, work)
        return
    binary, model = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as work:
        check_forms(binary, model, work)
        check_conflicts_and_errors(binary, model, work)
        check_banner_reader_gone(binary, model, work)
    if os.geteuid() != 0 or shutil.which('unshare') is None or shutil.which('ip') is None:
        print('skip: defaults (a network namespace needs root, unshare and ip)')
    else:
        done = subprocess.run(['unshare', '-n', sys.executable, os.path.abspath(__file__),
                               binary, model, '--defaults-in-namespace'])
        if done.returncode != 0:
            raise Failure('the defaults check in a network namespace failed')
    print('PASS')


if __name__ == '__main__':
    try:
        main()
    except Failure as failure:
        print(f'FAIL: {failure}', file=sys.stderr)
        sys.exit(1)
