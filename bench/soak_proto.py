"""The soak's wires: one request interface over memcached's text, meta and
binary protocols (bench/soak.py).

A request is an Op; `encode(op)` gives its bytes on a wire and
`read(op, reader)` reads its reply back as one normalised value, so that
the model (bench/soak_model.py) never sees a protocol:

    get, gets, gat   {key: (flags, value, cas)} of the keys found
    set, add, replace, append, prepend, cas
                     STORED, NOT_STORED, EXISTS, NOT_FOUND or OOM
    delete           DELETED or NOT_FOUND
    incr, decr       the new value (int), NOT_FOUND or NON_NUMERIC
    touch            TOUCHED or NOT_FOUND

Any other reply raises Unexpected (a protocol error is a finding, not a
miss); a closed or silent connection raises Broken.
"""

import socket
import struct

STORED, NOT_STORED, EXISTS, NOT_FOUND = ("STORED", "NOT_STORED", "EXISTS",
                                         "NOT_FOUND")
DELETED, TOUCHED, NON_NUMERIC, OOM = ("DELETED", "TOUCHED", "NON_NUMERIC",
                                      "OOM")
READS = ("get", "gets", "gat")
STORES = ("set", "add", "replace", "append", "prepend", "cas")


class Broken(OSError):
    """The connection closed, failed or timed out."""


class Unexpected(Exception):
    """A reply the request does not allow."""


class Op:
    """One request.  keys: one key, or several for a multiget; exptime in
    seconds (0: none); cas: the unique a cas compares with."""

    __slots__ = ("kind", "keys", "value", "flags", "exptime", "cas",
                 "delta", "sent", "reply", "done")

    def __init__(self, kind, keys, value=b"", flags=0, exptime=0, cas=0,
                 delta=0):
        self.kind = kind
        self.keys = keys
        self.value = value
        self.flags = flags
        self.exptime = exptime
        self.cas = cas
        self.delta = delta
        self.sent = self.reply = self.done = None

    @property
    def key(self):
        return self.keys[0]

    def __repr__(self):
        v = self.value[:24] + (b"..%d" % len(self.value)
                               if len(self.value) > 24 else b"")
        return "%s %s%s%s%s" % (
            self.kind, b",".join(self.keys[:4]).decode(),
            " v=%r" % v if self.kind in STORES else "",
            " t=%d" % self.exptime if self.exptime else "",
            " cas=%d" % self.cas if self.cas else "")


