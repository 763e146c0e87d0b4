"""A fault-injecting TCP proxy for tests: 127.0.0.1:<port> -> 127.0.0.1:<target>.

One FaultProxy listens on a free loopback port and forwards every connection
it accepts to its target port. Each connection is a pipe with two directions:

  UP    bytes from the side that connected (the dialler) to the target
  DOWN  bytes from the target back to the dialler

Faults, set while connections are live:

  cut()        a partition: every open connection is reset (RST) and every
               new one is accepted and reset at once, so the dialler sees its
               link drop and its reconnects fail.
  blackhole(d) a silent partition: connections stay open (new ones are
               made too), but bytes in direction d are no longer forwarded.
               They are held, first in the proxy (up to max_buffer per
               direction) and then in the kernel's socket buffers, and the
               proxy's kernel still acknowledges them and answers keepalives,
               so the sender's TCP sees nothing wrong until those buffers are
               full: a peer that is hung or a middlebox that swallows
               traffic, not a pulled cable (which TCP_USER_TIMEOUT notices).
               heal() delivers the held bytes late, in order.
  delay(s, d)  bytes in direction d are forwarded s seconds after they were
               read.
  heal()       back to plain forwarding (held bytes flow again).

Control calls are applied by the proxy's thread before they return, so when
cut() returns no byte crosses any more. Everything the proxy starts (one
thread, its sockets) is closed by close(); every wait in it is bounded (the
thread's select wakes at least every POLL_S).
"""

import collections
import selectors
import socket
import struct
import threading
import time

HOST = "127.0.0.1"
UP, DOWN, BOTH = "up", "down", "both"
PASS, BLACKHOLE = "pass", "blackhole"
POLL_S = 0.05
READ_BYTES = 65536
CONTROL_TIMEOUT_S = 5.0
CLOSE_TIMEOUT_S = 5.0


def _directions(direction):
    if direction == BOTH:
        return (UP, DOWN)
    if direction in (UP, DOWN):
        return (direction,)
    raise ValueError("direction must be up, down or both, not %r" % (direction,))


