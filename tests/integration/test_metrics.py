"""/metrics: ZooKeeper's PrometheusMetricsProvider as larchd serves it,
read with curl, parsed as Prometheus's text format, and checked for the
metric names a ZooKeeper dashboard queries."""

import os
import re
import subprocess
import unittest

from harness import (ServerTestCase, free_port, larch_ensemble_size, larchd_path, sut_kind,
                     unique_path)

PROMETHEUS = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"

# What ZooKeeper's Grafana dashboards and alerts query (ZooKeeper's names:
# the gauges ZooKeeperServer registers, its fsynctime and snapshottime
# summaries), and the process collector's metrics.
DASHBOARD = [
    "znode_count", "watch_count", "ephemerals_count", "num_alive_connections",
    "outstanding_requests", "approximate_data_size", "avg_latency", "min_latency",
    "max_latency", "packets_received", "packets_sent", "open_file_descriptor_count",
    "max_file_descriptor_count", "global_sessions", "uptime", "fsynctime", "snapshottime",
    "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
    "process_start_time_seconds",
]
# a member of an ensemble adds these (the leader also learners, synced_followers)
ENSEMBLE = ["quorum_size"]

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def curl(url, *extra):
    """(status, headers text, body) of one request with curl."""
    p = subprocess.run(["curl", "-s", "-S", "-i", "--max-time", "10"] + list(extra) + [url],
                       capture_output=True, timeout=20)
    if p.returncode != 0:
        raise AssertionError("curl %s: %s" % (url, p.stderr.decode()))
    head, _, body = p.stdout.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, head.decode(), body.decode()


def parse(text):
    """{family: type} and {sample name with labels: value} of an exposition,
    failing on anything Prometheus would not take."""
    types, samples, helped = {}, {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            if name in types:
                raise AssertionError("family %s declared twice" % name)
            if name not in helped:
                raise AssertionError("family %s has no HELP line" % name)
            types[name] = kind
            continue
        m = SAMPLE.match(line)
        if not m:
            raise AssertionError("not a sample line: %r" % line)
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        family = re.sub(r"_(bucket|count|sum)$", "", name)
        if name not in types and family not in types:
            raise AssertionError("sample %s before its TYPE line" % name)
        samples[name + labels] = value
    return types, samples


@unittest.skipUnless(sut_kind() == "larch", "the provider needs a jar Debian does not ship")
class MetricsTest(ServerTestCase, unittest.TestCase):

    server_options = {"cfg_lines": [
        "metricsProvider.className=" + PROMETHEUS, "metricsProvider.httpHost=127.0.0.1",
        "metricsProvider.httpPort=0"]}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # port 0: the one it took is in its log (a member each, in an ensemble)
        cls.url = None
        with open(cls.server.stderr_path) as f:
            m = re.search(r"/metrics on (127\.0\.0\.1:\d+)", f.read())
        if m:
            cls.url = "http://%s/metrics" % m.group(1)

    def scrape(self):
        self.assertIsNotNone(self.url, "larchd did not say where /metrics is")
        status, head, body = curl(self.url)
        self.assertEqual(status, 200)
        self.assertIn("Content-Type: text/plain; version=0.0.4", head)
        return parse(body)

    def test_dashboard_names_are_served(self):
        types, samples = self.scrape()
        want = DASHBOARD + (ENSEMBLE if larch_ensemble_size() else [])
        missing = [n for n in want if n not in types]
        self.assertEqual(missing, [], "names a ZooKeeper dashboard queries")
        self.assertEqual(types["znode_count"], "gauge")
        self.assertEqual(types["fsynctime"], "summary")
        self.assertIn('fsynctime{quantile="0.5",}', samples)
        self.assertEqual(types["larch_fsync_seconds"], "histogram")

    def test_values_follow_the_server(self):
        _, before = self.scrape()
        zk = self.kazoo()
        base = unique_path("metrics")
        zk.create(base)
        for i in range(3):
            zk.create("%s/n%d" % (base, i), b"v")
            zk.get("%s/n%d" % (base, i))
        _, after = self.scrape()
        if not larch_ensemble_size():  # a member's count may trail its leader's for a moment
            self.assertEqual(after["znode_count"], before["znode_count"] + 4)
        self.assertGreater(after["fsynctime_count"], before["fsynctime_count"])
        self.assertGreater(after["larch_fsync_seconds_sum"], 0)
        # the histogram's +Inf bucket is its count; buckets never decrease
        self.assertEqual(after['larch_fsync_seconds_bucket{le="+Inf"}'],
                         after["larch_fsync_seconds_count"])
        buckets = [v for k, v in after.items() if k.startswith("larch_fsync_seconds_bucket")]
        self.assertEqual(buckets, sorted(buckets))
        workers = sum(v for k, v in after.items() if k.startswith("larch_worker_reads{"))
        self.assertEqual(workers, after["larch_reads"])
        self.assertGreater(after["uptime"], 0)

    def test_other_paths_and_methods(self):
        base = self.url.rsplit("/", 1)[0]
        self.assertEqual(curl(base + "/nothing")[0], 404)
        self.assertEqual(curl(self.url, "-X", "POST", "-d", "x")[0], 405)
        self.assertEqual(curl(self.url, "-X", "TRACE")[0], 405)


@unittest.skipUnless(sut_kind() == "larch", "larchd's own configuration errors")
class MetricsConfigTest(unittest.TestCase):

    def run_larchd(self, lines):
        import tempfile
        d = tempfile.mkdtemp(prefix="larch-it-metrics-")
        cfg = os.path.join(d, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("\n".join(["clientPortAddress=127.0.0.1", "clientPort=%d" % free_port()]
                              + lines) + "\n")
        try:
            p = subprocess.run([larchd_path(), "--config", cfg], capture_output=True,
                               timeout=20, cwd=d)
        finally:
            os.unlink(cfg)
            os.rmdir(d)
        return p.returncode, p.stderr.decode(), cfg

    def test_unknown_provider_is_refused_by_line(self):
        rc, err, cfg = self.run_larchd(["metricsProvider.className=com.example.Metrics"])
        self.assertNotEqual(rc, 0)
        self.assertIn("%s:3: metricsProvider.className: 'com.example.Metrics' cannot be "
                      "honoured" % cfg, err)

    def test_taken_port_stops_larchd(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        try:
            port = s.getsockname()[1]
            rc, err, _ = self.run_larchd(["metricsProvider.className=" + PROMETHEUS,
                                          "metricsProvider.httpHost=127.0.0.1",
                                          "metricsProvider.httpPort=%d" % port])
        finally:
            s.close()
        self.assertNotEqual(rc, 0)
        self.assertIn("/metrics (metricsProvider.httpHost/httpPort): 127.0.0.1:%d: Address "
                      "already in use" % port, err)


if __name__ == "__main__":
    unittest.main()
