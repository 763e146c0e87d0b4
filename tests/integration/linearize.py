"""A linearizability checker for register histories (read / write / CAS).

Each znode a test writes is modelled as one register holding (value,
version), ZooKeeper's data and Stat.version:

  read          sync + getData: returns (value, version)
  write v       setData(v, -1): version + 1; may return the new version
  cas (e, v)    setData(v, e): if version == e then (v, version + 1) and ok
                (with the new version), else BADVERSION and no change

An operation is recorded with its invoke and complete times (one clock,
time.monotonic) and a status, as Jepsen records them:

  ok    it took effect once, somewhere between invoke and complete, with
        the recorded result
  fail  it definitely did not take effect. A CAS that got BADVERSION is a
        fail that still says something: at its point the version was not e.
        Failed reads and failed plain writes are dropped.
  info  the outcome is unknown (timeout, connection loss): it may have taken
        effect at any time after its invoke, or never. Its completion is
        taken as +infinity (Knossos does the same), so it may be linearized
        after everything else, which is the same as never. Reads with an
        unknown outcome say nothing and are dropped.

The search is Wing & Gong's, with Lowe's memoization of (set of linearized
operations, register state) as in Porcupine (Horn & Kroening, "Faster
linearizability checking via P-compositionality", FORTE 2015): calls and
returns in time order in a doubly linked list, the next call that is legal
in the current state is lifted out (linearized), and a return whose call is
still in the list means backtracking. Histories are split by key first (a
history is linearizable iff each key's sub-history is), so each search is
one register's. Versions make three prunings sound, and they keep
unknown-outcome writes cheap (without them every unknown write stays a
candidate at every later point, and the search grows with the number of
their subsets):
  - a write takes the register to the next version, so it is not placed
    where the history shows that version holding another value (an ok read
    of it, or an ok write that reported it);
  - nor where an op still to be placed needs an older version (a read that
    returned it, a write that reported the one after it): versions only grow;
  - an unknown op is placed only where it takes effect: where it would not,
    it could as well go last, and once every op with a known outcome is
    placed the rest go last, in any order, and the search is over.

Bounded: a key's history longer than max_ops is refused (HistoryTooLarge)
and a search that takes more than max_steps steps stops (SearchLimitExceeded);
neither is ever reported as linearizable.
"""

import collections
import math

READ, WRITE, CAS = "read", "write", "cas"
OK, FAIL, INFO = "ok", "fail", "info"

DEFAULT_MAX_OPS = 20000
DEFAULT_MAX_STEPS = 3000000


class HistoryTooLarge(Exception):
    pass


class SearchLimitExceeded(Exception):
    pass


class Op:
    """One operation of one client. value: the new value (write), or
    (expected version, new value) (cas). result: (value, version) for a read;
    the new version (or None if not known) for an ok write or cas."""

    __slots__ = ("process", "key", "kind", "value", "status", "result", "invoke", "complete")

    def __init__(self, process, key, kind, value, status, result, invoke, complete):
        if kind not in (READ, WRITE, CAS):
            raise ValueError("unknown op kind %r" % (kind,))
        if status not in (OK, FAIL, INFO):
            raise ValueError("unknown status %r" % (status,))
        if status != INFO and (complete is None or complete < invoke):
            raise ValueError("a completed op needs complete >= invoke: %r" % ((invoke, complete),))
        self.process, self.key, self.kind, self.value = process, key, kind, value
        self.status, self.result, self.invoke, self.complete = status, result, invoke, complete

    def __repr__(self):
        if self.kind == READ:
            what = "read"
        elif self.kind == WRITE:
            what = "write %r" % (self.value,)
        else:
            what = "cas v%s->%r" % self.value
        end = "inf" if self.status == INFO else "%.4f" % self.complete
        res = "" if self.result is None else " -> %r" % (self.result,)
        return "<%s %s %s%s [%.4f, %s] p=%s>" % (self.key, what, self.status, res, self.invoke,
                                                 end, self.process)


