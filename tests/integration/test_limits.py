"""Limits: jute.maxbuffer on incoming frames and maxClientCnxns per IP."""

import struct
import time
import unittest

from harness import (MAX_BUFFER, OK, ConnectionClosed, RawClient,
                     ServerTestCase, unique_path)

MAX_CNXNS = 5


def try_session(port):
    """Returns a connected RawClient, or None if the server refused/closed it."""
    try:
        c = RawClient(port, timeout_s=5.0)
    except OSError:
        return None
    try:
        s = c.connect()
        if s.timeout_ms > 0:
            return c
    except (ConnectionClosed, OSError):
        pass
    c.close()
    return None


class FrameLimitTest(ServerTestCase, unittest.TestCase):

    def assert_server_healthy(self):
        c = self.raw()
        p = unique_path("healthy")
        self.assertEqual(c.create(p, b"ok").err, OK)
        self.assertEqual(c.get_data(p).value[0], b"ok")

    def test_frame_over_maxbuffer_closes_connection(self):
        for length in (MAX_BUFFER + 1, 2 * 1024 * 1024, 0x7FFFFFFF):
            c = self.raw()
            bystander = self.raw()
            c.sock.sendall(struct.pack(">i", length) + b"\0" * 64)
            self.assertTrue(c.wait_closed(5.0), "frame length %d: connection not closed" % length)
            self.assertEqual(bystander.exists("/").err, OK, "other clients are unaffected")
        self.assert_server_healthy()

    def test_oversized_connect_request_closes_connection(self):
        with RawClient(self.server.port) as c:
            c.sock.sendall(struct.pack(">i", 4 * 1024 * 1024) + b"\0" * 64)
            self.assertTrue(c.wait_closed(5.0))
        self.assert_server_healthy()

    def test_negative_length_closes_connection(self):
        for length in (-1, -0x80000000):
            c = self.raw()
            c.sock.sendall(struct.pack(">i", length))
            self.assertTrue(c.wait_closed(5.0), "length %d" % length)
        self.assert_server_healthy()

    def test_oversized_setdata_payload_closes_connection(self):
        c = self.raw()
        p = unique_path("toobig")
        c.create(p)
        body = struct.pack(">ii", 99, 5)
        body += struct.pack(">i", len(p)) + p.encode()
        data = b"y" * (MAX_BUFFER + 1)
        body += struct.pack(">i", len(data)) + data + struct.pack(">i", -1)
        try:
            c.send_frame(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.assertTrue(c.wait_closed(10.0))
        self.assertEqual(self.raw().get_data(p).value[1].dataLength, 0, "write not applied")
        self.assert_server_healthy()


class ConnectionLimitTest(ServerTestCase, unittest.TestCase):
    server_options = dict(max_client_cnxns=MAX_CNXNS)

    def test_max_client_cnxns_per_ip(self):
        clients = []
        try:
            for i in range(MAX_CNXNS):
                c = try_session(self.server.port)
                self.assertIsNotNone(c, "connection %d of %d refused" % (i + 1, MAX_CNXNS))
                clients.append(c)
            extra = try_session(self.server.port)
            if extra is not None:
                extra.close()
            self.assertIsNone(extra, "connection %d accepted over maxClientCnxns=%d"
                              % (MAX_CNXNS + 1, MAX_CNXNS))
            for c in clients:
                self.assertEqual(c.exists("/").err, OK, "existing connections keep working")
            last = clients.pop()
            last.close_session()
            last.close()
            # the server notices the close asynchronously: bounded retry
            deadline = time.monotonic() + 5.0
            again = None
            while again is None and time.monotonic() < deadline:
                again = try_session(self.server.port)
                if again is None:
                    time.sleep(0.1)
            self.assertIsNotNone(again, "a slot frees up when a connection closes")
            clients.append(again)
        finally:
            for c in clients:
                c.close()


if __name__ == "__main__":
    unittest.main()
