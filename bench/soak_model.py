"""What each client of the soak was told, and what a reply may be
(bench/soak.py).

A key a client owns has a set of possible states: ABSENT, or a value
(sid, bytes, flags, lo, hi) where sid names the write that made it and
[lo, hi] is the wall-clock window in which a TTL makes it expire (no
TTL: None).  One state while every reply was read; more than one after
a connection broke with requests in flight, or near an expiry.  Every
reply narrows the set to the states it agrees with and moves them on
(a set moves ABSENT and a value alike to the new value); a reply that
agrees with none is a violation, named by what it looks like:

    lost         a miss where the key must be there
    stale        an older value of the key (one the history names)
    resurrected  a value of a key that must be absent
    wrong        anything else (a torn or foreign value, a counter off)

Misses have causes that make them allowed, each counted:

    recovering   the node reads its file back (stats recovery_running,
                 read with no fault since): a key not read back yet
                 answers as missing, for every command (recover.h);
                 `delete` deletes it all the same
    evicted      an eviction-pressure phase, until the cache is made
                 anew (where an append or prepend that finds no memory
                 answers NOT_STORED, as memcached's does)
    expired      within a TTL's window
    volatile     tier_policy=capacity: what DRAM held is gone after a
                 restart or takeover
"""

import collections

ABSENT = None
HISTORY = 10


class Violation(AssertionError):
    def __init__(self, kind, key, detail):
        super().__init__("%s: %r: %s" % (kind, key, detail))
        self.kind = kind
        self.key = key


class View:
    """Under what a batch of replies is judged: the node may be reading
    its file back (rec), or evicting (evict); sent/done times per op."""

    __slots__ = ("rec", "evict")

    def __init__(self, rec, evict):
        self.rec = rec
        self.evict = evict


def _num(value):
    """A counter's value as an int (memcached pads a decr in place with
    spaces), or None."""
    v = value.rstrip(b" ")
    return int(v) if v.isdigit() else None


def _changed(op, reply):
    """Did op store a copy of its key, or note its removal?  (Then a copy
    left by a crash can no longer win.)"""
    if op.kind in ("set", "add", "replace", "append", "prepend", "cas"):
        return reply == "STORED"
    if op.kind in ("incr", "decr"):
        return isinstance(reply, int)
    return op.kind == "delete"


def _same_value(state, flags, value, counter):
    if state[2] != flags:
        return False
    if counter:
        return _num(state[1]) == _num(value)
    return state[1] == value


def window(op, exptime):
    """The wall-clock window a TTL set by op expires in: the server's
    clock ticks once a second, and may lag it by one."""
    if exptime == 0:
        return None, None
    return op.sent + exptime - 1.5, op.done + exptime + 2.0


