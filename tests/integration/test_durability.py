"""Durability of larchd: restarts, a SIGKILL crash loop, a full disk, and
refusal to start on a corrupt log (DESIGN.md invariant 4, issue 4).

These tests start larchd themselves on a data dir that outlives each
process (the harness's Server owns one process and one temp dir), stop every
process by PID, and bound every wait. Stock ZooKeeper is not involved.
"""

import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (EPHEMERAL, HOST, OK, OPEN_ACL, ConnectionClosed, RawClient, Writer,
                     connect_raw, four_letter, free_port, larchd_path, sut_kind, wait_until)

START_TIMEOUT_S = 20.0
# A data dir written before session passwords were recorded (README.md there).
FIXTURE_V1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                          "datadir-v1")


def fixture_v1_sessions():
    """(session id, password) of each session of the format-1 fixture."""
    out = []
    with open(os.path.join(FIXTURE_V1, "sessions.txt")) as f:
        for line in f:
            words = line.split()
            out.append((int(words[1], 16), bytes.fromhex(words[3])))
    return out


class CrashState:
    """What the crash loop's writers sent and what the server acknowledged."""

    def __init__(self):
        self.seq = 0
        self.created = {}      # path -> data, acknowledged and not deleted since
        self.deleted = set()   # acknowledged deletes of paths not re-created
        self.deleting = set()  # deletes sent, not yet acknowledged: outcome unknown
        self.counter_acked = 0
        self.counter_sent = 0
        self.multis_sent = 0
        self.multis_acked = set()
        self.in_flight_at_kill = 0


def write_until_killed(port, st, seed):
    """Pipelined bursts of mixed writes until the connection dies; records
    every acknowledgement in st."""
    rng = random.Random(seed)
    try:
        c = connect_raw(port)
    except (ConnectionClosed, OSError):
        return
    pending = {}
    try:
        while True:
            for _ in range(rng.randint(1, 16)):
                st.seq += 1
                kind = rng.choice(("create", "create", "set", "delete", "multi", "eph"))
                if kind == "create":
                    path, data = "/c/n%d" % st.seq, b"%d" % st.seq
                    pending[c.send_request(1, c.create_body(path, data))] = ("create", path, data)
                elif kind == "set":
                    st.counter_sent += 1
                    body = Writer().string("/ctr").buffer(b"%d" % st.counter_sent).int(-1).bytes()
                    pending[c.send_request(5, body)] = ("set", st.counter_sent, None)
                elif kind == "delete" and st.created:
                    path = rng.choice(sorted(st.created))
                    body = Writer().string(path).int(-1).bytes()
                    st.deleting.add(path)
                    pending[c.send_request(2, body)] = ("delete", path, None)
                elif kind == "multi":
                    st.multis_sent += 1
                    j = st.multis_sent
                    body = c.multi_body([("create", "/m/a%d" % j, b"", OPEN_ACL, 0),
                                         ("create", "/m/b%d" % j, b"", OPEN_ACL, 0)])
                    pending[c.send_request(14, body)] = ("multi", j, None)
                else:
                    pending[c.send_request(1, c.create_body("/e%d" % st.seq, b"", flags=EPHEMERAL))] = \
                        ("eph", None, None)
            while pending:
                rep = c.read_one(timeout_s=10.0)
                what = pending.pop(rep.xid, None)
                if what is not None and rep.err == OK:
                    record_ack(st, what)
    except (ConnectionClosed, OSError):
        st.in_flight_at_kill += len(pending)
    finally:
        c.close()


def record_ack(st, what):
    kind, a, b = what
    if kind == "create":
        st.created[a] = b
        st.deleted.discard(a)
    elif kind == "delete":
        st.created.pop(a, None)
        st.deleted.add(a)
        st.deleting.discard(a)
    elif kind == "set":
        st.counter_acked = max(st.counter_acked, a)
    elif kind == "multi":
        st.multis_acked.add(a)


