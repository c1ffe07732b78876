#!/usr/bin/env python3
"""Which sources a unity build (cmake/UnityBuild.cmake) compiles alone.

Reads lines "TARGET<TAB>SOURCE" (absolute paths) on standard input and
prints, as lines of the same form, the sources to leave out of unity units.
A name a file keeps to itself (in its anonymous namespace, or static) clashes
in a shared unit with the same name defined by another file of its target,
and can hide or make ambiguous the same name of a project header for the
files after it. So a file goes alone when one of its own names is also a
header's, and of two files that clash, one goes alone (greedy: the file in
the most clashes first). This codebase's style is assumed: namespace scope
at column 0, anonymous namespaces closed by a line "}  // namespace".
"""
import collections
import os
import re
import sys

# A definition or declaration at column 0: a type or alias, a constant or
# variable, or a function (the name just before the opening parenthesis).
DEFINITION = re.compile(
    r'^(?:template\s*<.*>\s*)?'
    r'(?:(?:struct|class|union|enum(?:\s+class)?|using)\s+(\w+)'
    r'|(?:constexpr|const|static|inline|thread_local)\b[^=(;{]*?\b(\w+)\s*(?:\[[^\]]*\])?\s*[={;]'
    r'|[A-Za-z_][\w:<>,*& ]*?[\s*&](\w+)\s*\()')
HEADER_FOLDERS = ('engine', 'server', 'client', 'tests', 'tools', 'fuzz', 'bench')


def names_of(path):
    """(every name defined at namespace scope, the ones kept to the file)."""
    every, own = set(), set()
    anonymous = False
    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            if line.startswith('namespace {'):
                anonymous = True
                continue
            if anonymous and line.startswith('}') and 'namespace' in line:
                anonymous = False
                continue
            if line.startswith('using namespace'):
                continue
            m = DEFINITION.match(line)
            if not m:
                continue
            name = m.group(1) or m.group(2) or m.group(3)
            if not name or name == 'main':
                continue
            every.add(name)
            if anonymous or line.startswith('static '):
                own.add(name)
    return every, own


def header_names(root):
    names = set()
    for folder in HEADER_FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in files:
                if f.endswith('.h'):
                    names |= names_of(os.path.join(dirpath, f))[0]
    return names


def units_alone(sources, in_headers):
    """[(target, source)] to leave out, for {target: [source...]}."""
    alone = []
    for target, files in sorted(sources.items()):
        names = {f: names_of(f) for f in files}
        clashes = collections.defaultdict(set)
        for i, a in enumerate(files):
            if names[a][1] & in_headers:
                alone.append((target, a))
                continue
            for b in files[i + 1:]:
                if names[a][1] & names[b][0] or names[b][1] & names[a][0]:
                    clashes[a].add(b)
                    clashes[b].add(a)
        for alone_target, f in alone:
            if alone_target == target:
                for other in clashes.pop(f, set()):
                    clashes[other].discard(f)
        while any(clashes.values()):
            worst = max(clashes, key=lambda f: (len(clashes[f]), f))
            alone.append((target, worst))
            for other in clashes.pop(worst):
                clashes[other].discard(worst)
    return alone


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = collections.defaultdict(list)
    for line in sys.stdin:
        target, _, source = line.rstrip('\n').partition('\t')
        if source.endswith(('.cc', '.cpp', '.cxx', '.c')):
            sources[target].append(source)
    for target, source in units_alone(sources, header_names(root)):
        print(f'{target}\t{source}')


if __name__ == '__main__':
    main()
