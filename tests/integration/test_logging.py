"""larchd's log and its service integration, against real larchd processes:
timestamped, levelled lines (base/base.h documents the format),
--log-level, --log-file with SIGHUP reopening a renamed file, sd_notify's
READY=1 / STOPPING=1 over NOTIFY_SOCKET, and packaging/zoo.cfg serving as
shipped. Each test runs its own larchd in a temp dir and stops it by PID;
every wait is bounded.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import unittest

import harness
from harness import HOST, REPO_ROOT, free_port, four_letter, larchd_path, sut_kind, wait_until

# 2026-11-26T13:40:01.123+00:00 [INFO ] larchd: ...
LINE_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d "
                     r"\[(ERROR|WARN |INFO |DEBUG)\] (.*)$")
WAIT_S = 10.0
STOP_TIMEOUT_S = 10.0
# a connection that sends nothing is closed after this (a DEBUG line)
SESSIONLESS_MS = 300


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def parse_lines(text):
    """[(level, message)] for every line; AssertionError naming the first
    line not in the documented format (a sanitizer report would be one)."""
    out = []
    for line in text.splitlines():
        m = LINE_RE.match(line)
        if not m:
            raise AssertionError("not a log line: %r\n--- log:\n%s" % (line, text[-3000:]))
        out.append((m.group(1).strip(), m.group(2)))
    return out


class Larchd:
    """One larchd in its own temp dir. log_file: pass --log-file <tmp>/larchd.log.
    stderr goes to <tmp>/stderr.txt. Registered with the harness, so the
    runner's signal handler stops it too."""

    def __init__(self, args=(), cfg_lines=(), env=None, log_file=False, config=None):
        self.tmpdir = tempfile.mkdtemp(prefix="larch-it-log-")
        self.port = free_port()
        self.stderr_path = os.path.join(self.tmpdir, "stderr.txt")
        self.log_path = os.path.join(self.tmpdir, "larchd.log") if log_file else None
        self.args = list(args)
        self.cfg_lines = list(cfg_lines)
        self.env = dict(env or {})
        self.config = config
        self.proc = None

    def start(self, wait=True):
        data_dir = os.path.join(self.tmpdir, "data")
        os.mkdir(data_dir)
        argv = [larchd_path(), "--port", str(self.port), "--bind", HOST, "--data-dir", data_dir]
        if self.config is None:
            cfg = os.path.join(self.tmpdir, "zoo.cfg")
            with open(cfg, "w") as f:
                f.write("nio.sessionlessCnxnTimeout=%d\n" % SESSIONLESS_MS)
                for line in self.cfg_lines:
                    f.write(line + "\n")
            argv += ["--config", cfg, "--4lw", "ruok,srvr"]
        else:
            argv += ["--config", self.config]
        if self.log_path:
            argv += ["--log-file", self.log_path]
        argv += self.args
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        env.update(self.env)
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                         stdin=subprocess.DEVNULL, cwd=self.tmpdir, env=env)
        harness._LIVE_SERVERS.add(self)
        if wait:
            wait_until(lambda: self.proc.poll() is not None or self.answers(), WAIT_S)
            if not self.answers():
                raise AssertionError("larchd did not serve (exit %s):\n%s" % (
                    self.proc.poll(), self.text()[-3000:]))
        return self

    def answers(self):
        try:
            return four_letter(self.port, "ruok", timeout_s=1.0) == b"imok"
        except OSError:
            return False

    def stop(self):
        """SIGTERM, then SIGKILL after a bound; returns the exit status."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_S)
        return self.proc.returncode if self.proc is not None else None

    def cleanup(self):
        self.stop()
        harness._LIVE_SERVERS.discard(self)
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def stderr(self):
        return read_text(self.stderr_path)

    def log(self):
        return read_text(self.log_path)

    def text(self):
        return self.stderr() + (("\n--- log file:\n" + self.log()) if self.log_path else "")


def sessionless_close(port):
    """Opens a connection that never sends ConnectRequest and waits (bounded)
    until larchd closes it; True if it did."""
    with socket.create_connection((HOST, port), timeout=WAIT_S) as s:
        try:
            return s.recv(1) == b""
        except (socket.timeout, ConnectionResetError):
            return False


class LarchdTestCase(unittest.TestCase):

    def larchd(self, start=True, **kw):
        d = Larchd(**kw)
        self.addCleanup(d.cleanup)
        return d.start() if start else d

    def stop_ok(self, d):
        self.assertEqual(d.stop(), 0, d.text()[-3000:])


@unittest.skipUnless(sut_kind() == "larch", "larchd's own log")
class LogTest(LarchdTestCase):

    def test_lines_carry_time_and_level(self):
        # an unknown key: a config warning, held until the log file is open
        d = self.larchd(log_file=True, cfg_lines=["no.such.key=1"])
        self.assertTrue(sessionless_close(d.port))
        self.stop_ok(d)
        lines = parse_lines(d.log())
        self.assertIn(("WARN", "larchd: warning: %s:2: unknown key 'no.such.key' ignored"
                       % os.path.join(d.tmpdir, "zoo.cfg")), lines)
        serving = [m for lvl, m in lines
                   if lvl == "INFO" and m.startswith("larchd: serving on %s:%d " % (HOST, d.port))]
        self.assertEqual(len(serving), 1, lines)
        self.assertIn(("INFO", "larchd: SIGTERM, shutting down"), lines)
        # the sessionless close is a DEBUG line: not at the default level
        self.assertFalse([m for _, m in lines if "no session after" in m], lines)
        # everything went to the file, nothing to the stderr larchd started with
        self.assertEqual(d.stderr(), "")
        mask = os.umask(0)
        os.umask(mask)
        self.assertEqual(os.stat(d.log_path).st_mode & 0o777, 0o640 & ~mask)

    def test_level_debug_shows_debug_lines(self):
        d = self.larchd(log_file=True, args=["--log-level", "debug"])
        self.assertTrue(sessionless_close(d.port))
        # written before the close the client just saw
        lines = parse_lines(d.log())
        debug = [m for lvl, m in lines if lvl == "DEBUG" and "no session after" in m]
        self.assertEqual(len(debug), 1, lines)
        self.assertRegex(debug[0], r"^larchd: closing 127\.0\.0\.1:\d+: no session after \d+ ms$")
        self.stop_ok(d)

    def test_level_error_has_no_info_lines(self):
        # zoo.cfg's key says error; the same warning, debug and info events
        # as above must leave no line at all
        d = self.larchd(log_file=True, cfg_lines=["larch.logLevel=error", "no.such.key=1"])
        self.assertTrue(sessionless_close(d.port))
        self.stop_ok(d)
        lines = parse_lines(d.log())
        self.assertEqual([l for l in lines if l[0] != "ERROR"], [])
        self.assertEqual(d.stderr(), "")

    def test_errors_print_at_level_error(self):
        p = subprocess.run([larchd_path(), "--log-level", "error", "--port", "0"],
                           capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 2, err)
        lines = parse_lines(err)
        self.assertIn(("ERROR", "larchd: error: larchd: --port: '0' is not a port number "
                                "(1-65535)"), lines)

    def test_unopenable_log_file_is_an_error(self):
        d = self.larchd(start=False, args=["--log-level", "error"])
        missing = os.path.join(d.tmpdir, "no-such-dir", "larchd.log")
        d.args += ["--log-file", missing]
        d.start(wait=False)
        try:
            rc = d.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.fail("larchd kept running with an unopenable log file")
        self.assertEqual(rc, 1, d.stderr())
        lines = parse_lines(d.stderr())
        self.assertEqual(lines, [("ERROR", "larchd: cannot open log file %s: No such file or "
                                           "directory" % missing)])
        self.assertFalse(os.path.exists(missing))

    def test_sighup_reopens_a_renamed_log(self):
        d = self.larchd(log_file=True)
        rotated = d.log_path + ".1"
        os.rename(d.log_path, rotated)
        d.proc.send_signal(signal.SIGHUP)
        reopened = wait_until(lambda: "log reopened" in d.log(), WAIT_S)
        self.assertTrue(reopened, d.text()[-3000:])
        self.assertTrue(d.answers(), "not serving after SIGHUP")
        self.stop_ok(d)
        old, new = parse_lines(read_text(rotated)), parse_lines(d.log())
        self.assertTrue([m for _, m in old if m.startswith("larchd: serving on")], old)
        self.assertFalse([m for _, m in old if "log reopened" in m or "shutting down" in m], old)
        self.assertEqual(new, [("INFO", "larchd: SIGHUP: log reopened: %s" % d.log_path),
                               ("INFO", "larchd: SIGTERM, shutting down")])
        self.assertEqual(d.stderr(), "")

    def test_sighup_without_log_file_is_ignored(self):
        d = self.larchd()
        d.proc.send_signal(signal.SIGHUP)
        logged = wait_until(lambda: "SIGHUP ignored" in d.stderr(), WAIT_S)
        self.assertTrue(logged, d.stderr()[-3000:])
        self.assertTrue(d.answers(), "not serving after SIGHUP")
        self.stop_ok(d)
        lines = parse_lines(d.stderr())
        self.assertIn(("INFO", "larchd: SIGHUP ignored: no log file to reopen (--log-file)"),
                      lines)


@unittest.skipUnless(sut_kind() == "larch", "larchd's own service integration")
class NotifyTest(LarchdTestCase):
    """A fake service manager: a datagram socket that NOTIFY_SOCKET names."""

    def manager(self, address):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(s.close)
        s.bind(address)
        s.settimeout(WAIT_S)
        return s

    def receive(self, sock, d):
        try:
            return sock.recv(4096).decode().split("\n")
        except socket.timeout:
            self.fail("no notification within %.0f s:\n%s" % (WAIT_S, d.text()[-3000:]))

    def test_ready_once_serving_then_stopping(self):
        d = self.larchd(start=False)
        path = os.path.join(d.tmpdir, "notify")
        sock = self.manager(path)
        d.env["NOTIFY_SOCKET"] = path
        d.start(wait=False)
        first = self.receive(sock, d)
        self.assertIn("READY=1", first)
        self.assertIn("STATUS=serving on %s:%d" % (HOST, d.port), first)
        # READY=1 means serving: no retry needed
        self.assertEqual(four_letter(d.port, "ruok", timeout_s=WAIT_S), b"imok")
        d.proc.send_signal(signal.SIGTERM)
        second = self.receive(sock, d)
        self.assertIn("STOPPING=1", second)
        self.stop_ok(d)
        self.assertNotIn("cannot notify", d.stderr())

    def test_abstract_namespace_socket(self):
        d = self.larchd(start=False)
        name = "larch-it-notify-%d-%d" % (os.getpid(), d.port)
        sock = self.manager("\0" + name)
        d.env["NOTIFY_SOCKET"] = "@" + name
        d.start(wait=False)
        self.assertIn("READY=1", self.receive(sock, d))
        self.stop_ok(d)
        self.assertIn("STOPPING=1", self.receive(sock, d))

    def test_no_listener_is_a_warning(self):
        d = self.larchd(start=False)
        nobody = os.path.join(d.tmpdir, "nobody")
        d.env["NOTIFY_SOCKET"] = nobody
        d.start()
        logged = wait_until(lambda: "cannot notify" in d.stderr(), WAIT_S)
        self.assertTrue(logged, d.stderr()[-3000:])
        self.stop_ok(d)
        lines = parse_lines(d.stderr())
        self.assertIn(("WARN", "larchd: cannot notify the service manager at NOTIFY_SOCKET=%s: "
                               "No such file or directory" % nobody), lines)


@unittest.skipUnless(sut_kind() == "larch", "larchd's own sample configuration")
class PackagedConfigTest(LarchdTestCase):

    def test_sample_zoo_cfg_serves_without_warnings(self):
        # the port, address and data dir are the test's; the rest is the sample's
        d = self.larchd(config=str(REPO_ROOT / "packaging" / "zoo.cfg"))
        self.assertIn(b"Mode: standalone", four_letter(d.port, "srvr", timeout_s=WAIT_S))
        self.assertIn(b"zk_version", four_letter(d.port, "mntr", timeout_s=WAIT_S))
        self.stop_ok(d)
        lines = parse_lines(d.stderr())
        self.assertEqual([l for l in lines if l[0] != "INFO"], [])


if __name__ == "__main__":
    unittest.main()
