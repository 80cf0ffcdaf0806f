"""Batched prefetch (-o prefetch_batch): the replies never change.

A multiget is taken in windows of prefetch_batch keys, and the requests of
a pipeline found in one read are looked at ahead; either way the keys are
walked side by side before the requests run (storage/index/prefetch.h).  The
same requests must get byte-identical replies with prefetch_batch 0, 1, 16
and 128, and `stats` counts the batches walked.
"""

import base64

import pytest

# Lookups walk items in whichever tier, batched by what one read brought.
pytestmark = [pytest.mark.mcpm, pytest.mark.storage, pytest.mark.engine]

SETTINGS = (0, 1, 16, 128)
NKEYS = 1200


def value(i):
    return b"v%d-" % i + b"x" * (i % 300)


def load(c, p=b""):
    """Keys k0..k1199 (prefixed by p), every third one missing; flags
    vary."""
    c.send(b"".join(b"set %sk%d %d 0 %d noreply\r\n%s\r\n"
                    % (p, i, i % 7, len(value(i)), value(i))
                    for i in range(NKEYS) if i % 3 != 2))
    c.sync()


def multiget(n, cmd=b"get", start=0):
    return cmd + b" " + b" ".join(b"k%d" % (start + i)
                                  for i in range(n)) + b"\r\n"


def pipeline(p=b""):
    """One send of many mixed requests on hits, misses and new keys; p
    prefixes every key."""
    out = []
    for i in range(0, 300, 3):
        k = p + b"k%d" % i
        out += [
            b"get %s\r\n" % k,
            b"mg %s v f c t s\r\n" % k,
            b"gets %sk%d %sk%d %sk%d\r\n" % (p, i + 1, p, i + 2, p, i + 3),
            b"ms %sn%d 3 T0\r\nabc\r\n" % (p, i),
            b"set %ss%d 1 0 2\r\nhi\r\n" % (p, i),
            b"incr %s 1\r\n" % k,
            b"ma %sc%d N0 J%d v\r\n" % (p, i, i),
            b"touch %s 100\r\n" % k,
            b"gat 0 %sk%d\r\n" % (p, i + 1),
            b"delete %sk%d\r\n" % (p, i + 1),
            b"md %sn%d q\r\n" % (p, i),
            b"mg %sn%d v\r\n" % (p, i),
            b"mg %sk%d v k\r\n" % (p, i + 2),
        ]
    out.append(b"mn\r\n")
    return b"".join(out)


def run_script(s):
    """Every reply, in order, as one byte string."""
    replies = []
    with s.conn(timeout=20) as c:
        load(c)
        for n in (1, 16, 17, 100, 1000):
            replies.append(c.get_block(multiget(n)))
            replies.append(c.get_block(multiget(n, b"gets", 77)))
        c.send(pipeline())
        replies.append(c.read_until(b"MN\r\n"))
    return replies


def test_replies_identical_for_every_batch_size(server_factory):
    results = {}
    for batch in SETTINGS:
        s = server_factory("-o", "prefetch_batch=%d" % batch)
        results[batch] = run_script(s)
        assert s.stats("settings")["prefetch_batch"] == str(batch)
    base = results[0]
    # The script really reads values: the 1000-key get finds 667 of them.
    assert base[8].count(b"VALUE ") == 667
    assert base[8].startswith(b"VALUE k0 0 3\r\nv0-\r\nVALUE k1 1 4\r\n")
    for batch in SETTINGS[1:]:
        for i, (got, want) in enumerate(zip(results[batch], base)):
            assert got == want, "prefetch_batch=%d, reply block %d" % (
                batch, i)


@pytest.mark.parametrize("batch, n, batches, keys", [
    (16, 1, 0, 0),          # one key: nothing to overlap
    (16, 16, 1, 16),
    (16, 17, 1, 16),        # 16, then the 17th alone
    (16, 100, 7, 100),      # six of 16, one of 4
    (128, 1000, 8, 1000),   # seven of 128, one of 104
    (1, 100, 0, 0),         # batches of one: off
    (0, 100, 0, 0),
])
def test_multiget_counts_batches(server_factory, batch, n, batches, keys):
    s = server_factory("-o", "prefetch_batch=%d" % batch)
    with s.conn() as c:
        load(c)
        before = c.stats()
        block = c.get_block(multiget(n))
        after = c.stats()
    assert block.count(b"VALUE ") == sum(1 for i in range(n) if i % 3 != 2)
    assert int(after["prefetch_batches"]) - \
        int(before["prefetch_batches"]) == batches
    assert int(after["prefetch_keys"]) - int(before["prefetch_keys"]) == keys


