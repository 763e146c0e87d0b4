"""The UDP read path from a DPDK port (larchd --dpdk, dpdk/dpdk.h).

larchd runs its poll-mode lcore on net_af_packet (and, where the kernel
allows, net_af_xdp: DpdkAfXdpReadTest) over one end of a veth pair; the other end sits in a network namespace of this test's own, with
an address from 198.18.0.0/15. From inside the namespace, UDP.md's client
(test_udp.py) and larch-cli -udp (liblarch's UDP transport) read what
kazoo wrote over TCP on loopback, the test pings the server and sends
garbage; then a fifth of the packets each way are lost and the reads of
both still complete. The loss is nftables' (numgen random, in the
namespace): this kernel has no netem. The namespace, the veth and the
server are removed by the test, whatever happens.

MemifPairTest puts larchd --dpdk and larch-bench --dpdk on the two ends of
one net_memif, as an application co-located with the server would read:
a reads-only run and a 90 % mix (its writes over TCP), every read answered,
and an open-loop run. larchd stops before the bench lets go of its end
(see bench_then_stop_server). Then a client that connects and leaves,
over and over, with frames in flight (memif_flap): larchd's core must
outlive each departure.
"""

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from harness import (Server, four_letter, kazoo_client, larchd_path, stop_kazoo, sut_kind,
                     unique_path, wait_until)
from test_cli import cli_path
from test_udp import mntr

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER_IP = "198.18.0.1"
CLIENT_IP = "198.18.0.2"
UDP_PORT = 2182
BENCH_WAIT_S = 120  # one larch-bench run here, or its exit after larchd stopped


def run(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=check)


def can_make_namespaces():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        return False
    r = run("ip", "netns", "list", check=False)
    return r.returncode == 0


def start_dpdk_server(test, eal, refused_by_kernel=()):
    """larchd serving --udp's address from a DPDK port (EAL's arguments),
    stopped at the test's cleanup; the test is skipped when this larchd has
    no DPDK, or when its start-up error is one of refused_by_kernel."""
    srv = Server(cfg_lines=["larch.udp=%s:%d" % (SERVER_IP, UDP_PORT), "larch.dpdk=" + eal])
    try:
        srv.start()
    except Exception:
        text = open(srv.stderr_path).read() if srv.stderr_path else ""
        if "built without DPDK" in text:
            test.skipTest("this larchd was built without DPDK")
        if any(m in text for m in refused_by_kernel):
            test.skipTest("the kernel refused the port: " + text.strip().splitlines()[-1])
        raise
    test.addCleanup(srv.stop)
    return srv


# Runs inside the namespace: test_udp's client, one job, a JSON line out.
CLIENT = textwrap.dedent("""
    import json, os, socket, struct, sys
    sys.path.insert(0, %(here)r)
    from test_udp import UdpClient, jute_path_watch, get_data_record, OP_GETDATA
    job = json.loads(sys.argv[1])
    c = UdpClient(%(port)d)
    c.addr = (%(ip)r, %(port)d)
    out = []
    if job["kind"] == "get":
        for path in job["paths"]:
            rep = c.ask(OP_GETDATA, jute_path_watch(path), tries=job.get("tries", 15),
                        wait_s=job.get("wait_s", 0.2))
            out.append(None if rep is None else
                       [rep["status"], rep["err"], get_data_record(rep["record"])[0].hex()
                        if rep["status"] == 0 and rep["err"] == 0 else None])
    elif job["kind"] == "junk":
        import random
        rng = random.Random(job["seed"])
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i in range(job["n"]):
            s.sendto(rng.randbytes(rng.randrange(0, 300)), (%(ip)r, %(port)d))
    elif job["kind"] == "ping":
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        s.settimeout(0.5)
        def csum(b):
            if len(b) %% 2: b += b"\\0"
            t = sum(struct.unpack("!%%dH" %% (len(b) // 2), b))
            while t >> 16: t = (t & 0xffff) + (t >> 16)
            return ~t & 0xffff
        got = 0
        for seq in range(job["n"]):
            body = b"larch-ping-%%d" %% seq
            h = struct.pack("!BBHHH", 8, 0, 0, 4242, seq)
            h = struct.pack("!BBHHH", 8, 0, csum(h + body), 4242, seq)
            s.sendto(h + body, (%(ip)r, 0))
            try:
                while True:
                    r = s.recv(2000)
                    icmp = r[(r[0] & 15) * 4:]
                    if icmp[0] == 0 and struct.unpack("!H", icmp[6:8])[0] == seq:
                        got += icmp[8:] == body
                        break
            except socket.timeout:
                pass
        out.append(got)
    print(json.dumps(out))
""") % {"here": HERE, "ip": SERVER_IP, "port": UDP_PORT}