class CheckResult:
    """ok: linearizable. For a failure, op is the operation that could not be
    linearized, prefix the longest linearizable prefix found and state the
    register's state after it."""

    def __init__(self, key, ok, n_ops, steps, op=None, prefix=(), state=None, blocked_by=()):
        self.key, self.ok, self.n_ops, self.steps = key, ok, n_ops, steps
        self.op, self.prefix, self.state = op, list(prefix), state
        self.blocked_by = list(blocked_by)  # ops that needed an older version than op makes

    def __bool__(self):
        return self.ok

    def explain(self, history=None, limit=40):
        if self.ok:
            return "%s: linearizable (%d ops, %d steps)" % (self.key, self.n_ops, self.steps)
        lines = ["%s: NOT linearizable (%d ops, %d steps)" % (self.key, self.n_ops, self.steps),
                 "  no linearization point for %r" % (self.op,)]
        if self.blocked_by:
            lines.append("  (placed there it would leave no place for %s)" % ", ".join(
                repr(o) for o in self.blocked_by[:5]))
        lines.append("  longest linearizable prefix (%d ops) ends in state %r:" % (
            len(self.prefix), self.state))
        lines += ["    %r" % (o,) for o in self.prefix[-limit:]]
        if history is not None:
            near = [o for o in history if o.key == self.key and o not in self.prefix
                    and o is not self.op]
            near.sort(key=lambda o: o.invoke)
            lines.append("  ops not in that prefix (first %d):" % limit)
            lines += ["    %r" % (o,) for o in near[:limit]]
        return "\n".join(lines)


def claims_of(ops):
    """{version: values} that the history says the register held at that
    version: what ok reads returned, and what ok writes and CAS that report
    their new version wrote."""
    claims = {}
    for o in ops:
        if o.status != OK:
            continue
        if o.kind == READ:
            claims.setdefault(o.result[1], set()).add(o.result[0])
        elif o.result is not None:
            claims.setdefault(o.result, set()).add(o.value if o.kind == WRITE else o.value[1])
    return claims


def _writes(state, new_value, claims):
    """The state after writing new_value, or None when the history shows
    that version held another value: versions only grow, so the op that
    wrote that value could then never take effect (the pruning that keeps
    unknown-outcome writes from making the search exponential)."""
    version = state[1] + 1
    if claims is not None:
        held = claims.get(version)
        if held is not None and new_value not in held:
            return None
    return (new_value, version)


def deadlines_of(ops):
    """below(v): the bitmask of ops (by index) that need the register at a
    version below v when they are placed: an ok read that returned version c
    needs <= c, an ok write or CAS that reported version c needs <= c - 1.
    Versions only grow, so once the register reaches v those ops can never
    be placed."""
    by_version = {}
    for i, o in enumerate(ops):
        if o.status != OK:
            continue
        if o.kind == READ:
            d = o.result[1]
        elif o.result is not None:
            d = o.result - 1
        else:
            continue
        by_version[d] = by_version.get(d, 0) | (1 << i)
    top = max(by_version, default=-1) + 1
    below, acc = [], 0
    for v in range(top + 1):  # below[v]: deadline < v
        below.append(acc)
        acc |= by_version.get(v, 0)

    def at(version):
        return below[min(max(version, 0), top)]
    return at


def step(state, op, claims=None):
    """(legal, next state) of op applied to the register state (value, version)."""
    value, version = state
    if op.kind == READ:
        return op.result == state, state
    if op.kind == WRITE:
        if op.status == OK and op.result is not None and op.result != version + 1:
            return False, state
        new = _writes(state, op.value, claims)
        return new is not None, new
    expected, new_value = op.value
    if op.status == FAIL:
        return version != expected, state
    if op.status == OK:
        if version != expected or (op.result is not None and op.result != version + 1):
            return False, state
        new = _writes(state, new_value, claims)
        return new is not None, new
    # unknown outcome: wherever it is linearized it does what a CAS does
    # there. Where it would fail it changes nothing and could as well go
    # last (it has no completion to respect), where check_register puts
    # every unknown op that is left; so it is only placed where it applies.
    if version == expected:
        new = _writes(state, new_value, claims)
        return new is not None, new
    return False, state


def relevant(op):
    """Whether op constrains the history: reads must be ok, writes not fail."""
    if op.kind == READ:
        return op.status == OK
    if op.kind == WRITE:
        return op.status != FAIL
    return True