def test_pipeline_is_walked_ahead(server_factory):
    s = server_factory("-o", "prefetch_batch=16")
    with s.conn() as c:
        load(c)
        before = c.stats()
        # 40 single-key gets in one send: read together, looked at ahead
        # 16 keys at a time (how the bytes arrive decides the exact count).
        c.send(b"".join(b"get k%d\r\n" % i for i in range(40)) +
               b"mn\r\n")
        c.read_until(b"MN\r\n")
        after = c.stats()
    walked = int(after["prefetch_keys"]) - int(before["prefetch_keys"])
    assert int(after["prefetch_batches"]) > int(before["prefetch_batches"])
    assert 16 <= walked <= 40


def test_prefetch_batch_bounds(run):
    r = run("-p", "0", "-o", "prefetch_batch=257")
    assert r.returncode == 1
    assert b"prefetch_batch" in r.stderr


def test_parsed_ahead_on_connections_taking_turns(server_factory):
    """Two connections of one worker, each with a long pipeline in one
    read, made to yield after every request (-R 1): the worker's parsed
    look-ahead keeps changing hands, and each connection's replies are
    still those of a server that never looks ahead.  Base64 keys (mg b)
    are looked up under their decoded bytes."""
    def script(p):
        return pipeline(p) + b"".join(
            b"mg %s b v\r\n" % base64.b64encode(p + b"k%d" % i)
            for i in range(60)) + b"mn\r\n"

    replies = {}
    for batch in (0, 16):
        s = server_factory("-t", "1", "-R", "1",
                           "-o", "prefetch_batch=%d" % batch)
        a, b = s.conn(timeout=20), s.conn(timeout=20)
        try:
            load(a, b"a")
            load(b, b"b")
            a.send(script(b"a"))
            b.send(script(b"b"))
            replies[batch] = (a.read_until(b"MN\r\n"),
                              b.read_until(b"MN\r\n"))
            yields = int(a.stats()["conn_yields"])
        finally:
            a.close()
            b.close()
        assert yields > 1000
    for i in (0, 1):
        assert replies[16][i] == replies[0][i]
    assert replies[0][0].count(b"VA ") > 100


# ---------------------------------------------------------------------------
# binary pipelines: a run of GETKQ ... NOOP is the binary multiget
# ---------------------------------------------------------------------------

def binary_script():
    """Binary stores, a GETKQ run, and mixed single-key requests, in one
    send; every reply comes back before the final NOOP's."""
    from test_binary import (req, set_req, delta_req, GETKQ, GETK, GATQ,
                             TOUCH, DELETE, INCR, SETQ, APPEND, STAT, NOOP)
    import struct
    ttl = struct.pack(">I", 100)
    out = [set_req(b"b%d" % i, b"v%d" % i * (i % 9), flags=i, op=SETQ)
           for i in range(0, 60, 2)]
    out += [req(GETKQ, b"b%d" % i, opaque=i) for i in range(60)]
    for i in range(0, 60, 5):
        k = b"b%d" % i
        out += [req(GETK, k), req(GATQ, k, ttl), req(TOUCH, k, ttl),
                delta_req(INCR, b"n%d" % i, 1, initial=i),
                req(APPEND, k, value=b"+"), req(DELETE, b"b%d" % (i + 1)),
                req(STAT, b"bogus")]
    out.append(req(NOOP, opaque=0xfeed))
    return b"".join(out)


def run_binary_script(s):
    from test_binary import rsp, NOOP
    end = rsp(NOOP, opaque=0xfeed)
    with s.conn(timeout=20) as c:
        c.send(binary_script())
        return c.read_until(end)


def test_binary_replies_identical_for_every_batch_size(server_factory):
    results = {}
    for batch in SETTINGS:
        results[batch] = run_binary_script(
            server_factory("-o", "prefetch_batch=%d" % batch))
    # CAS values differ by nothing here: each server numbers from scratch
    assert results[0].count(b"\x81\x0d\x00") == 30   # GETKQ hits
    for batch in SETTINGS[1:]:
        assert results[batch] == results[0], "prefetch_batch=%d" % batch


def test_binary_getkq_run_is_one_batch(server_factory):
    from test_binary import Bin, req, set_req, rsp, GETKQ, NOOP
    s = server_factory("-o", "prefetch_batch=16")
    with s.conn() as c:
        b = Bin(c)
        for i in range(16):
            b.cas_of(set_req(b"g%d" % i, b"x"))
        before = dict(b.stat())
        b.send(b"".join(req(GETKQ, b"g%d" % i) for i in range(16)) +
               req(NOOP, opaque=1))
        for _ in range(16):
            assert b.packet()[0][1] == GETKQ
        assert b.packet()[4] == rsp(NOOP, opaque=1)
        after = dict(b.stat())
    assert int(after["prefetch_batches"]) - \
        int(before["prefetch_batches"]) == 1
    assert int(after["prefetch_keys"]) - int(before["prefetch_keys"]) == 16