class Keys:
    """The keys one client owns (counter keys hold numbers only)."""

    def __init__(self, keys, counters=()):
        self.states = {k: {ABSENT} for k in keys}
        self.counters = set(counters)
        for k in counters:
            self.states[k] = {ABSENT}
        self.seen = {}          # key -> (sid, cas) read by a gets
        # key -> the values of writes in flight at a fault, which may
        # show until the recovery after it ends (in_flight())
        self.pending = {}
        self.sid = 0
        self.hist = {k: collections.deque(maxlen=HISTORY)
                     for k in self.states}
        self.wrote = {k: collections.deque(maxlen=HISTORY)
                      for k in self.states}
        self.counts = collections.Counter()

    def keys(self):
        return list(self.states)

    def reset(self):
        """The cache was made anew (flush_all): every key absent."""
        for k in self.states:
            self.states[k] = {ABSENT}
        self.seen.clear()
        self.pending.clear()

    def volatile(self):
        """A restart under tier_policy=capacity: anything may be gone."""
        for s in self.states.values():
            s.add(ABSENT)

    def present(self, key):
        """One present state of the key, if it surely is there."""
        s = self.states[key]
        if len(s) == 1:
            (only,) = s
            return only
        return None

    def _new(self, value, flags, lo, hi):
        """The state a write makes: one per write, whichever state it
        moved on from."""
        made = self.made.get((value, flags, lo, hi))
        if made is None:
            self.sid += 1
            made = self.made[(value, flags, lo, hi)] = \
                (self.sid, value, flags, lo, hi)
        return made

    # ---- one key's reply ---------------------------------------------------

    def judge(self, key, op, reply, view):
        """Narrow the key's states by the reply to op, or raise
        Violation."""
        sid0 = self.sid
        self.made = {}
        states = self._aged(self.states[key], op)
        if view.evict:
            states = states | {ABSENT}
        # the recovery over, the write in flight either won at its end
        # or never will: as much one state as the others, until a reply
        late = self.pending.get(key, set())
        out = set()
        for s in states | late:
            for n in self._step(key, s, op, reply):
                out.add(n)
            if view.rec:
                for n in self._absent_view(key, s, op, reply):
                    out.add(n)
            if view.evict and s is not ABSENT and reply == "NOT_STORED" \
                    and op.kind in ("append", "prepend"):
                out.add(s)      # memcached: no memory for the longer value
        self.hist[key].append((op.sent, repr(op), _short(reply)))
        if not out:
            raise Violation(self._name(key, states, op, reply), key,
                            self._explain(key, states, op, reply))
        if not view.rec or _changed(op, reply) or \
                (late and any(p in out for p in late) and
                 op.kind in ("get", "gets", "gat") and reply is not None):
            self.pending.pop(key, None)     # no longer, or it showed
        self._count(key, states, op, reply, view)
        self.wrote[key].extend((n[2], n[1]) for n in out
                               if n is not ABSENT and n[0] > sid0)
        self.states[key] = out
        if op.kind in ("gets", "gat") and reply is not None and \
                len(out) == 1 and next(iter(out)) is not ABSENT:
            self.seen[key] = (next(iter(out))[0], reply[2])

    def in_flight(self, key, op):
        """A request whose reply never came (its connection broke): the
        key may be as before or as after it.  A crash can also leave its
        item in the file beside the older copy it was replacing (it came
        between the two); the recovery may link the older copy first and
        the newer one later (chunked values last of all), so until the
        recovery ends the write may still show even after a read found
        the key as before (pending; the node never serves a value older
        than the last one acknowledged)."""
        sid0 = self.sid
        self.made = {}
        states = self._aged(self.states[key], op)
        out = set(states)
        for s in states:
            for r in _replies(op, s):
                out.update(self._step(key, s, op, r))
                out.update(self._absent_view(key, s, op, r))
        self.hist[key].append((op.sent, repr(op), "(no reply)"))
        self.wrote[key].extend((n[2], n[1]) for n in out
                               if n is not ABSENT and n[0] > sid0)
        self.pending.setdefault(key, set()).update(
            n for n in out if n is not ABSENT and n[0] > sid0)
        self.states[key] = out

    def _aged(self, states, op):
        """States past their window are gone; in it, maybe."""
        out = set()
        for s in states:
            if s is ABSENT or s[4] is None:
                out.add(s)
            elif op.sent > s[4]:
                out.add(ABSENT)
            else:
                out.add(s)
                if op.done > s[3]:
                    out.add(ABSENT)
        return out

    def _step(self, key, s, op, r):
        """The states s moves to when the reply is r; none if s cannot
        give r."""
        k = op.kind
        counter = key in self.counters
        if k in ("get", "gets", "gat"):
            if s is ABSENT:
                return [s] if r is None else []
            if r is None or not _same_value(s, r[0], r[1], counter):
                return []
            if k == "gat":
                return [s[:3] + window(op, op.exptime)]
            return [s]
        if r == "OOM":
            # memcached drops the old value of a set it cannot store
            return [s, ABSENT] if k == "set" else [s]
        if k == "set":
            return [self._new(op.value, op.flags, *window(op, op.exptime))] \
                if r == "STORED" else []
        if k == "add":
            if s is ABSENT:
                return [self._new(op.value, op.flags,
                                  *window(op, op.exptime))] \
                    if r == "STORED" else []
            return [s] if r == "NOT_STORED" else []
        if k in ("replace", "append", "prepend"):
            if s is ABSENT:
                return [s] if r == "NOT_STORED" else []
            if r != "STORED":
                return []
            if k == "replace":
                return [self._new(op.value, op.flags,
                                  *window(op, op.exptime))]
            v = s[1] + op.value if k == "append" else op.value + s[1]
            return [self._new(v, s[2], s[3], s[4])]
        if k == "cas":
            if s is ABSENT:
                return [s] if r == "NOT_FOUND" else []
            seen = self.seen.get(key)
            if seen is not None and seen[0] == s[0] and seen[1] == op.cas:
                return [self._new(op.value, op.flags,
                                  *window(op, op.exptime))] \
                    if r == "STORED" else []
            return [s] if r == "EXISTS" else []
        if k == "delete":
            want = "NOT_FOUND" if s is ABSENT else "DELETED"
            return [ABSENT] if r == want else []
        if k in ("incr", "decr"):
            if s is ABSENT:
                return [s] if r == "NOT_FOUND" else []
            n = _num(s[1])
            if n is None:
                return [s] if r == "NON_NUMERIC" else []
            n = (n + op.delta) % (1 << 64) if k == "incr" else \
                max(0, n - op.delta)
            return [self._new(b"%d" % n, s[2], s[3], s[4])] if r == n else []
        if k == "touch":
            if s is ABSENT:
                return [s] if r == "NOT_FOUND" else []
            return [s[:3] + window(op, op.exptime)] if r == "TOUCHED" else []
        raise ValueError(k)

    def _absent_view(self, key, s, op, r):
        """While the file is read back a key not read back yet answers
        as missing, and stays as it is but for add, set and delete."""
        k = op.kind
        if k in ("get", "gets", "gat"):
            return [s] if r is None else []
        if k == "add" and r == "STORED":
            return [self._new(op.value, op.flags, *window(op, op.exptime))]
        if k in ("replace", "append", "prepend") and r == "NOT_STORED":
            return [s]
        if k in ("cas", "incr", "decr", "touch") and r == "NOT_FOUND":
            return [s]
        if k == "delete" and r == "NOT_FOUND":
            return [ABSENT]
        return []

    # ---- counting and naming -----------------------------------------------

    def _count(self, key, states, op, reply, view):
        self.counts["checked"] += 1
        if op.kind not in ("get", "gets", "gat") or reply is not None:
            return
        if all(s is ABSENT for s in states):
            return
        if any(s is not ABSENT and s[4] is not None for s in states):
            self.counts["miss:expired"] += 1
        elif ABSENT in states:
            self.counts["miss:in-flight"] += 1
        elif view.evict:
            self.counts["miss:evicted"] += 1
        else:
            self.counts["miss:recovering"] += 1

    def _name(self, key, states, op, r):
        if op.kind in ("get", "gets", "gat"):
            if r is None:
                return "lost"
            if states == {ABSENT}:
                return "resurrected"
            return "stale" if (r[0], r[1]) in self.wrote[key] else "wrong"
        return "wrong"

    def _explain(self, key, states, op, r):
        lines = ["%s -> %s" % (op, _short(r)),
                 "possible before: %s" % ", ".join(_state(s)
                                                   for s in states)]
        lines += ["  %.3f %s -> %s" % h for h in self.hist[key]]
        return "\n".join(lines)


