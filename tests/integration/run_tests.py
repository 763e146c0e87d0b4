#!/usr/bin/python3
"""Runs the integration tests (unittest) and prints a one-line summary.

  run_tests.py [--sut larch|zookeeper] [--larchd PATH] [NAME ...]

NAME is a module (test_ops), a class (test_ops.AclTest) or a single test
(test_ops.AclTest.test_invalid_acls); default: every test_*.py here. The last
line of output is "integration: N passed, N failed, N skipped"; the exit
status is 1 if anything failed. Must run under /usr/bin/python3 (kazoo).
"""

import argparse
import logging
import os
import signal
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class CountingResult(unittest.TextTestResult):
    """TextTestResult that also counts passes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1


def default_names():
    return sorted(f[:-3] for f in os.listdir(HERE)
                  if f.startswith("test_") and f.endswith(".py"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sut", choices=("larch", "zookeeper"))
    ap.add_argument("--larchd", help="larchd binary (sets LARCHD)")
    ap.add_argument("-q", "--quiet", action="store_true", help="one dot per test")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    if args.sut:
        os.environ["LARCH_SUT"] = args.sut
    if args.larchd:
        os.environ["LARCHD"] = os.path.abspath(args.larchd)
    sys.path.insert(0, HERE)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)

    import harness

    def on_signal(signum, frame):
        # killed from outside (scripts/test's timeout, Ctrl-C): cleanups will
        # not run, so stop the servers we own before going
        harness.stop_all_servers()
        print("integration: interrupted by signal %d" % signum, flush=True)
        os._exit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    names = args.names or default_names()
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=1 if args.quiet else 2,
                                     resultclass=CountingResult)
    start = time.monotonic()
    result = runner.run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    sut = os.environ.get("LARCH_SUT", "larch")
    print("integration[%s] %s: %.0f s" % (sut, " ".join(names), time.monotonic() - start))
    print("integration: %d passed, %d failed, %d skipped" % (
        result.passed, failed, len(result.skipped)))
    sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
