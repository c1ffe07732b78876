#!/usr/bin/env python3
"""The folder rule of docs/DESIGN.md ("Folders"), checked on the tree.

The table in that section is the rule: each row names a folder and the
folders it may include, and through them what those may include. This test
reads the table, then every C++ file of the folders it names, and fails on:
- an include of one of our headers from a folder the rule does not reach
  (the engine including the server, a layer including one above it);
- a folder under engine/ or server/ holding sources that the table does not
  list (a new folder is added to the table, with its place in the layers);
- a source file directly in engine/ (each belongs to a folder by concern).

Usage: layering_test.py [SOURCE_DIR]  (the checkout; default: this file's ../..)
"""

import os
import re
import sys
import tempfile
import unittest

SOURCE_SUFFIXES = ('.h', '.cc', '.inc')
# The generated protobuf and gRPC code: `proto/` in the table.
PROTO_PREFIX = 'linserve/v1/'
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
FOLDER = re.compile(r'`([a-z0-9_/]+/)`')


def read_rule(design_md):
    """The Folders table: {folder: set of folders it names as includable}."""
    with open(design_md, encoding='utf-8') as f:
        text = f.read()
    section = text.split('\n### Folders\n', 1)
    if len(section) != 2:
        raise ValueError(f'{design_md}: no "### Folders" section')
    rule = {}
    for line in section[1].splitlines():
        if line.startswith('#'):
            break
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) != 3 or not cells[0].startswith('`'):
            continue
        folder = FOLDER.match(cells[0])
        if not folder:
            continue
        rule[folder.group(1)] = set(FOLDER.findall(cells[2]))
    if not rule:
        raise ValueError(f'{design_md}: the Folders table has no rows')
    return rule


def reachable(rule):
    """Each folder's own and every folder below it, following the rule."""
    closure = {}

    def below(folder, path):
        if folder in closure:
            return closure[folder]
        if folder in path:
            raise ValueError('the Folders table has a cycle: ' + ' -> '.join(path + (folder,)))
        reach = {folder}
        for lower in rule.get(folder, ()):
            reach |= below(lower, path + (folder,))
        closure[folder] = reach
        return reach

    for folder in rule:
        below(folder, ())
    return closure


def folder_of(path, rule):
    """The table's folder a file belongs to: the longest row that holds it."""
    best = None
    for folder in rule:
        directory = os.path.dirname(path) + '/'
        if directory == folder or (folder != 'server/' and directory.startswith(folder)):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def included_folder(header, rule):
    """The table's folder an included header is in, or None when not ours."""
    if header.startswith(PROTO_PREFIX):
        return 'proto/'
    return folder_of(header, rule)


def check(source_dir, design_md):
    """Every violation of the rule in the tree, as 'file: problem' lines."""
    rule = read_rule(design_md)
    closure = reachable(rule)
    problems = []
    for top in sorted({f.split('/')[0] for f in rule}):
        for directory, _, names in os.walk(os.path.join(source_dir, top)):
            sources = sorted(n for n in names if n.endswith(SOURCE_SUFFIXES))
            if not sources:
                continue
            relative_dir = os.path.relpath(directory, source_dir) + '/'
            if relative_dir == 'engine/':
                problems += [f'engine/{n}: a file directly in engine/; put it in the folder of its concern'
                             for n in sources]
                continue
            if top in ('engine', 'server') and relative_dir not in rule:
                problems.append(f'{relative_dir}: holds sources but is not in the Folders table of '
                                f'docs/DESIGN.md')
                continue
            for name in sources:
                path = relative_dir + name
                folder = folder_of(path, rule)
                if folder is None:
                    continue
                with open(os.path.join(source_dir, path), encoding='utf-8', errors='replace') as f:
                    text = f.read()
                for header in INCLUDE.findall(text):
                    target = included_folder(header, rule)
                    if target is not None and target not in closure[folder]:
                        problems.append(f'{path}: includes "{header}" ({target}), which {folder} may '
                                        f'not include (docs/DESIGN.md, "Folders")')
    return problems


class LayeringTest(unittest.TestCase):
    source_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def test_every_include_in_the_tree_goes_downward(self):
        problems = check(self.source_dir, os.path.join(self.source_dir, 'docs/DESIGN.md'))
        self.assertEqual(problems, [], '\n' + '\n'.join(problems))

    def test_the_engine_never_reaches_the_server(self):
        rule = read_rule(os.path.join(self.source_dir, 'docs/DESIGN.md'))
        closure = reachable(rule)
        for folder, reach in closure.items():
            if folder.startswith('engine/'):
                self.assertEqual([f for f in reach if not f.startswith('engine/')], [], folder)

    def test_an_upward_include_a_missing_folder_and_a_loose_file_are_caught(self):
        with tempfile.TemporaryDirectory() as tree:
            def write(path, text):
                os.makedirs(os.path.dirname(os.path.join(tree, path)), exist_ok=True)
                with open(os.path.join(tree, path), 'w') as f:
                    f.write(text)
            write('docs/DESIGN.md', '# d\n\n### Folders\n\n| folder | job | may include |\n|---|---|---|\n'
                  '| `engine/low/` | x | nothing |\n| `engine/high/` | y | `engine/low/` |\n'
                  '| `server/grpc/` | z | `engine/high/`, `proto/` |\n\n## next\n')
            write('engine/low/a.h', '#include "engine/high/b.h"\n#include "engine/low/c.h"\n')
            write('engine/high/b.h', '#include "engine/low/a.h"\n#include "server/grpc/s.h"\n')
            write('engine/new/d.h', '')
            write('engine/loose.cc', '')
            write('server/grpc/s.h', '#include "engine/low/a.h"\n#include "linserve/v1/x.pb.h"\n')
            problems = check(tree, os.path.join(tree, 'docs/DESIGN.md'))
            self.assertEqual(sorted(p.split(':')[0] for p in problems),
                             ['engine/high/b.h', 'engine/loose.cc', 'engine/low/a.h', 'engine/new/'],
                             '\n'.join(problems))
            self.assertIn('"engine/high/b.h" (engine/high/)', '\n'.join(problems))
            self.assertIn('"server/grpc/s.h" (server/grpc/)', '\n'.join(problems))


if __name__ == '__main__':
    if len(sys.argv) > 1 and not sys.argv[1].startswith('-'):
        LayeringTest.source_dir = os.path.abspath(sys.argv.pop(1))
    unittest.main()
