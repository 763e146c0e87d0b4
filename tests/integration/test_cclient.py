"""The official C client (libzookeeper_mt) against the server under test.

Runs the zkc_test program built by tests/integration/meson.build. Its path
comes from env ZKC_TEST (default <repo>/build/tests/integration/zkc_test).
When ZKC_TEST is set explicitly a missing binary is a failure; otherwise the
test is skipped (the library is optional at build time).
"""

import os
import subprocess
import unittest

from harness import REPO_ROOT, ServerTestCase

ZKC_TIMEOUT_S = 120


def zkc_test_path():
    return os.environ.get("ZKC_TEST",
                          str(REPO_ROOT / "build" / "tests" / "integration" / "zkc_test"))


class CClientTest(ServerTestCase, unittest.TestCase):

    def test_c_client_api(self):
        binary = zkc_test_path()
        if not os.access(binary, os.X_OK):
            if "ZKC_TEST" in os.environ:
                self.fail("ZKC_TEST=%s is not an executable" % binary)
            self.skipTest("zkc_test not built (%s); libzookeeper-mt-dev missing?" % binary)
        p = subprocess.run([binary, self.server.hosts], capture_output=True, text=True,
                           timeout=ZKC_TIMEOUT_S)
        report = (p.stdout + p.stderr).strip()
        self.assertEqual(p.returncode, 0, "zkc_test failed:\n" + report[-4000:])
        self.assertRegex(p.stdout, r"zkc_test: \d+ checks, 0 failed")


if __name__ == "__main__":
    unittest.main()