def check_register(ops, init, key=None, max_ops=DEFAULT_MAX_OPS, max_steps=DEFAULT_MAX_STEPS):
    """Whether one register's history is linearizable from state init."""
    ops = [o for o in ops if relevant(o)]
    if len(ops) > max_ops:
        raise HistoryTooLarge("%s: %d operations, above the limit of %d: split the history or "
                              "raise max_ops" % (key, len(ops), max_ops))
    n = len(ops)
    claims = claims_of(ops)
    below = deadlines_of(ops)
    # events: (time, 0 call | 1 return, op index); calls sort before returns
    # at equal times, so touching intervals count as concurrent
    events = []
    for i, o in enumerate(ops):
        events.append((o.invoke, 0, i))
        events.append((math.inf if o.status == INFO else o.complete, 1, i))
    events.sort()
    m = len(events)
    head = m  # the list's sentinel: nxt[head] is the first event left
    nxt = [k + 1 for k in range(m)] + [0 if m else -1]
    prv = [k - 1 for k in range(m)] + [-1]
    if m:
        nxt[m - 1] = -1
        prv[0] = head
    is_call = [e[1] == 0 for e in events]
    op_of = [e[2] for e in events]
    ret_of = {}
    for k, e in enumerate(events):
        if e[1] == 1:
            ret_of[e[2]] = k
    match = [ret_of[op_of[k]] if is_call[k] else -1 for k in range(m)]

    def lift(k):
        r = match[k]
        nxt[prv[k]] = nxt[k]
        if nxt[k] != -1:
            prv[nxt[k]] = prv[k]
        nxt[prv[r]] = nxt[r]
        if nxt[r] != -1:
            prv[nxt[r]] = prv[r]

    def unlift(k):
        r = match[k]
        nxt[prv[r]] = r
        if nxt[r] != -1:
            prv[nxt[r]] = r
        nxt[prv[k]] = k
        if nxt[k] != -1:
            prv[nxt[k]] = k

    # Once every op with a known outcome is placed, the unknown ones left go
    # last, in any order: each may apply or not there, and nothing observes
    # it. So the search ends there.
    known = [o.status != INFO for o in ops]
    n_known = sum(known)
    placed_known = 0
    cache = set()
    stack = []  # (call entry, state before it)
    linearized = 0
    state = init
    entry = nxt[head]
    steps = 0
    best = (-1, None, None, [], 0)  # (depth, stuck op, state there, stack, linearized)
    while nxt[head] != -1 and placed_known < n_known:
        steps += 1
        if steps > max_steps:
            raise SearchLimitExceeded("%s: no answer within %d search steps (%d operations): "
                                      "the history has too much concurrency to check"
                                      % (key, max_steps, n))
        if is_call[entry]:
            i = op_of[entry]
            legal, new_state = step(state, ops[i], claims)
            bit = 1 << i
            if legal and new_state[1] > state[1] and below(new_state[1]) & ~(linearized | bit):
                legal = False  # an op still to place needs an older version
            if legal:
                memo = (linearized | bit, new_state)
                if memo not in cache:
                    cache.add(memo)
                    stack.append((entry, state))
                    state = new_state
                    linearized |= bit
                    placed_known += known[i]
                    lift(entry)
                    entry = nxt[head]
                    continue
            entry = nxt[entry]
        else:
            if len(stack) > best[0]:
                best = (len(stack), op_of[entry], state, list(stack), linearized)
            if not stack:
                depth, stuck, at, placed, lin_bits = best
                prefix = [ops[op_of[e]] for e, _ in placed]
                _, after = step(at, ops[stuck])
                blocked = below(after[1]) & ~(lin_bits | (1 << stuck)) if after[1] > at[1] else 0
                blocked_by = [ops[k] for k in range(n) if blocked >> k & 1]
                return CheckResult(key, False, n, steps, ops[stuck], prefix, at, blocked_by)
            entry, state = stack.pop()
            linearized &= ~(1 << op_of[entry])
            placed_known -= known[op_of[entry]]
            unlift(entry)
            entry = nxt[entry]
    return CheckResult(key, True, n, steps)


def check_history(ops, init, max_ops=DEFAULT_MAX_OPS, max_steps=DEFAULT_MAX_STEPS):
    """Checks every key's sub-history. init: one initial (value, version) for
    every key, or {key: (value, version)}. Returns {key: CheckResult}."""
    by_key = collections.OrderedDict()
    for o in sorted(ops, key=lambda o: (str(o.key), o.invoke)):
        by_key.setdefault(o.key, []).append(o)
    out = collections.OrderedDict()
    for key, sub in by_key.items():
        start = init[key] if isinstance(init, dict) else init
        out[key] = check_register(sub, start, key=key, max_ops=max_ops, max_steps=max_steps)
    return out


def failures(results):
    return [r for r in results.values() if not r.ok]
