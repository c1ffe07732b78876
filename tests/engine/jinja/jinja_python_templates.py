#!/usr/bin/env python3
"""Every real chat template of templates/ rendered by linserve and by Python's
own Jinja (Debian's python3-jinja2) in transformers' environment
(jinja_python_reference.python_environment), over the conversations of
conversations.json: each rendering must give the same text, or both must
refuse. Python is the reference transformers, vLLM and SGLang render with.

Usage: jinja_python_templates.py JINJA_RENDER [TEMPLATE_DIR]
Skips (exit 77) where python3-jinja2 is not installed.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jinja_python_reference  # noqa: E402  (skips without jinja2)

import jinja2  # noqa: E402


def conversation_cases():
    """The contexts jinja_conformance.mjs renders, in the same order."""
    with open(os.path.join(HERE, 'conversations.json'), encoding='utf-8') as f:
        table = json.load(f)
    cases = []
    for conversation in table['conversations']:
        for add_generation_prompt in (True, False):
            for enable_thinking in (None, True, False):
                context = {
                    'messages': conversation['messages'],
                    'add_generation_prompt': add_generation_prompt,
                    'bos_token': '<s>',
                    'eos_token': '</s>',
                }
                if conversation['with_tools']:
                    context['tools'] = table['tools']
                if enable_thinking is not None:
                    context['enable_thinking'] = enable_thinking
                name = (f'{conversation["name"]} / add_generation_prompt={add_generation_prompt}'
                        f' / enable_thinking={enable_thinking}')
                cases.append((name, context))
    return cases


def python_renders(env, source, contexts):
    try:
        template = env.from_string(source)
    except jinja2.TemplateError as error:
        return [('error', f'{type(error).__name__}: {error}')] * len(contexts)
    results = []
    for context in contexts:
        try:
            results.append(('text', template.render(**json.loads(json.dumps(context)))))
        except Exception as error:  # what Python raises is its verdict
            results.append(('error', f'{type(error).__name__}: {error}'))
    return results


def linserve_renders(render, path, contexts_path, count):
    result = json.loads(subprocess.run([render, path, contexts_path], capture_output=True,
                                       text=True, check=True).stdout)
    if isinstance(result, dict):
        return [('error', result['parse_error'])] * count
    return [('text', r['text']) if 'text' in r else ('error', r['error']) for r in result]


def agree(theirs, ours):
    return theirs == ours or (theirs[0] == 'error' and ours[0] == 'error')


def first_difference(theirs, ours):
    if theirs[0] == 'error' or ours[0] == 'error':
        return f'  Python: {theirs[1][:300]!r}\n  here:   {ours[1][:300]!r}'
    a, b = theirs[1], ours[1]
    at = 0
    while at < min(len(a), len(b)) and a[at] == b[at]:
        at += 1
    return (f'  first difference at {at}:\n  Python: {a[max(0, at - 60):at + 60]!r}\n'
            f'  here:   {b[max(0, at - 60):at + 60]!r}')


def main():
    render = sys.argv[1]
    template_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, 'templates')
    cases = conversation_cases()
    contexts = [context for _, context in cases]
    env = jinja_python_reference.python_environment()
    failures = compared = both_refused = 0
    files = sorted(f for f in os.listdir(template_dir) if f.endswith('.jinja'))
    with tempfile.TemporaryDirectory() as workdir:
        contexts_path = os.path.join(workdir, 'contexts.json')
        with open(contexts_path, 'w', encoding='utf-8') as f:
            json.dump(contexts, f)
        for file in files:
            path = os.path.join(template_dir, file)
            with open(path, encoding='utf-8', newline='') as f:
                source = f.read()
            theirs = python_renders(env, source, contexts)
            ours = linserve_renders(render, path, contexts_path, len(cases))
            if not all(agree(t, o) for t, o in zip(theirs, ours)):
                # Rendered again in both: a day that turns between the two
                # (strftime_now) is no difference.
                theirs = python_renders(env, source, contexts)
                ours = linserve_renders(render, path, contexts_path, len(cases))
            differ = 0
            for (name, _), t, o in zip(cases, theirs, ours):
                if t[0] == 'error' and o[0] == 'error':
                    both_refused += 1
                elif t == o:
                    compared += 1
                else:
                    differ += 1
                    if differ <= 3:
                        print(f'FAIL {file} / {name}\n{first_difference(t, o)}')
            if all(t[0] == 'error' for t in theirs):
                print(f'FAIL {file}: Python refuses every conversation ({theirs[0][1][:200]})')
                differ += 1
            failures += differ
            print(f'{"FAIL" if differ else "ok  "} {file}: {len(cases)} conversations'
                  + (f', {differ} differ' if differ else ''))
    print(f'{len(files)} templates, {compared} renderings the same, {both_refused} refused by '
          f'both, {failures} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