def _replies(op, s):
    """Every reply op could have had from state s."""
    k = op.kind
    if k == "gat":
        return [None] if s is ABSENT else [(s[2], s[1], 0)]
    if k == "delete":
        return ["DELETED", "NOT_FOUND"]
    if k == "touch":
        return ["TOUCHED", "NOT_FOUND"]
    if k in ("incr", "decr"):
        n = None if s is ABSENT else _num(s[1])
        if n is None:
            return ["NOT_FOUND", "NON_NUMERIC"]
        return ["NOT_FOUND", (n + op.delta) % (1 << 64) if k == "incr"
                else max(0, n - op.delta)]
    return ["STORED", "NOT_STORED", "EXISTS", "NOT_FOUND", "OOM"]


def _short(r):
    if isinstance(r, tuple):
        v = r[1]
        return "(f=%d %r%s cas=%d)" % (r[0], v[:24], "..%d" % len(v)
                                       if len(v) > 24 else "", r[2])
    return repr(r)


def _state(s):
    if s is ABSENT:
        return "absent"
    v = s[1]
    ttl = "" if s[4] is None else " ttl[%.1f,%.1f]" % (s[3], s[4])
    return "#%d f=%d %r%s%s" % (s[0], s[2], v[:24],
                               "..%d" % len(v) if len(v) > 24 else "", ttl)