@unittest.skipUnless(sut_kind() == "larch", "the DPDK path is larchd's")
@unittest.skipUnless(can_make_namespaces(), "needs root, ip and nft (network namespaces)")
class DpdkReadTest(unittest.TestCase):
    VDEV = "net_af_packet0,iface=%s"  # % the host end of the veth
    REFUSED_BY_KERNEL = ()            # start-up errors that mean "not on this kernel"

    def setUp(self):
        tag = "%d" % (os.getpid() % 100000)
        self.eal_dir = "/var/run/dpdk/larch" + tag  # EAL's runtime files (--file-prefix)
        self.ns = "larch-dpdk-" + tag
        self.host_if, self.ns_if = "ldh" + tag, "ldn" + tag
        self.addCleanup(self._remove_net)
        run("ip", "netns", "add", self.ns)
        run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        run("ip", "link", "set", self.ns_if, "netns", self.ns)
        run("ip", "link", "set", self.host_if, "up")
        # the namespace's veth offloads UDP checksums and sends them unfilled:
        # the frame handler does not check a request's (dpdk/frame.c)
        self._ns("ip", "addr", "add", CLIENT_IP + "/24", "dev", self.ns_if)
        self._ns("ip", "link", "set", self.ns_if, "up")
        eal = ("-l 0-1 --no-huge --no-pci -m 256 --file-prefix larch%s --vdev %s"
               % (tag, self.VDEV % self.host_if))
        self.srv = start_dpdk_server(self, eal, self.REFUSED_BY_KERNEL)

    def _ns(self, *argv, check=True):
        return run("ip", "netns", "exec", self.ns, *argv, check=check)

    def _remove_net(self):
        run("ip", "link", "del", self.host_if, check=False)  # its peer goes with it
        run("ip", "netns", "del", self.ns, check=False)
        shutil.rmtree(self.eal_dir, ignore_errors=True)  # the server stopped first

    def cli(self, *argv):
        """larch-cli -udp inside the namespace: (exit status, stdout, stderr)."""
        if not os.access(cli_path(), os.X_OK):
            self.skipTest("no larch-cli at %s" % cli_path())
        r = self._ns(cli_path(), "-udp", "%s:%d" % (SERVER_IP, UDP_PORT), *argv, check=False)
        return r.returncode, r.stdout, r.stderr

    def client(self, job):
        import json
        r = self._ns(sys.executable, "-c", CLIENT, json.dumps(job))
        return json.loads(r.stdout.strip().splitlines()[-1])

    def test_reads_from_a_namespace_through_the_poll_mode_port(self):
        zk = kazoo_client(self.srv.port)
        self.addCleanup(stop_kazoo, zk)
        base = unique_path("dpdk")
        values = {}
        for i in range(5):
            values[base + "/k%d" % i] = ("value %d over TCP" % i).encode()
        zk.create(base, b"")
        for p, v in values.items():
            zk.create(p, v)
        got = self.client({"kind": "get", "paths": list(values)})
        self.assertEqual([g[:2] if g else None for g in got], [[0, 0]] * 5)
        self.assertEqual([bytes.fromhex(g[2]) for g in got], list(values.values()))
        # larch-cli over liblarch's UDP transport, as a co-located reader would
        for p, v in values.items():
            self.assertEqual(self.cli("get", p), (0, v.decode() + "\n", ""))
        self.assertEqual(self.cli("ls", base), (0, "[k0, k1, k2, k3, k4]\n", ""))
        # one Ethernet frame is the limit on this path: a bigger value is an error
        zk.set(base + "/k0", b"x" * 2000)
        rc, out, err = self.cli("get", base + "/k0")
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("does not fit a UDP datagram", err)
        self.assertEqual(self.client({"kind": "ping", "n": 3}), [3])
        m = mntr(self.srv.port)
        self.assertGreaterEqual(int(m["zk_larch_dpdk_arp_replies"]), 1)
        self.assertGreaterEqual(int(m["zk_larch_dpdk_icmp_replies"]), 3)
        self.assertGreaterEqual(int(m["zk_larch_dpdk_udp_replies"]), 5)
        self.assertEqual(int(m["zk_larch_dpdk_core0_udp_replies"]),
                         int(m["zk_larch_dpdk_udp_replies"]))
        self.assertGreater(int(m["zk_larch_dpdk_core0_busy_ns"]), 0)  # time in bursts
        srvr = four_letter(self.srv.port, "srvr").decode()
        self.assertRegex(srvr, r"\nUDP reads \(DPDK\): %s:%d received=\d+ served=([1-9]\d+) "
                         r"refused=[1-9]\d* dropped=0\n" % (SERVER_IP, UDP_PORT))

    def test_the_poll_core_counts_the_time_taken_from_it(self):
        """A poll-mode core that is stopped (SIGSTOP, as a hypervisor or
        another thread on its CPU would take it) counts the time it lost in
        mntr: at least one stall, at least as long as it was stopped, no
        longer than the time that went by. Frames sent while it is stopped
        wait for it, and the burst that finds them does not count the wait
        as work."""
        def counters():
            m = mntr(self.srv.port)
            return (int(m.get("zk_larch_dpdk_core0_stalls", -1)),
                    int(m.get("zk_larch_dpdk_core0_stalled_ns", -1)),
                    int(m.get("zk_larch_dpdk_frames", -1)))
        self.assertTrue(wait_until(lambda: counters()[0] >= 0, 30))  # the port is up
        count0, ns0, frames0 = counters()
        stop_s = 0.5
        t0 = time.monotonic()
        os.kill(self.srv.proc.pid, signal.SIGSTOP)
        try:
            self.client({"kind": "junk", "seed": 3, "n": 20})  # frames that wait
            time.sleep(max(0.0, stop_s - (time.monotonic() - t0)))
        finally:
            os.kill(self.srv.proc.pid, signal.SIGCONT)
        # the core says so as soon as it runs again, before anything else
        self.assertTrue(wait_until(lambda: counters()[1] - ns0 >= stop_s * 1e9, 10), counters())
        count1, ns1, frames1 = counters()
        self.assertGreater(frames1, frames0)  # the frames came while it was stopped
        self.assertGreaterEqual(count1 - count0, 1)
        self.assertLessEqual(ns1 - ns0, (time.monotonic() - t0) * 1e9)

    def test_reads_complete_under_loss_and_garbage_is_counted(self):
        zk = kazoo_client(self.srv.port)
        self.addCleanup(stop_kazoo, zk)
        path = unique_path("dpdk-loss")
        zk.create(path, b"still here")
        # a fifth of the requests and a fifth of the replies lost in the namespace
        rules = ("table inet larchloss {\n"
                 " chain out { type filter hook output priority 0; udp dport %d numgen random mod 5 == 0 counter drop; }\n"
                 " chain in { type filter hook input priority 0; udp sport %d numgen random mod 5 == 0 counter drop; }\n"
                 "}\n" % (UDP_PORT, UDP_PORT))
        subprocess.run(["ip", "netns", "exec", self.ns, "nft", "-f", "-"], input=rules, text=True,
                       check=True, timeout=30)
        got = self.client({"kind": "get", "paths": [path] * 20, "tries": 25, "wait_s": 0.2})
        self.assertEqual([bytes.fromhex(g[2]) for g in got], [b"still here"] * 20)
        for _ in range(10):  # liblarch re-sends what was lost
            self.assertEqual(self.cli("get", path), (0, "still here\n", ""))
        lost = self._ns("nft", "list", "table", "inet", "larchloss").stdout
        self.assertRegex(lost, r"counter packets [1-9]")  # the loss was real
        self._ns("nft", "delete", "table", "inet", "larchloss")
        before = mntr(self.srv.port)
        self.client({"kind": "junk", "seed": 7, "n": 500})
        got = self.client({"kind": "get", "paths": [path]})
        self.assertEqual(bytes.fromhex(got[0][2]), b"still here")
        after = mntr(self.srv.port)
        dropped = sum(int(after[k]) - int(before.get(k, "0")) for k in after
                      if k.startswith("zk_larch_dpdk_dropped_"))
        answered = sum(int(after[k]) - int(before.get(k, "0")) for k in after
                       if k.startswith("zk_larch_dpdk_replies_") and not k.endswith("_ok"))
        self.assertGreaterEqual(dropped + answered, 400)  # a few may be lost on the veth


