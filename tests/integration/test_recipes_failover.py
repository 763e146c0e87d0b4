"""liblarch's recipe suite against a 3-member larchd ensemble, with a connect
string naming all three members, and with its leader SIGKILLed mid-test.

Every recipe test program test_recipes.py runs (test_client, liblarch's own
suite, and test_lock, test_queue, ...; found in env RECIPE_TEST_DIR, default
<repo>/build/tests/recipes) runs here with LARCH_HOSTS naming every member:
each handle picks a member at random and moves to another one when its
connection drops, so what one handle wrote another may read through a member
that has not applied it yet, and the tests and recipes must do what a correct
ZooKeeper client does (sync before reading another session's write; after
CONNECTIONLOSS find out what happened and retry).

Two runs, each on a fresh ensemble (harness.Ensemble; every member is
stopped by PID in the test's cleanup):
  test_a_no_faults     every program, one after another, nothing killed;
  test_b_leader_killed every program again, and while each one runs the
                       current leader is SIGKILLed: at a fraction
                       (KILL_AT_FRACTION, a different one for each program)
                       of the time the program took in run a, or after
                       KILL_AFTER_S when run a did not run first. The
                       program must ride out the election; once it ends
                       the killed member restarts and the next program
                       starts on three members with one leader again.
Each program is a subtest: a failing one does not stop the others, and its
report names the program, the kill (member, time), the program's output and
the members' state. Every program runs in its own process group and is
killed (SIGKILL to its group) if it outlives PROGRAM_TIMEOUT_S; RT_WAIT_MS
(tests/recipes/rt.h) bounds the waits inside.

LaggingMemberTest: the GUID rule when a handle moves to a member that lags
behind the one that took its lost create (test_lock's lagging-member case,
on a proxied ensemble whose one follower hears the others late).

Env RECIPE_TEST_WRAPPER (e.g. valgrind) prefixes every program, as for
test_recipes. Only larchd: the ensemble is harness.Ensemble's.
"""

import os
import shlex
import signal
import subprocess
import time
import unittest

from harness import Ensemble, sut_kind
from test_recipes import recipe_dir, recipe_programs

PROGRAM_TIMEOUT_S = 120
# tickTime 200 ms: sessions may be 400 ms .. maxSessionTimeout (below), so
# the tests get the 4 s (rt.h) they ask for, as from a standalone server; a
# member that hears no leader for syncLimit = 5 ticks (1 s) starts an election.
TICK_MS = 200
SYNC_LIMIT = 5
CFG_LINES = ["zookeeper.extendedTypesEnabled=true", "maxSessionTimeout=40000"]
# When the leader dies in run b, per program in turn: this fraction of the
# program's time in run a, or (run a not run first) these seconds after it
# started. A program that ends sooner is not hit.
KILL_AT_FRACTION = [0.3, 0.6, 0.15, 0.8, 0.45]
KILL_AFTER_S = [0.1, 0.2, 0.3]
MIN_KILL_AFTER_S = 0.05
# Run b is meant to kill: at least half the programs must have been hit.
NEW_LEADER_TIMEOUT_S = 20.0


def members_report(ens, lines=8):
    """Each member's state, last zxid and stderr tail, for a failure report."""
    out = []
    for sid in ens.ids:
        try:
            zxid = ens.mntr(sid).get("zk_larch_last_zxid", "?")
        except OSError:
            zxid = "?"
        out.append("-- member %d (%s, last zxid %s):\n%s" % (
            sid, ens.state(sid), zxid, ens.stderr_tail(sid, lines)))
    return "\n".join(out)