class Fixed:
    """Keys written once and left alone (the preload, and the bursts that
    grow the table): their value is known for good.  After a restart
    under tier_policy=capacity, or in an eviction phase, each may be
    gone; a key once found gone stays gone."""

    def __init__(self):
        self.value = {}         # key -> (flags, bytes)
        self.order = []         # the keys, in the order written
        self.maybe = set()      # may be gone
        self.gone = set()

    def add(self, key, flags, value):
        if key not in self.value:
            self.order.append(key)
        self.value[key] = (flags, value)

    def clear(self):
        self.value.clear()
        self.order = []
        self.maybe.clear()
        self.gone.clear()

    def volatile(self):
        self.maybe.update(self.value)

    def judge(self, key, r, view):
        """The verdict on a read of a written-once key: None, or the
        cause of an allowed miss."""
        flags, value = self.value[key]
        if r is not None:
            if key in self.gone:
                raise Violation("resurrected", key, "found again after a "
                                "miss that was not the recovery's")
            if (r[0], r[1]) != (flags, value):
                raise Violation("wrong", key, "%s, wanted f=%d %r" %
                                (_short(r), flags, value[:24]))
            return None
        if view.rec:
            return "recovering"
        if view.evict or key in self.maybe:
            self.gone.add(key)
            return "evicted" if view.evict else "volatile"
        raise Violation("lost", key, "written once (f=%d, %d bytes), "
                        "missing with no recovery running" %
                        (flags, len(value)))


class Shared:
    """Counters every client adds one to by compare-and-swap (gets, then
    cas with the unique it read): a value never goes back, and never
    falls below the adds acknowledged before the read was sent (a cas
    that stored over what it did not see loses one), nor rises above the
    adds sent before its reply came (one a broken connection left
    unanswered may have stored)."""

    def __init__(self, keys, lock):
        self.keys = list(keys)
        self.lock = lock
        self.acked = dict.fromkeys(self.keys, 0)
        self.sent = dict.fromkeys(self.keys, 0)
        self.high = dict.fromkeys(self.keys, 0)
        self.counts = collections.Counter()

    def reset(self):
        for k in self.keys:
            self.acked[k] = self.sent[k] = self.high[k] = 0

    def floor(self, key):
        """What a read sent now must find at least: the adds acknowledged,
        and any value a read has found (a value once served was stored
        and stays, through a crash of the process too)."""
        with self.lock:
            return max(self.acked[key], self.high[key])

    def seen(self, key, n):
        with self.lock:
            self.high[key] = max(self.high[key], n)

    def ceiling(self, key):
        with self.lock:
            return self.sent[key]

    def judge(self, key, floor, ceiling, r, view, volatile):
        """A read of the counter: its value (int), or None for a miss
        allowed (counted); raises Violation."""
        if r is None:
            if view.rec or view.evict or volatile:
                self.counts["miss:" + ("recovering" if view.rec else
                                       "evicted" if view.evict else
                                       "volatile")] += 1
                return None
            raise Violation("lost", key, "shared counter missing (%d adds "
                            "acknowledged)" % floor)
        n = _num(r[1])
        if n is None or not floor <= n <= ceiling:
            raise Violation("stale" if n is not None and n < floor
                            else "wrong", key,
                            "shared counter %r, acknowledged adds %d, sent "
                            "%d" % (r[1], floor, ceiling))
        self.counts["checked"] += 1
        return n

    def sending(self, key):
        with self.lock:
            self.sent[key] += 1

    def answered(self, key, stored):
        with self.lock:
            if stored:
                self.acked[key] += 1
            else:
                self.sent[key] -= 1