def _reset(sock):
    """Closes sock with an RST (SO_LINGER 0), as a cut link would look."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class ProxyError(Exception):
    pass


class _Pipe:
    """One proxied connection: a (accepted from the dialler) and b (to the target)."""

    def __init__(self, a, b):
        self.a, self.b = a, b
        self.src = {UP: a, DOWN: b}
        self.dst = {UP: b, DOWN: a}
        self.queue = {UP: collections.deque(), DOWN: collections.deque()}  # (due, bytes|None)
        self.queued = {UP: 0, DOWN: 0}
        self.read_eof = {UP: False, DOWN: False}
        self.write_eof = {UP: False, DOWN: False}
        self.masks = {a: 0, b: 0}
        self.dead = False

    def finished(self):
        return self.write_eof[UP] and self.write_eof[DOWN]


class FaultProxy:
    """See the module docstring. name is for thread names and error text."""

    def __init__(self, target_port, name=None, host=HOST, max_buffer=4 << 20,
                 connect_timeout_s=1.0):
        self.target = (host, target_port)
        self.name = name or "proxy->%d" % target_port
        self.max_buffer = max_buffer
        self.connect_timeout_s = connect_timeout_s
        # fault state: written by the proxy's thread only (through _control)
        self._cut = False
        self._mode = {UP: PASS, DOWN: PASS}
        self._delay = {UP: 0.0, DOWN: 0.0}
        # counters (read by anyone)
        self.accepted = 0
        self.refused = 0
        self.bytes = {UP: 0, DOWN: 0}
        self._pipes = []
        self._commands = collections.deque()
        self._closing = False
        self._closed = False
        self._sel = selectors.DefaultSelector()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._wake_r, self._wake_w = socket.socketpair()
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, 0))
            self._listener.listen(64)
            self._listener.setblocking(False)
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._sel.register(self._listener, selectors.EVENT_READ, "listen")
            self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        except BaseException:
            self._close_sockets()
            raise
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._run, name="faultproxy %s" % self.name,
                                        daemon=True)
        self._thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "<FaultProxy %s :%d -> :%d cut=%s mode=%s delay=%s>" % (
            self.name, self.port, self.target[1], self._cut, self._mode, self._delay)

    # -- control (any thread) -----------------------------------------------
    def cut(self):
        """Resets every connection and every new one until heal()."""
        def apply():
            self._cut = True
            for p in self._pipes:
                self._kill(p)
        self._control(apply)

    def blackhole(self, direction=BOTH):
        """Stops forwarding in direction (bytes are held, connections stay)."""
        dirs = _directions(direction)

        def apply():
            for d in dirs:
                self._mode[d] = BLACKHOLE
        self._control(apply)

    def delay(self, seconds, direction=BOTH):
        """Forwards bytes in direction seconds after they were read."""
        if seconds < 0:
            raise ValueError("a delay cannot be negative")
        dirs = _directions(direction)

        def apply():
            for d in dirs:
                self._delay[d] = float(seconds)
        self._control(apply)

    def heal(self):
        """Plain forwarding again: no cut, no blackhole, no delay."""
        def apply():
            self._cut = False
            self._mode = {UP: PASS, DOWN: PASS}
            self._delay = {UP: 0.0, DOWN: 0.0}
            now = time.monotonic()
            for p in self._pipes:  # what was delayed goes now
                for d in (UP, DOWN):
                    p.queue[d] = collections.deque((min(due, now), data)
                                                   for due, data in p.queue[d])
        self._control(apply)

    def faulty(self):
        return self._cut or self._mode != {UP: PASS, DOWN: PASS} or any(self._delay.values())

    def connections(self):
        """Connections open right now."""
        return sum(1 for p in list(self._pipes) if not p.dead)

    def close(self):
        """Stops the thread and closes every socket (idempotent, bounded)."""
        if self._closed:
            return
        self._closing = True
        self._wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=CLOSE_TIMEOUT_S)
        self._closed = True
        for p in list(self._pipes):
            self._kill(p)
        self._pipes = []
        self._close_sockets()
        if self._thread.is_alive():
            raise ProxyError("%s: thread did not stop within %.0f s" % (self.name,
                                                                        CLOSE_TIMEOUT_S))

    def _close_sockets(self):
        for s in (self._listener, self._wake_r, self._wake_w):
            try:
                s.close()
            except OSError:
                pass
        try:
            self._sel.close()
        except (OSError, ValueError):
            pass

    def _wake(self):
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending, or we are closed

    def _control(self, fn):
        """Runs fn on the proxy's thread and waits until it has run."""
        if self._closing or self._closed:
            raise ProxyError("%s is closed" % self.name)
        done = threading.Event()
        self._commands.append((fn, done))
        self._wake()
        if not done.wait(CONTROL_TIMEOUT_S):
            raise ProxyError("%s: control not applied within %.0f s" % (self.name,
                                                                        CONTROL_TIMEOUT_S))

    # -- the proxy's thread ---------------------------------------------------
    def _run(self):
        try:
            while not self._closing:
                self._apply_commands()
                now = time.monotonic()
                self._update_interest(now)
                events = self._sel.select(self._wait_s(now))
                for key, mask in events:
                    if key.data == "listen":
                        self._accept()
                    elif key.data == "wake":
                        self._drain_wake()
                    else:
                        pipe, sock = key.data
                        if pipe.dead:
                            continue
                        if mask & selectors.EVENT_READ:
                            self._on_readable(pipe, sock)
                        if mask & selectors.EVENT_WRITE and not pipe.dead:
                            self._flush(pipe, UP if sock is pipe.b else DOWN)
                now = time.monotonic()
                for p in self._pipes:
                    if not p.dead:
                        for d in (UP, DOWN):
                            self._flush(p, d, now)
                self._sweep()
        finally:
            self._apply_commands()  # nobody waits forever on a control call
            for p in self._pipes:
                self._kill(p)
            self._sweep()

    def _apply_commands(self):
        while self._commands:
            fn, done = self._commands.popleft()
            try:
                fn()
            finally:
                done.set()

    def _drain_wake(self):
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _wait_s(self, now):
        wait = POLL_S
        for p in self._pipes:
            for d in (UP, DOWN):
                if p.queue[d] and self._mode[d] == PASS:
                    wait = min(wait, max(0.0, p.queue[d][0][0] - now))
        return wait

    def _accept(self):
        for _ in range(64):  # bounded per pass
            try:
                a, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            self.accepted += 1
            if self._cut:
                self.refused += 1
                _reset(a)
                continue
            try:
                b = socket.create_connection(self.target, timeout=self.connect_timeout_s)
            except OSError:
                self.refused += 1
                _reset(a)  # the target is down: so is the link
                continue
            for s in (a, b):
                s.setblocking(False)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pipes.append(_Pipe(a, b))

    def _update_interest(self, now):
        for p in self._pipes:
            if p.dead:
                continue
            want = {p.a: 0, p.b: 0}
            for d in (UP, DOWN):
                if (self._mode[d] == PASS and not p.read_eof[d]
                        and p.queued[d] < self.max_buffer):
                    want[p.src[d]] |= selectors.EVENT_READ
                if (self._mode[d] == PASS and p.queue[d] and p.queue[d][0][0] <= now
                        and not p.write_eof[d]):
                    want[p.dst[d]] |= selectors.EVENT_WRITE
            for s, mask in want.items():
                old = p.masks[s]
                if mask == old:
                    continue
                try:
                    if old == 0:
                        self._sel.register(s, mask, (p, s))
                    elif mask == 0:
                        self._sel.unregister(s)
                    else:
                        self._sel.modify(s, mask, (p, s))
                except (KeyError, ValueError, OSError):
                    self._kill(p)
                    break
                p.masks[s] = mask

    def _on_readable(self, pipe, sock):
        d = UP if sock is pipe.a else DOWN
        if self._mode[d] != PASS or pipe.read_eof[d]:
            return
        try:
            data = sock.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._kill(pipe)
            return
        due = time.monotonic() + self._delay[d]
        if not data:
            pipe.read_eof[d] = True
            pipe.queue[d].append((due, None))
            return
        pipe.queue[d].append((due, data))
        pipe.queued[d] += len(data)

    def _flush(self, pipe, d, now=None):
        """Writes what is due in direction d until the socket would block."""
        if pipe.dead or self._mode[d] != PASS:
            return
        now = time.monotonic() if now is None else now
        q, dst = pipe.queue[d], pipe.dst[d]
        while q and q[0][0] <= now:
            due, data = q[0]
            if data is None:
                q.popleft()
                pipe.write_eof[d] = True
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    self._kill(pipe)
                return
            try:
                n = dst.send(data)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._kill(pipe)
                return
            self.bytes[d] += n
            pipe.queued[d] -= n
            if n < len(data):
                q[0] = (due, data[n:])
                return
            q.popleft()

    def _kill(self, pipe):
        if pipe.dead:
            return
        pipe.dead = True
        for s in (pipe.a, pipe.b):
            if pipe.masks.get(s):
                try:
                    self._sel.unregister(s)
                except (KeyError, ValueError, OSError):
                    pass
                pipe.masks[s] = 0
            _reset(s)
        for d in (UP, DOWN):
            pipe.queue[d].clear()
            pipe.queued[d] = 0

    def _sweep(self):
        for p in self._pipes:
            if not p.dead and p.finished():
                self._kill(p)
        self._pipes = [p for p in self._pipes if not p.dead]
