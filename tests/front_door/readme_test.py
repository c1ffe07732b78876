#!/usr/bin/env python3
"""The README's commands, run as the README writes them.

Starts the server with the README's first command's last part,
`scripts/serve`, from the checkout, with only its environment variables set
(free ports and a temporary store), and waits for its start-up banner. Then
runs, each through bash in the checkout:
- the "Calling it" block (linserve-client generate and health, the Python
  example, the curl completion; the 30-second load test is left out);
- the three-turn `ask()` chat, and the sessions' routes;
- the named-state block, which makes its state file with the bundled client
  before uploading it.
The only change to a command is its host:port: localhost:50051, :8080 and
:9464 become the free ports. Last, SIGTERM must stop the server with exit 0.

Usage: readme_test.py SOURCE_DIR BUILD_DIR
"""

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import json

DEFAULT_PORTS = {'grpc': 50051, 'http': 8080, 'metrics': 9464}


def fail(message, log=None):
    print(f'FAIL: {message}', file=sys.stderr)
    if log:
        print('--- server stderr (last lines)', file=sys.stderr)
        print('\n'.join(log[-30:]), file=sys.stderr)
    sys.exit(1)


def code_blocks(readme):
    """[(the heading above it, the block's text)] in the README's order."""
    blocks, heading, inside, lines = [], '', False, []
    for line in readme.splitlines():
        if line.startswith('```'):
            if inside:
                blocks.append((heading, '\n'.join(lines)))
                lines = []
            inside = not inside
        elif inside:
            lines.append(line)
        elif line.startswith('#'):
            heading = line.lstrip('#').strip()
    return blocks


def the_block(blocks, heading, marker):
    for h, text in blocks:
        if h == heading and marker in text:
            return text
    fail(f'the README has no block under "{heading}" with {marker!r}')


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(('127.0.0.1', 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def main():
    source, build = sys.argv[1], sys.argv[2]
    with open(os.path.join(source, 'README.md'), encoding='utf-8') as f:
        blocks = code_blocks(f.read())

    first = blocks[0][1].strip()
    if first != 'scripts/setup && scripts/build && scripts/serve':
        fail(f'the README\'s first command is {first!r}, not setup, build and serve')
    serve = first.split('&&')[-1].strip()

    ports = dict(zip(DEFAULT_PORTS, free_ports(3)))
    work = tempfile.mkdtemp(prefix='readme-test-')
    env = dict(os.environ,
               LINSERVE_GRPC_PORT=str(ports['grpc']),
               LINSERVE_HTTP_PORT=str(ports['http']),
               LINSERVE_METRICS_PORT=str(ports['metrics']),
               LINSERVE_STORE_DIR=os.path.join(work, 'sessions'))
    if os.path.realpath(build) != os.path.realpath(os.path.join(source, 'build')):
        env['LINSERVE_BUILD_DIR'] = build

    def localize(command):
        for name, default in DEFAULT_PORTS.items():
            command = command.replace(f'localhost:{default}', f'localhost:{ports[name]}')
        return command

    server = subprocess.Popen(['bash', '-c', serve], cwd=source, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = []
    threading.Thread(target=lambda: log.extend(line.rstrip() for line in server.stderr),
                     daemon=True).start()
    banner = None
    for line in server.stdout:  # ends when the server exits
        if line.startswith('linserve: serving'):
            banner = line.strip()
            break
    if banner is None:
        server.wait()
        fail(f'`{serve}` exited {server.returncode} without its banner', log)
    print(f'banner: {banner}')
    for name in ('grpc', 'http', 'metrics'):
        if f':{ports[name]}' not in banner:
            fail(f'the banner does not name the {name} port {ports[name]}', log)

    # The commands run where the README's reader stands, the checkout's root,
    # seen through a scratch folder (the files they write stay out of the
    # checkout): its build/ and client/ are the checkout's.
    scratch = os.path.join(work, 'checkout')
    os.makedirs(scratch)
    os.symlink(os.path.realpath(build), os.path.join(scratch, 'build'))
    os.symlink(os.path.join(os.path.realpath(source), 'client'), os.path.join(scratch, 'client'))

    def run(name, command, check_output):
        command = localize(command)
        print(f'--- {name}:\n{command}')
        done = subprocess.run(['bash', '-c', 'set -eo pipefail\n' + command], cwd=scratch,
                              env=dict(os.environ, PYTHONIOENCODING='utf-8'),
                              capture_output=True, text=True, timeout=300)
        print(done.stdout[-2000:])
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
            fail(f'{name} exited {done.returncode}', log)
        problem = check_output(done.stdout)
        if problem:
            print(done.stderr[-2000:], file=sys.stderr)
            fail(f'{name}: {problem}', log)

    calling = the_block(blocks, 'Calling it', 'linserve-client generate')
    for line in calling.splitlines():
        if not line.strip() or ' bench ' in line:
            continue
        if 'v1/completions' in line:
            def completion(out):
                text = json.loads(out)['choices'][0]['text']
                return None if text else 'an empty completion'
            run('curl completion', line, completion)
        elif ' health' in line:
            run('health', line, lambda out: None)
        else:
            run(line.split()[0].split('/')[-1], line,
                lambda out: None if out.strip() else 'no text')

    ask = the_block(blocks, 'HTTP API (OpenAI-compatible)', 'ask() {')

    def three_turns(out):
        lines = [l for l in out.splitlines()]
        if not lines or not re.fullmatch(r'[0-9]+', lines[-1].strip()):
            return 'the last turn printed no session_position'
        if int(lines[-1]) <= 0:
            return 'session_position is not positive'
        return None
    run('three-turn ask() chat', ask, three_turns)

    sessions = the_block(blocks, 'HTTP API (OpenAI-compatible)', '/v1/sessions/import')

    def session_answers(out):
        answers = [json.loads(l) for l in out.splitlines() if l.strip()]
        if len(answers) != 4:
            return f'{len(answers)} answers, expected fork, import, list and delete'
        fork, imported, listed, deleted = answers
        if fork['position'] != imported['position'] or fork['id'] == imported['id']:
            return f'the fork {fork} and the import {imported} differ'
        if not any(s['id'] == imported['id'] for s in listed):
            return 'the list does not hold the imported session'
        return None if deleted.get('deleted') is True else f'the delete answered {deleted}'
    run('sessions over HTTP', sessions, session_answers)

    named = the_block(blocks, 'Named states', '/v1/states/')

    def no_errors(out):
        answers = [json.loads(l) for l in out.splitlines() if l.strip().startswith('{')]
        if len(answers) < 3:
            return f'{len(answers)} JSON answers, expected one per curl'
        bad = [a for a in answers if 'error' in a]
        return f'an error answer: {bad[0]}' if bad else None
    run('named states', named, no_errors)

    server.send_signal(signal.SIGTERM)
    try:
        code = server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        fail('the server did not stop within 60 s of SIGTERM', log)
    if code != 0:
        fail(f'the server exited {code} on SIGTERM', log)
    print('PASS')


if __name__ == '__main__':
    main()
