"""liblarch and its recipes against the server under test.

Runs every recipe test program built by tests/recipes/meson.build
(test_client, test_lock, test_queue, ...) against one server of the
current SUT (LARCH_SUT=larch or zookeeper): the same C test code checks
larchd and stock ZooKeeper. Each program is a cmocka suite that reads the
connect string from LARCH_HOSTS and starts its own threads and processes.

The programs are found in env RECIPE_TEST_DIR (default
<repo>/build/tests/recipes). When RECIPE_TEST_DIR is set explicitly, an
empty directory is a failure; otherwise the test is skipped. A test_client
program must exist: it is the API's own suite.

Env RECIPE_TEST_WRAPPER (e.g. "valgrind --error-exitcode=99
--leak-check=full") prefixes every program.
"""

import os
import shlex
import subprocess
import unittest

from harness import HOST, REPO_ROOT, ServerTestCase

PROGRAM_TIMEOUT_S = 240


def recipe_dir():
    return os.environ.get("RECIPE_TEST_DIR", str(REPO_ROOT / "build" / "tests" / "recipes"))


def recipe_programs():
    d = recipe_dir()
    if not os.path.isdir(d):
        return []
    return sorted(f for f in os.listdir(d)
                  if f.startswith("test_") and os.access(os.path.join(d, f), os.X_OK)
                  and os.path.isfile(os.path.join(d, f)))


class RecipeTest(ServerTestCase, unittest.TestCase):

    def run_program(self, name):
        env = dict(os.environ)
        # One member of an ensemble for every handle: the suites compare what
        # one handle wrote with what another reads, which ZooKeeper promises
        # across sessions only on one server (or after a sync).
        env["LARCH_HOSTS"] = "%s:%d" % (HOST, self.server.port)
        wrapper = shlex.split(os.environ.get("RECIPE_TEST_WRAPPER", ""))
        p = subprocess.run(wrapper + [os.path.join(recipe_dir(), name)], env=env,
                           capture_output=True, text=True, timeout=PROGRAM_TIMEOUT_S)
        report = (p.stdout + p.stderr).strip()
        self.assertEqual(p.returncode, 0, "%s failed against %s:\n%s" % (
            name, self.server.kind, report[-6000:]))
        self.assertRegex(p.stdout + p.stderr, r"PASSED|passed")

    def test_programs_present(self):
        programs = recipe_programs()
        if not programs:
            if "RECIPE_TEST_DIR" in os.environ:
                self.fail("no recipe test programs in RECIPE_TEST_DIR=%s" % recipe_dir())
            self.skipTest("recipe tests not built (%s)" % recipe_dir())
        self.assertIn("test_client", programs)


def _add_program_tests():
    for name in recipe_programs():
        def test(self, name=name):
            self.run_program(name)
        setattr(RecipeTest, name, test)


_add_program_tests()


if __name__ == "__main__":
    unittest.main()