@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class RecipeFailoverTest(unittest.TestCase):

    durations = {}  # program -> seconds it took in run a (run b's kill times)

    def setUp(self):
        self.programs = recipe_programs()
        if not self.programs:
            if "RECIPE_TEST_DIR" in os.environ:
                self.fail("no recipe test programs in RECIPE_TEST_DIR=%s" % recipe_dir())
            self.skipTest("recipe tests not built (%s)" % recipe_dir())
        self.assertIn("test_client", self.programs)
        self.ens = Ensemble(n=3, tick_ms=TICK_MS, sync_limit=SYNC_LIMIT, cfg_lines=CFG_LINES)
        self.addCleanup(self.stop_ensemble)
        self.ens.start()
        self.ens.wait_leader()

    def stop_ensemble(self):
        self.ens.stop()
        self.assertEqual(self.ens.sanitizer_report(), [])

    # -- one program --------------------------------------------------------
    def start_program(self, name):
        env = dict(os.environ)
        env["LARCH_HOSTS"] = self.ens.hosts()
        wrapper = shlex.split(os.environ.get("RECIPE_TEST_WRAPPER", ""))
        return subprocess.Popen(wrapper + [os.path.join(recipe_dir(), name)], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)

    @staticmethod
    def stop_program(proc):
        """Kills the program's process group (its forked children too) if it
        is still running, and reaps it."""
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)

    def finish_program(self, proc, deadline):
        try:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            return out, False
        except subprocess.TimeoutExpired:
            self.stop_program(proc)
            out, _ = proc.communicate(timeout=10)
            return out, True

    def check_program(self, name, proc, out, timed_out, elapsed, what):
        report = "%s (%s, %.1f s)" % (name, what, elapsed)
        self.assertFalse(timed_out, "%s: still running after %d s, killed:\n%s" % (
            report, PROGRAM_TIMEOUT_S, out[-6000:]))
        self.assertEqual(proc.returncode, 0, "%s failed:\n%s\n%s" % (
            report, out[-6000:], members_report(self.ens)))
        self.assertRegex(out, r"PASSED|passed")

    def run_program(self, name, kill_after_s=None):
        """Runs one program to its end; with kill_after_s, SIGKILLs the
        leader once it has run that long. Returns (process, output, whether
        it timed out, seconds, what happened to the ensemble, whether the
        leader was killed)."""
        start = time.monotonic()
        deadline = start + PROGRAM_TIMEOUT_S
        proc = self.start_program(name)
        killed = None
        what = "no faults"
        try:
            if kill_after_s is not None:
                try:
                    proc.wait(timeout=kill_after_s)
                    what = "ended before its kill at %.2f s" % kill_after_s
                except subprocess.TimeoutExpired:
                    killed = self.ens.wait_leader(timeout_s=NEW_LEADER_TIMEOUT_S)
                    self.ens.kill(killed)
                    at = time.monotonic() - start
                    new = self.ens.wait_leader(timeout_s=NEW_LEADER_TIMEOUT_S)
                    what = "leader %d killed at %.2f s, %d leads %.2f s later" % (
                        killed, at, new, time.monotonic() - start - at)
            out, timed_out = self.finish_program(proc, deadline)
        finally:
            self.stop_program(proc)
            if killed is not None:
                # the next program starts on three members and one leader
                self.ens.restart(killed)
                self.ens.wait_leader(timeout_s=NEW_LEADER_TIMEOUT_S)
        return proc, out, timed_out, time.monotonic() - start, what, killed is not None

    # -- the runs -------------------------------------------------------------
    def test_a_no_faults(self):
        for name in self.programs:
            with self.subTest(program=name):
                proc, out, timed_out, elapsed, what, _ = self.run_program(name)
                self.check_program(name, proc, out, timed_out, elapsed, what)
                RecipeFailoverTest.durations[name] = elapsed

    def test_b_leader_killed(self):
        kills = []
        for i, name in enumerate(self.programs):
            with self.subTest(program=name):
                took = self.durations.get(name)
                if took is not None:
                    delay = max(MIN_KILL_AFTER_S, took * KILL_AT_FRACTION[i % len(KILL_AT_FRACTION)])
                else:
                    delay = KILL_AFTER_S[i % len(KILL_AFTER_S)]
                proc, out, timed_out, elapsed, what, killed = self.run_program(name, delay)
                if killed:
                    kills.append("%s: %s" % (name, what))
                self.check_program(name, proc, out, timed_out, elapsed, what)
        print("\n%s: the leader died under %d of %d programs:\n  %s" % (
            self.id(), len(kills), len(self.programs), "\n  ".join(kills)), flush=True)
        self.assertGreaterEqual(len(kills), len(self.programs) // 2,
                                "too few programs saw the leader die: %s" % kills)


@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class LaggingMemberTest(unittest.TestCase):
    """The GUID rule (seed 004) when a handle moves to a member that lags:
    test_lock's lagging-member case (it runs only with RT_LAGGING_HOSTS)
    against an ensemble whose one follower hears the others LAG_S late.
    Its handle names the leader and then that follower; a lock whose
    create reached the leader but whose reply was cut off looks for its
    node on the follower, which must sync first."""

    LAG_S = 0.05

    def test_lock_guid_rule_on_a_lagging_member(self):
        if "test_lock" not in recipe_programs():
            if "RECIPE_TEST_DIR" in os.environ:
                self.fail("no test_lock in RECIPE_TEST_DIR=%s" % recipe_dir())
            self.skipTest("recipe tests not built (%s)" % recipe_dir())
        ens = Ensemble(n=3, tick_ms=TICK_MS, sync_limit=SYNC_LIMIT, cfg_lines=CFG_LINES,
                       proxied=True)
        self.addCleanup(lambda: self.assertEqual(ens.sanitizer_report(), []))
        self.addCleanup(ens.stop)
        ens.start()
        leader = ens.wait_leader()
        lagging = [i for i in ens.ids if i != leader][0]
        ens.delay([lagging], [i for i in ens.ids if i != lagging], self.LAG_S)
        env = dict(os.environ)
        env["LARCH_HOSTS"] = ens.hosts()
        env["RT_LAGGING_HOSTS"] = ens.hosts([leader, lagging])
        wrapper = shlex.split(os.environ.get("RECIPE_TEST_WRAPPER", ""))
        proc = subprocess.Popen(wrapper + [os.path.join(recipe_dir(), "test_lock")], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=PROGRAM_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            RecipeFailoverTest.stop_program(proc)
            out, _ = proc.communicate(timeout=10)
            self.fail("test_lock still running after %d s:\n%s" % (PROGRAM_TIMEOUT_S, out[-4000:]))
        finally:
            RecipeFailoverTest.stop_program(proc)
        self.assertEqual(proc.returncode, 0, "test_lock (member %d lags %.0f ms behind leader "
                         "%d) failed:\n%s\n%s" % (lagging, self.LAG_S * 1000, leader,
                                                  out[-4000:], members_report(ens)))
        self.assertIn("test_guid_rule_on_a_lagging_member", out)


if __name__ == "__main__":
    unittest.main()