class DpdkAfXdpReadTest(DpdkReadTest):
    """The same through net_af_xdp (an AF_XDP socket on the veth), where
    the kernel allows it."""
    VDEV = "net_af_xdp0,iface=%s"
    # what larchd says when the AF_XDP port cannot be had (no XDP, no
    # AF_XDP sockets in this kernel): the vdev does not probe or start
    REFUSED_BY_KERNEL = ("--dpdk: EAL did not start", "--dpdk: no port", "DPDK port 0: ")


def flap_path():
    return os.path.join(os.path.dirname(os.path.dirname(larchd_path())), "tests", "integration",
                        "memif_flap")


def bench_path():
    return os.path.join(os.path.dirname(os.path.dirname(larchd_path())), "bench", "larch-bench")


@unittest.skipUnless(sut_kind() == "larch", "the DPDK path is larchd's")
@unittest.skipUnless(os.geteuid() == 0, "needs root (DPDK's runtime files)")
class MemifPairTest(unittest.TestCase):
    """larchd --dpdk and larch-bench --dpdk on the two ends of one memif:
    the co-located case, shared memory between two poll-mode ports."""

    def setUp(self):
        tag = "%d" % (os.getpid() % 100000)
        self.dir = tempfile.mkdtemp(prefix="larch-memif-")
        self.eal_dirs = ["/var/run/dpdk/lms" + tag, "/var/run/dpdk/lmc" + tag]
        self.addCleanup(self._remove)
        sock = os.path.join(self.dir, "memif.sock")
        self.bench_eal = ("-l 0 --no-huge --no-pci -m 256 --file-prefix lmc%s "
                          "--vdev net_memif0,role=client,socket=%s" % (tag, sock))
        self.srv = start_dpdk_server(
            self, "-l 0-1 --no-huge --no-pci -m 256 --file-prefix lms%s "
            "--vdev net_memif0,role=server,socket=%s" % (tag, sock))

    def _remove(self):
        for d in self.eal_dirs:  # the processes stopped first
            shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def bench_then_stop_server(self, extra, runs, udp_port=UDP_PORT):
        """larch-bench --dpdk with extra and --dpdk-hold. Once its `runs` JSON
        lines are out, mntr is read and larchd stops: its core stops polling
        before its port closes, so DPDK 22.11's memif, which unmaps a
        departing peer's memory under a polling core without waiting for
        it, never runs under one. The bench then sees the link go down and
        exits. Returns (the runs, mntr, the bench's exit status, its stderr)."""
        if not os.access(bench_path(), os.X_OK):
            self.skipTest("no larch-bench beside %s" % larchd_path())
        p = subprocess.Popen([bench_path(), "--server", "127.0.0.1:%d" % self.srv.port,
                              "--udp", "%s:%d" % (SERVER_IP, udp_port), "--dpdk-src", CLIENT_IP,
                              "--dpdk", self.bench_eal, "--keys", "50", "--sessions", "2",
                              "--warmup", "0.2", "--duration", "0.5", "--dpdk-hold", "--json"]
                             + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(stop_bench, p)
        got = []
        deadline = time.monotonic() + BENCH_WAIT_S
        while len(got) < runs and time.monotonic() < deadline:
            ready, _, _ = select.select([p.stdout], [], [], deadline - time.monotonic())
            line = p.stdout.readline() if ready else ""
            if not line:
                break
            if line.startswith("{"):
                got.append(json.loads(line))
        if len(got) < runs:
            stderr = p.stderr.read() if p.poll() is not None else "(still running)"
            if "this build has no DPDK" in stderr:
                self.skipTest("this larch-bench was built without DPDK")
            self.fail("larch-bench wrote %d of %d runs: %s" % (len(got), runs, stderr))
        m = mntr(self.srv.port)
        self.srv.stop()
        rc = p.wait(timeout=BENCH_WAIT_S)
        return got, m, rc, p.stderr.read()

    def test_bench_reads_and_mixes_over_memif(self):
        runs, m, rc, err = self.bench_then_stop_server(
            ["--read-ratio", "100,90", "--outstanding", "4"], 2)
        self.assertEqual(rc, 0, err)
        self.assertEqual([x["read_ratio"] for x in runs], [100, 90])
        for x in runs:
            self.assertEqual(x["errors_total"], 0, x)
            self.assertGreater(x["reads"], 100)
        self.assertGreater(runs[1]["writes"], 0)  # over TCP, beside the memif reads
        self.assertGreaterEqual(int(m["zk_larch_dpdk_udp_replies"]),
                                runs[0]["reads"] + runs[1]["reads"])
        self.assertGreaterEqual(int(m["zk_larch_dpdk_arp_replies"]), 1)  # the bench asked

    def test_bench_open_loop_over_memif(self):
        """A schedule of sends, latency from each intended send time."""
        runs, m, rc, err = self.bench_then_stop_server(
            ["--read-ratio", "100", "--outstanding", "8", "--rate", "20000"], 1)
        self.assertEqual(rc, 0, err)
        self.assertEqual((runs[0]["mode"], runs[0]["errors_total"]), ("open", 0), runs[0])
        self.assertGreater(runs[0]["reads"], 0)
        self.assertGreaterEqual(int(m["zk_larch_dpdk_udp_replies"]), runs[0]["reads"])

    def test_bench_counts_unanswered_reads_as_lost(self):
        """Reads to a port larchd does not serve are dropped there; the
        bench counts each as lost once unanswered for its resend time (200
        ms), and sends a fresh read from the slot."""
        runs, m, rc, err = self.bench_then_stop_server(
            ["--read-ratio", "100", "--outstanding", "2", "--warmup", "0.3",
             "--duration", "1"], 1, udp_port=UDP_PORT + 1)
        x = runs[0]
        self.assertEqual(x["reads"], 0, x)
        # 4 slots, each lost about every 0.2 s and sent again: at least once
        # each in the measured second, however the poll thread is scheduled
        self.assertGreaterEqual(x["errors"].get("CONNECTIONLOSS", 0), 4, x)
        self.assertEqual(x["errors_total"], x["errors"]["CONNECTIONLOSS"], x)
        dropped = int(m["zk_larch_dpdk_dropped_port"])
        self.assertGreaterEqual(dropped, 4 * 3, m)  # first sends and re-sends
        self.assertEqual(int(m["zk_larch_dpdk_udp_replies"]), 0)

    def test_clients_that_come_and_go(self):
        """DPDK's memif unmaps a departing client's memory on its interrupt
        thread while larchd's core may be inside a burst on it; larchd's
        munmap waits for the core's pass to end (dpdk/port.c). Without
        that, the first few departures with frames in flight crashed it."""
        if not os.access(flap_path(), os.X_OK):
            self.skipTest("no memif_flap beside %s" % larchd_path())
        cycles = 150
        r = subprocess.run([flap_path(), str(cycles), SERVER_IP, self.bench_eal],
                           capture_output=True, text=True, timeout=BENCH_WAIT_S)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("cycles=%d " % cycles, r.stdout)
        answers = int(r.stdout.split("answers=")[1].split()[0])
        self.assertIsNone(self.srv.proc.poll(), "larchd exited")
        self.assertEqual(four_letter(self.srv.port, "ruok"), b"imok")
        self.assertGreaterEqual(int(mntr(self.srv.port)["zk_larch_dpdk_arp_replies"]), answers)


def stop_bench(p):
    if p.poll() is None:
        p.kill()
        p.wait(timeout=10)
    for f in (p.stdout, p.stderr):
        if f is not None and not f.closed:
            f.close()

if __name__ == "__main__":
    unittest.main()
