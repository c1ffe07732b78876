#!/usr/bin/env python3
"""cmake/unity_own_units.py: which files a unity build compiles alone.

Files written here, in this codebase's style, with names that would clash in
one unit (cmake/UnityBuild.cmake says why) and names that would not.

Usage: unity_own_units_test.py [SOURCE_DIR]  (the checkout; default: this file's ../..)
"""

import os
import sys
import tempfile
import unittest

SOURCE_DIR = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                             os.path.join(os.path.dirname(__file__), '..'))
sys.path.insert(0, os.path.join(SOURCE_DIR, 'cmake'))
import unity_own_units  # noqa: E402


class UnityOwnUnitsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def alone(self, sources, in_headers=frozenset()):
        return {f for _, f in unity_own_units.units_alone(sources, set(in_headers))}

    def test_two_files_with_the_same_file_local_constant_do_not_share_a_unit(self):
        a = self.write('a.cc', 'namespace linserve {\nnamespace {\n\nconstexpr int64_t kPanel = 16;\n\n'
                       '}  // namespace\n}  // namespace linserve\n')
        b = self.write('b.cc', 'namespace linserve {\nnamespace {\n\nconstexpr int64_t kPanel = 4;\n\n'
                       '}  // namespace\n}  // namespace linserve\n')
        c = self.write('c.cc', 'namespace linserve {\nnamespace {\n\nconstexpr int kOther = 1;\n\n'
                       '}  // namespace\n}  // namespace linserve\n')
        self.assertEqual(len(self.alone({'t': [a, b, c]}) & {a, b}), 1)
        self.assertNotIn(c, self.alone({'t': [a, b, c]}))

    def test_files_of_different_targets_never_clash(self):
        a = self.write('a.cc', 'namespace {\nusing Json = nlohmann::json;\n}  // namespace\n')
        b = self.write('b.cc', 'namespace {\nusing Json = RequestJson;\n}  // namespace\n')
        self.assertEqual(self.alone({'t': [a], 'u': [b]}), set())

    def test_a_file_local_helper_clashes_with_another_files_public_function(self):
        a = self.write('a.cc', 'namespace {\n\nvoid Run(int n) {}\n\n}  // namespace\n')
        b = self.write('b.cc', 'void Run(int64_t n, int64_t m) {}\n')
        self.assertEqual(len(self.alone({'t': [a, b]})), 1)
        self.assertEqual(len(self.alone({'t': [b, a]})), 1)

    def test_two_public_definitions_of_one_name_are_overloads_not_a_clash(self):
        a = self.write('a.cc', 'absl::Status Parse(const std::string& text) {}\n')
        b = self.write('b.cc', 'absl::Status Parse(std::string_view text, int depth) {}\n')
        self.assertEqual(self.alone({'t': [a, b]}), set())

    def test_a_file_local_name_a_header_declares_goes_alone(self):
        a = self.write('a.cc', 'namespace {\n\nstruct LayerState {\n  int x;\n};\n\n}  // namespace\n')
        b = self.write('b.cc', 'static int ConnectLoopback(int port) { return port; }\n')
        c = self.write('c.cc', 'int Unrelated() { return 0; }\n')
        self.assertEqual(self.alone({'t': [a, b, c]}, {'LayerState', 'ConnectLoopback'}), {a, b})

    def test_the_repositorys_headers_declare_the_names_files_may_hide(self):
        names = unity_own_units.header_names(SOURCE_DIR)
        self.assertIn('LayerState', names)  # engine/model/state.h
        self.assertIn('ConnectLoopback', names)  # tests/server/server_process.h

    def test_indented_names_are_members_not_file_scope(self):
        a = self.write('a.cc', 'namespace {\n\nstruct A {\n  int Size() const;\n};\n\n}  // namespace\n')
        b = self.write('b.cc', 'namespace {\n\nstruct B {\n  int Size() const;\n};\n\n}  // namespace\n')
        self.assertEqual(self.alone({'t': [a, b]}), set())


if __name__ == '__main__':
    unittest.main()