class Larchd:
    """One larchd process on a given data dir (kept across restarts)."""

    def __init__(self, data_dir, extra=()):
        self.data_dir = data_dir
        self.extra = list(extra)
        self.port = free_port()
        self.proc = None
        self.log_path = os.path.join(os.path.dirname(data_dir), "larchd-%d.log" % self.port)

    def start(self):
        # Small log chunks and frequent snapshots: fifty restarts stay cheap,
        # and recovery from a snapshot plus the log is exercised every time.
        cfg = os.path.join(os.path.dirname(self.data_dir), "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("preAllocSize=1024\nsnapCount=500\n")
        argv = [larchd_path(), "--config", cfg, "--port", str(self.port), "--bind", HOST,
                "--4lw", "*", "--data-dir", self.data_dir, "--min-session-timeout", "1000",
                "--max-session-timeout", "60000"] + self.extra
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.log,
                                     stdin=subprocess.DEVNULL)
        ready = wait_until(lambda: self.proc.poll() is not None or self._answers(), START_TIMEOUT_S)
        if self.proc.poll() is not None or not ready:
            raise AssertionError("larchd did not start:\n" + self.log_text()[-3000:])
        return self

    def _answers(self):
        try:
            return four_letter(self.port, "ruok", timeout_s=0.5) == b"imok"
        except OSError:
            return False

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc:
            self.log.close()
        code = self.proc.returncode if self.proc else None
        self.proc = None
        return code

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