class Reader:
    """A socket read through a buffer."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        try:
            chunk = self.sock.recv(1 << 20)
        except (OSError, socket.timeout) as e:
            raise Broken(str(e))
        if not chunk:
            raise Broken("closed")
        self.buf += chunk

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return out
            self._fill()

    def exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


def _error(line):
    if line.startswith(b"SERVER_ERROR out of memory"):
        return OOM
    raise Unexpected(line.decode(errors="replace"))


# ---- text ------------------------------------------------------------------

TEXT_STORE = {STORED: STORED, NOT_STORED: NOT_STORED, EXISTS: EXISTS,
              NOT_FOUND: NOT_FOUND}


def text_encode(op):
    k = op.kind
    if k in ("get", "gets"):
        return b"%s %s\r\n" % (k.encode(), b" ".join(op.keys))
    if k == "gat":
        return b"gats %d %s\r\n" % (op.exptime, b" ".join(op.keys))
    if k in STORES:
        cas = b" %d" % op.cas if k == "cas" else b""
        return b"%s %s %d %d %d%s\r\n%s\r\n" % (
            k.encode(), op.key, op.flags, op.exptime, len(op.value), cas,
            op.value)
    if k == "delete":
        return b"delete %s\r\n" % op.key
    if k in ("incr", "decr"):
        return b"%s %s %d\r\n" % (k.encode(), op.key, op.delta)
    if k == "touch":
        return b"touch %s %d\r\n" % (op.key, op.exptime)
    raise ValueError(k)


def text_read(op, r):
    k = op.kind
    if k in READS:
        found = {}
        while True:
            line = r.line()
            if line == b"END":
                return found
            p = line.split()
            if p[0] != b"VALUE" or len(p) not in (4, 5):
                return _error(line)
            data = r.exact(int(p[3]) + 2)
            if data[-2:] != b"\r\n":
                raise Unexpected("value without its \\r\\n: %r" % line)
            found[p[1]] = (int(p[2]), data[:-2],
                           int(p[4]) if len(p) == 5 else 0)
    line = r.line()
    if k in STORES:
        return TEXT_STORE.get(line.decode(errors="replace")) or _error(line)
    if k == "delete":
        return {b"DELETED": DELETED, b"NOT_FOUND": NOT_FOUND}.get(line) \
            or _error(line)
    if k in ("incr", "decr"):
        if line == b"NOT_FOUND":
            return NOT_FOUND
        if line.startswith(b"CLIENT_ERROR cannot increment"):
            return NON_NUMERIC
        return int(line) if line.isdigit() else _error(line)
    return {b"TOUCHED": TOUCHED, b"NOT_FOUND": NOT_FOUND}.get(line) \
        or _error(line)


# ---- meta ------------------------------------------------------------------

META_MODE = {"set": b"S", "add": b"E", "replace": b"R", "append": b"A",
             "prepend": b"P", "cas": b"S"}


def meta_encode(op):
    k = op.kind
    if k in ("get", "gets"):
        if len(op.keys) == 1:
            return b"mg %s v f c k\r\n" % op.key
        return b"".join(b"mg %s v f c k q\r\n" % key
                        for key in op.keys) + b"mn\r\n"
    if k == "gat":
        return b"mg %s v f c k T%d\r\n" % (op.key, op.exptime)
    if k in STORES:
        cas = b" C%d" % op.cas if k == "cas" else b""
        return b"ms %s %d F%d T%d M%s%s\r\n%s\r\n" % (
            op.key, len(op.value), op.flags, op.exptime, META_MODE[k], cas,
            op.value)
    if k == "delete":
        return b"md %s\r\n" % op.key
    if k in ("incr", "decr"):
        return b"ma %s D%d M%s v\r\n" % (op.key, op.delta,
                                         b"I" if k == "incr" else b"D")
    if k == "touch":
        return b"mg %s T%d\r\n" % (op.key, op.exptime)
    raise ValueError(k)


def _meta_flags(tokens):
    return {t[:1]: t[1:] for t in tokens}


def _meta_value(r, line, op):
    """A VA line and its data: (key, (flags, value, cas))."""
    p = line.split()
    data = r.exact(int(p[1]) + 2)
    if data[-2:] != b"\r\n":
        raise Unexpected("value without its \\r\\n: %r" % line)
    f = _meta_flags(p[2:])
    return f.get(b"k", op.key), (int(f.get(b"f", b"0")), data[:-2],
                                int(f.get(b"c", b"0")))


def meta_read(op, r):
    k = op.kind
    if k in READS:
        found = {}
        while True:
            line = r.line()
            head = line.split(b" ", 1)[0]
            if head in (b"EN", b"MN"):          # EN may carry k<key>
                if head == b"MN" or len(op.keys) == 1:
                    return found
                continue
            if not line.startswith(b"VA "):
                return _error(line)
            key, v = _meta_value(r, line, op)
            found[key] = v
            if len(op.keys) == 1:
                return found
    line = r.line()
    if k in STORES:
        return {b"HD": STORED, b"NS": NOT_STORED, b"EX": EXISTS,
                b"NF": NOT_FOUND}.get(line) or _error(line)
    if k == "delete":
        return {b"HD": DELETED, b"NF": NOT_FOUND}.get(line) or _error(line)
    if k in ("incr", "decr"):
        if line == b"NF":
            return NOT_FOUND
        if line.startswith(b"CLIENT_ERROR cannot increment"):
            return NON_NUMERIC
        if not line.startswith(b"VA "):
            return _error(line)
        data = r.exact(int(line.split()[1]) + 2)
        return int(data[:-2])
    return {b"HD": TOUCHED, b"EN": NOT_FOUND}.get(line.split(b" ", 1)[0]) \
        or _error(line)


# ---- binary ----------------------------------------------------------------

BIN_OP = {"get": 0x0c, "gets": 0x0c, "set": 0x01, "add": 0x02,
          "replace": 0x03, "delete": 0x04, "incr": 0x05, "decr": 0x06,
          "append": 0x0e, "prepend": 0x0f, "cas": 0x01, "touch": 0x1c,
          "gat": 0x1d}
GETKQ, NOOP = 0x0d, 0x0a
HEADER = struct.Struct(">BBHBBHIIQ")


def _bin(opcode, key=b"", extras=b"", value=b"", cas=0, opaque=0):
    body = len(extras) + len(key) + len(value)
    return HEADER.pack(0x80, opcode, len(key), len(extras), 0, 0, body,
                       opaque, cas) + extras + key + value


def binary_encode(op):
    k = op.kind
    if k in ("get", "gets"):
        if len(op.keys) == 1:
            return _bin(BIN_OP[k], op.key)
        return b"".join(_bin(GETKQ, key) for key in op.keys) + _bin(NOOP)
    if k in ("set", "add", "replace", "cas"):
        return _bin(BIN_OP[k], op.key, struct.pack(">II", op.flags,
                                                   op.exptime),
                    op.value, op.cas if k == "cas" else 0)
    if k in ("append", "prepend"):
        return _bin(BIN_OP[k], op.key, b"", op.value)
    if k == "delete":
        return _bin(BIN_OP[k], op.key)
    if k in ("incr", "decr"):
        return _bin(BIN_OP[k], op.key,
                    struct.pack(">QQI", op.delta, 0, 0xffffffff))
    if k in ("touch", "gat"):
        return _bin(BIN_OP[k], op.key, struct.pack(">I", op.exptime))
    raise ValueError(k)


def _bin_reply(r):
    """(opcode, status, key, extras, value, cas) of the next reply."""
    magic, opcode, klen, elen, _, status, body, _, cas = \
        HEADER.unpack(r.exact(24))
    if magic != 0x81:
        raise Unexpected("binary magic %#x" % magic)
    rest = r.exact(body)
    return (opcode, status, rest[elen:elen + klen], rest[:elen],
            rest[elen + klen:], cas)


def _bin_status(status, rest, ok, codes):
    if status == 0:
        return ok
    if status in codes:
        return codes[status]
    if status == 0x82:
        return OOM
    raise Unexpected("binary status %#x: %r" % (status, rest[:80]))


def binary_read(op, r):
    k = op.kind
    if k in ("get", "gets") and len(op.keys) > 1:
        found = {}
        while True:
            opcode, status, key, extras, value, cas = _bin_reply(r)
            if opcode == NOOP:
                return found
            if status != 0:
                raise Unexpected("GETKQ status %#x" % status)
            found[key] = (struct.unpack(">I", extras)[0], value, cas)
    opcode, status, key, extras, value, cas = _bin_reply(r)
    if opcode != BIN_OP[k]:
        raise Unexpected("binary opcode %#x for %s" % (opcode, k))
    if k in READS:
        if status == 1:
            return {}
        _bin_status(status, value, None, {})
        return {op.key: (struct.unpack(">I", extras)[0], value, cas)}
    if k in ("set", "cas"):
        return _bin_status(status, value, STORED, {1: NOT_FOUND, 2: EXISTS})
    if k == "add":
        return _bin_status(status, value, STORED, {2: NOT_STORED})
    if k == "replace":
        return _bin_status(status, value, STORED, {1: NOT_STORED})
    if k in ("append", "prepend"):
        return _bin_status(status, value, STORED, {5: NOT_STORED,
                                                   1: NOT_STORED})
    if k == "delete":
        return _bin_status(status, value, DELETED, {1: NOT_FOUND})
    if k in ("incr", "decr"):
        got = _bin_status(status, value, None, {1: NOT_FOUND,
                                                6: NON_NUMERIC})
        return struct.unpack(">Q", value)[0] if got is None else got
    return _bin_status(status, value, TOUCHED, {1: NOT_FOUND})


WIRES = {
    "text": (text_encode, text_read),
    "meta": (meta_encode, meta_read),
    "binary": (binary_encode, binary_read),
}


class Conn:
    """A connection speaking one wire: run(ops) sends them in one write
    (a pipeline) and reads every reply, in order, into op.reply."""

    def __init__(self, port, wire, timeout):
        self.encode, self.decode = WIRES[wire]
        try:
            self.sock = socket.create_connection(("127.0.0.1", port),
                                                 timeout=timeout)
        except OSError as e:
            raise Broken(str(e))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = Reader(self.sock)

    def close(self):
        self.sock.close()

    def run(self, ops, clock):
        data = b"".join(self.encode(op) for op in ops)
        t = clock()
        for op in ops:
            op.sent = t
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise Broken(str(e))
        for op in ops:
            op.reply = self.decode(op, self.reader)
            op.done = clock()


class Text:
    """A text connection for the controller: a command, its lines."""

    def __init__(self, port, timeout=10.0):
        try:
            self.sock = socket.create_connection(("127.0.0.1", port),
                                                 timeout=timeout)
        except OSError as e:
            raise Broken(str(e))
        self.reader = Reader(self.sock)

    def close(self):
        self.sock.close()

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise Broken(str(e))

    def call(self, line):
        """One reply line."""
        self.send(line)
        return self.reader.line()

    def lines(self, line, end=b"END"):
        self.send(line)
        out = []
        while True:
            got = self.reader.line()
            if got == end:
                return out
            out.append(got)

    def stats(self, arg=b""):
        out = {}
        for line in self.lines(b"stats %s\r\n" % arg if arg else
                               b"stats\r\n"):
            p = line.split(b" ", 2)
            if p[0] != b"STAT":
                raise Unexpected(line.decode(errors="replace"))
            out[p[1].decode()] = p[2].decode() if len(p) > 2 else ""
        return out
