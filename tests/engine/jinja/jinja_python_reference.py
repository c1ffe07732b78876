#!/usr/bin/env python3
"""linserve's Jinja engine against Python's own Jinja (Debian's python3-jinja2),
in the environment transformers renders chat templates in: a sandbox with
trim_blocks, lstrip_blocks and loop controls, its {% generation %} tag, its
tojson, raise_exception and strftime_now.

Each template of python_reference_cases.jsonl renders over one context in
both. They must give the same text, or both fail; a case may say otherwise:
  "refused"    this engine refuses what Python renders (a filter or method
               it does not have, an integer past 64 bits): an error here, or
               the same text once it has it; never other text;
  "ours_only"  Python refuses what this engine renders ("why" says what);
  "departs"    a known difference ("why" says which), printed, not judged.

Usage: jinja_python_reference.py JINJA_RENDER [CASES]
Skips (exit 77) where python3-jinja2 is not installed.
"""

import datetime
import json
import os
import subprocess
import sys
import tempfile

try:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.sandbox
except ImportError:
    print('SKIP: python3-jinja2 not installed')
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
CONTEXT = {
    's': 'Hello World', 'n': 7, 'f': 2.5, 'l': [3, 1, 2], 'd': {'b': 1, 'a': 2}, 'e': '',
    'none': None, 't': True,
    'msgs': [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'yo'}],
}


class GenerationTag(jinja2.ext.Extension):
    """transformers' {% generation %}...{% endgeneration %}: the body rendered
    through a call block (so in its own scope), as transformers renders it when
    it is not tracking the assistant's tokens."""
    tags = {'generation'}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(('name:endgeneration',), drop_needle=True)
        call = self.call_method('_render_body')
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def python_environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=['jinja2.ext.loopcontrols', GenerationTag])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = lambda f: datetime.datetime.now().strftime(f)
    return env


def python_render(env, template):
    try:
        return 'text', env.from_string(template).render(**CONTEXT)
    except Exception as error:  # what Python raises is its verdict
        return 'error', f'{type(error).__name__}: {error}'


def linserve_render(render, template, workdir):
    template_path = os.path.join(workdir, 'template.jinja')
    context_path = os.path.join(workdir, 'contexts.json')
    with open(template_path, 'w', encoding='utf-8') as f:
        f.write(template)
    with open(context_path, 'w', encoding='utf-8') as f:
        json.dump([CONTEXT], f)
    out = subprocess.run([render, template_path, context_path], capture_output=True, text=True,
                         check=True).stdout
    result = json.loads(out)
    if isinstance(result, dict):
        return 'error', result['parse_error']
    result = result[0]
    return ('text', result['text']) if 'text' in result else ('error', result['error'])


def main():
    render = sys.argv[1]
    cases_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        HERE, 'python_reference_cases.jsonl')
    with open(cases_path, encoding='utf-8') as f:
        cases = [json.loads(line) for line in f if line.strip()]
    env = python_environment()
    failures = []
    counts = {'same': 0, 'refused': 0, 'ours_only': 0, 'departs': 0}
    with tempfile.TemporaryDirectory() as workdir:
        for case in cases:
            template = case['template']
            expect = case.get('expect', 'same')
            theirs = python_render(env, template)
            ours = linserve_render(render, template, workdir)
            same = theirs == ours or (theirs[0] == 'error' and ours[0] == 'error')
            if same:
                counts['same'] += 1
            elif expect == 'refused' and theirs[0] == 'text' and ours[0] == 'error':
                counts['refused'] += 1
            elif expect == 'ours_only' and theirs[0] == 'error' and ours[0] == 'text':
                counts['ours_only'] += 1
            elif expect == 'departs':
                counts['departs'] += 1
                print(f'departs ({case["why"]}): {template!r}: Python {theirs[1]!r}, '
                      f'here {ours[1]!r}')
            else:
                failures.append(f'{template!r}\n  Python: {theirs}\n  here:   {ours}\n'
                                f'  expected: {expect}')
    print(f'{len(cases)} templates: {counts["same"]} the same (or both refused), '
          f'{counts["refused"]} refused here only, {counts["ours_only"]} refused by Python only, '
          f'{counts["departs"]} known departures')
    for failure in failures:
        print('FAIL', failure)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