@unittest.skipUnless(sut_kind() == "larch", "durability tests drive larchd itself")
class DurabilityTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="larch-dur-")
        self.data = os.path.join(self.tmp, "data")
        self.servers = []
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def tearDown(self):
        for s in self.servers:
            s.kill()

    def server(self, extra=()):
        s = Larchd(self.data, extra)
        self.servers.append(s)
        return s.start()

    def test_state_sessions_and_ephemerals_survive_restart(self):
        s = self.server()
        c = connect_raw(s.port, timeout_ms=30000)
        self.assertEqual(c.create("/keep", b"v1").err, OK)
        self.assertEqual(c.set_data("/keep", b"v2").err, OK)
        self.assertEqual(c.create("/eph", b"", flags=EPHEMERAL).err, OK)
        sid, pw = c.session.session_id, c.session.passwd
        c.sock.close()
        self.assertEqual(s.kill(signal.SIGKILL), -signal.SIGKILL)
        s.start()
        # The same session reattaches after the restart (its clock restarted).
        c2 = RawClient(s.port)
        self.addCleanup(c2.close)
        sess = c2.connect(timeout_ms=30000, session_id=sid, passwd=pw)
        self.assertGreater(sess.timeout_ms, 0, s.log_text())
        data = c2.get_data("/keep")
        self.assertEqual(data.err, OK)
        self.assertEqual(data.value[0], b"v2")
        self.assertEqual(data.value[1].version, 1)
        self.assertEqual(c2.exists("/eph").err, OK)
        self.assertIn("recovered to zxid", s.log_text())

    def test_password_is_recorded_and_survives_a_new_key(self):
        # The session's password lives in its createSession txn, not in the
        # key: a server whose key changed while it was down still lets the
        # client back in, with the same password, and refuses a wrong one.
        s = self.server()
        c = connect_raw(s.port, timeout_ms=30000)
        self.assertEqual(c.create("/eph", b"", flags=EPHEMERAL).err, OK)
        sid, pw = c.session.session_id, c.session.passwd
        c.sock.close()
        self.assertEqual(s.kill(signal.SIGKILL), -signal.SIGKILL)
        with open(os.path.join(self.data, "larch", "secret"), "wb") as f:
            f.write(os.urandom(32))
        s.start()
        thief = RawClient(s.port)
        self.addCleanup(thief.close)
        wrong = bytes([pw[0] ^ 1]) + pw[1:]
        self.assertEqual(thief.connect(timeout_ms=30000, session_id=sid, passwd=wrong).timeout_ms, 0)
        c2 = RawClient(s.port)
        self.addCleanup(c2.close)
        sess = c2.connect(timeout_ms=30000, session_id=sid, passwd=pw)
        self.assertGreater(sess.timeout_ms, 0, s.log_text())
        self.assertEqual((sess.session_id, sess.passwd), (sid, pw))
        self.assertEqual(c2.exists("/eph").err, OK)

    def test_files_holding_passwords_are_private(self):
        # Log segments and snapshots record every session's password, so
        # like the key they are readable by their owner only.
        s = self.server()
        c = connect_raw(s.port, timeout_ms=30000)
        for i in range(600):  # past snapCount=500: a snapshot is written too
            self.assertEqual(c.create("/p%d" % i, b"").err, OK)
        larch = os.path.join(self.data, "larch")
        self.assertTrue(wait_until(
            lambda: any(n.startswith("snapshot.") and not n.endswith("tmp")
                        for n in os.listdir(larch)), 20.0), os.listdir(larch))
        c.sock.close()
        names = [n for n in os.listdir(larch) if n.startswith(("log.", "snapshot.", "secret"))]
        self.assertTrue(any(n.startswith("log.") for n in names), names)
        for n in names:
            mode = os.stat(os.path.join(larch, n)).st_mode & 0o777
            self.assertEqual(mode, 0o600, "%s is %o" % (n, mode))

    def test_format_1_data_dir_sessions_reattach(self):
        # A data dir of the version before passwords were recorded: a
        # format-1 snapshot and log and the key they derived passwords from.
        # Its clients come back with the passwords they were handed then,
        # also after the upgraded server has restarted once more.
        shutil.copytree(FIXTURE_V1, self.data)
        s = self.server()
        self.assertIn("2 sessions came from format-1 files", s.log_text())
        for restart in (False, True):
            if restart:
                self.assertEqual(s.kill(signal.SIGKILL), -signal.SIGKILL)
                s.start()
            for sid, pw in fixture_v1_sessions():
                thief = RawClient(s.port)
                self.addCleanup(thief.close)
                self.assertEqual(thief.connect(timeout_ms=30000, session_id=sid,
                                               passwd=b"\0" * 16).timeout_ms, 0)
                c = RawClient(s.port)
                self.addCleanup(c.close)
                sess = c.connect(timeout_ms=30000, session_id=sid, passwd=pw)
                self.assertEqual(sess.timeout_ms, 40000, s.log_text())
                self.assertEqual((sess.session_id, sess.passwd), (sid, pw))
            self.assertEqual(c.get_data("/fixture").value[0], b"v1, after the snapshot")
            self.assertEqual(c.exists("/fixture/eph-a").err, OK)
            self.assertEqual(c.create("/after-upgrade-%d" % restart, b"").err, OK)

    def test_acknowledged_writes_survive_50_kills(self):
        seed = int(os.environ.get("LARCH_CRASH_SEED", str(random.randrange(1 << 30))))
        rng = random.Random(seed)
        print("\ncrash seed %d (replay: LARCH_CRASH_SEED=%d)" % (seed, seed), flush=True)
        st = CrashState()
        s = Larchd(self.data)
        self.servers.append(s)
        s.start()
        c = connect_raw(s.port)
        for p in ("/c", "/m", "/ctr"):
            self.assertEqual(c.create(p, b"0").err, OK)
        c.close()
        for cycle in range(50):
            if cycle:
                s.start()
            writer = threading.Thread(target=write_until_killed, args=(s.port, st, rng.random()))
            writer.start()
            # SIGKILL at a random moment while writes are in flight.
            time.sleep(rng.uniform(0.05, 0.35))
            self.assertEqual(s.kill(signal.SIGKILL), -signal.SIGKILL)
            writer.join(timeout=30)
            self.assertFalse(writer.is_alive(), "writer stuck after the kill")
        s.start()
        v = connect_raw(s.port)
        self.addCleanup(v.close)
        # A delete in flight at a kill may or may not have become durable.
        missing = [p for p in st.created if p not in st.deleting and v.exists(p).err != OK]
        self.assertEqual(missing, [], "acknowledged creates lost after 50 kills")
        for p, data in st.created.items():
            if p not in st.deleting:
                self.assertEqual(v.get_data(p).value[0], data, p)
        undone = [p for p in st.deleted if v.exists(p).err == OK]
        self.assertEqual(undone, [], "acknowledged deletes undone")
        ctr = int(v.get_data("/ctr").value[0])
        self.assertGreaterEqual(ctr, st.counter_acked)
        self.assertLessEqual(ctr, st.counter_sent)
        for j in range(1, st.multis_sent + 1):
            a = v.exists("/m/a%d" % j).err == OK
            b = v.exists("/m/b%d" % j).err == OK
            self.assertEqual(a, b, "multi %d half applied" % j)
            if j in st.multis_acked:
                self.assertTrue(a, "acknowledged multi %d lost" % j)
        print("crash loop: 50 kills, %d acknowledged creates kept, counter %d (acked %d, sent %d), "
              "%d of %d multis acknowledged, %d requests in flight at the kills"
              % (len(st.created), ctr, st.counter_acked, st.counter_sent, len(st.multis_acked),
                 st.multis_sent, st.in_flight_at_kill), flush=True)

    def test_full_disk_holds_writes_serves_reads_and_resumes(self):
        mnt = os.path.join(self.tmp, "small")
        os.mkdir(mnt)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", mnt],
                           capture_output=True)
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs here: %s" % r.stderr.decode().strip())
        self.addCleanup(subprocess.run, ["umount", "-l", mnt])
        self.data = os.path.join(mnt, "data")
        s = self.server()
        c = connect_raw(s.port)
        self.addCleanup(c.close)
        self.assertEqual(c.create("/before", b"x").err, OK)
        # A second session for reads while writes wait: a new session needs a
        # createSession txn, which waits for the disk like every write (as in
        # ZooKeeper), and c's own reads queue behind its held write (FIFO).
        r2 = connect_raw(s.port)
        self.addCleanup(r2.close)
        # Leave the log little room: after its first 64 MiB chunk it must
        # preallocate again, and that fails.
        filler = os.path.join(mnt, "filler")
        subprocess.run(["fallocate", "-l", "30m", filler], check=True)
        big = b"z" * 1000000
        held_xid = None
        for i in range(90):
            xid = c.send_request(1, c.create_body("/big%d" % i, big))
            try:
                rep = c.read_one(timeout_s=3.0)
            except (TimeoutError, OSError, ConnectionClosed):
                held_xid = xid
                break
            self.assertEqual(rep.err, OK)
        self.assertIsNotNone(held_xid, "the disk never filled up")
        # Reads go on while the write waits; mntr says why.
        self.assertEqual(r2.get_data("/before").value[0], b"x")
        mntr = four_letter(s.port, "mntr").decode()
        self.assertRegex(mntr, r"zk_larch_log_error\t-28")
        os.unlink(filler)
        rep = c.read_one(timeout_s=10.0)
        self.assertEqual((rep.xid, rep.err), (held_xid, OK), "held write did not resume")
        self.assertEqual(c.create("/after", b"y").err, OK)
        self.assertIn("held requests proceed", s.log_text())

    def test_corruption_in_the_middle_of_the_log_refuses_start(self):
        s = self.server()
        c = connect_raw(s.port)
        for i in range(200):
            self.assertEqual(c.create("/n%d" % i, b"v" * 50).err, OK)
        c.close()
        s.kill(signal.SIGTERM)
        logdir = os.path.join(self.data, "larch")
        logs = sorted(f for f in os.listdir(logdir) if f.startswith("log."))
        self.assertTrue(logs)
        path = os.path.join(logdir, logs[-1])
        with open(path, "r+b") as f:
            f.seek(400)   # inside an early record: valid records follow it
            b = f.read(1)
            f.seek(400)
            f.write(bytes([b[0] ^ 0xFF]))
        before = sorted(os.listdir(logdir))
        argv = [larchd_path(), "--port", str(free_port()), "--data-dir", self.data]
        p = subprocess.run(argv, capture_output=True, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"refusing to start", p.stderr)
        self.assertEqual(sorted(os.listdir(logdir)), before, "files were deleted")


if __name__ == "__main__":
    unittest.main()
