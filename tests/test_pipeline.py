"""noreply on every command that honours it, pipelines, big multigets."""

import random

import pytest

# Pipelines are read and answered in passes of the event loop, over items,
# with the pass's replies held for its sync under power durability.
pytestmark = [pytest.mark.engine, pytest.mark.storage, pytest.mark.durability]


def test_noreply_storage_commands(conn):
    conn.send(b"set n 0 0 1 noreply\r\n1\r\n"
              b"add n 0 0 1 noreply\r\n2\r\n"           # NOT_STORED hidden
              b"add m 0 0 1 noreply\r\nm\r\n"
              b"replace zz 0 0 1 noreply\r\nx\r\n"      # NOT_STORED hidden
              b"replace m 4 0 2 noreply\r\nmm\r\n"
              b"append n 0 0 1 noreply\r\n0\r\n"
              b"prepend n 0 0 1 noreply\r\n9\r\n"
              b"append zz 0 0 1 noreply\r\n0\r\n"       # NOT_STORED hidden
              b"cas n 0 0 1 1 noreply\r\nx\r\n"         # EXISTS hidden
              b"cas zz 0 0 1 1 noreply\r\nx\r\n")       # NOT_FOUND hidden
    conn.call(b"get n m zz\r\n",
              b"VALUE n 0 3\r\n910\r\nVALUE m 4 2\r\nmm\r\nEND\r\n")


def test_noreply_cas_success(conn):
    conn.call(b"set c 0 0 1\r\nx\r\n", b"STORED\r\n")
    block = conn.get_block(b"gets c\r\n")
    cas = int(block.split(b"\r\n")[0].split()[-1])
    conn.send(b"cas c 0 0 1 %d noreply\r\ny\r\n" % cas)
    conn.call(b"get c\r\n", b"VALUE c 0 1\r\ny\r\nEND\r\n")


def test_noreply_other_commands(conn):
    conn.send(b"set n 0 0 1\r\n5\r\n")
    assert conn.readline() == b"STORED\r\n"
    conn.send(b"incr n 5 noreply\r\n"
              b"decr n 1 noreply\r\n"
              b"incr nokey 1 noreply\r\n"
              b"decr nokey 1 noreply\r\n"
              b"touch n 100 noreply\r\n"
              b"touch nokey 100 noreply\r\n"
              b"set d 0 0 1 noreply\r\nd\r\n"
              b"delete d noreply\r\n"
              b"delete d noreply\r\n"
              b"verbosity 0 noreply\r\n")
    # 10 needed a new item, 9 was then written in place: "9 "
    conn.call(b"get n d\r\n", b"VALUE n 0 2\r\n9 \r\nEND\r\n")


def test_noreply_swallows_errors(conn):
    conn.call(b"set s 0 0 3\r\nabc\r\n", b"STORED\r\n")
    big = b"x" * 2000000
    conn.send(b"incr s 1 noreply\r\n"
              b"decr s 1 noreply\r\n"
              b"incr s abc noreply\r\n"
              b"touch s abc noreply\r\n"
              b"set big 0 0 %d noreply\r\n%s\r\n"
              b"cache_memlimit 1 noreply\r\n"
              b"flush_all abc noreply\r\n" % (len(big), big))
    conn.call(b"get s big\r\n", b"VALUE s 0 3\r\nabc\r\nEND\r\n")


def test_noreply_bad_data_chunk_swallowed(conn):
    # "xy\r" is the block (bad chunk, hidden); the "\n" left over is a
    # blank line, whose error is not hidden (1.6.18: ERROR)
    conn.send(b"set a 0 0 1 noreply\r\nxy\r\n")
    assert conn.readline() in (b"ERROR\r\n",
                               b"CLIENT_ERROR bad command line format\r\n")
    conn.call(b"get a\r\n", b"END\r\n")


def test_noreply_only_as_last_token(conn):
    # "noreply" where the key goes is just a key
    conn.call(b"set noreply 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"get noreply\r\n", b"VALUE noreply 0 1\r\nx\r\nEND\r\n")


def test_pipeline_100_mixed(conn):
    rnd = random.Random(42)
    req, want = [], []
    model = {}
    for i in range(100):
        key = b"p%d" % rnd.randrange(10)
        op = rnd.choice(["set", "get", "delete", "incr", "add", "prepend"])
        if op == "set":
            val = b"%d" % rnd.randrange(1000)
            req.append(b"set %s 0 0 %d\r\n%s\r\n" % (key, len(val), val))
            model[key] = val
            want.append(b"STORED\r\n")
        elif op == "add":
            req.append(b"add %s 0 0 1\r\n7\r\n" % key)
            if key in model:
                want.append(b"NOT_STORED\r\n")
            else:
                model[key] = b"7"
                want.append(b"STORED\r\n")
        elif op == "prepend":
            req.append(b"prepend %s 0 0 1\r\n3\r\n" % key)
            if key in model:
                model[key] = b"3" + model[key]
                want.append(b"STORED\r\n")
            else:
                want.append(b"NOT_STORED\r\n")
        elif op == "get":
            req.append(b"get %s\r\n" % key)
            if key in model:
                want.append(b"VALUE %s 0 %d\r\n%s\r\nEND\r\n"
                            % (key, len(model[key]), model[key]))
            else:
                want.append(b"END\r\n")
        elif op == "delete":
            req.append(b"delete %s\r\n" % key)
            want.append(b"DELETED\r\n" if model.pop(key, None) is not None
                        else b"NOT_FOUND\r\n")
        else:
            req.append(b"incr %s 1\r\n" % key)
            if key not in model:
                want.append(b"NOT_FOUND\r\n")
            else:
                v = (int(model[key]) + 1) % (1 << 64)
                new = b"%d" % v
                # in place when it fits: padded to the old length
                if len(new) < len(model[key]):
                    new = new.ljust(len(model[key]))
                model[key] = new
                want.append(b"%d\r\n" % v)
    conn.call(b"".join(req), b"".join(want))


def test_pipeline_across_packets(conn):
    reqs = b"".join(b"set k%d 0 0 2\r\nv%d\r\n" % (i, i % 10)
                    for i in range(200))
    for i in range(0, len(reqs), 7):
        conn.send(reqs[i:i + 7])
    assert conn.read_exact(200 * 8) == b"STORED\r\n" * 200


def test_multiget_500(conn):
    keys = [b"mk%d" % i for i in range(500)]
    conn.send(b"".join(b"set %s %d 0 %d noreply\r\n%s\r\n" % (k, i, len(k), k)
                       for i, k in enumerate(keys) if i % 3))
    conn.call(b"get " + b" ".join(keys) + b"\r\n",
              b"".join(b"VALUE %s %d %d\r\n%s\r\n" % (k, i, len(k), k)
                       for i, k in enumerate(keys) if i % 3) + b"END\r\n")


def test_multiget_large_values(conn):
    val = bytes(random.Random(3).getrandbits(8) for _ in range(100000))
    conn.send(b"".join(b"set lv%d 0 0 %d noreply\r\n%s\r\n"
                       % (i, len(val), val) for i in range(20)))
    conn.call(b"get " + b" ".join(b"lv%d" % i for i in range(20)) + b"\r\n",
              b"".join(b"VALUE lv%d 0 %d\r\n%s\r\n" % (i, len(val), val)
                       for i in range(20)) + b"END\r\n", timeout=20)


@pytest.mark.parametrize("n", [1, 4096])
def test_gets_multi_in_pipeline(conn, n):
    conn.send(b"".join(b"set g%d 0 0 1 noreply\r\nx\r\n" % i
                       for i in range(n)))
    conn.send(b"get g0\r\n" * 50)
    assert conn.read_exact(50 * 22) == b"VALUE g0 0 1\r\nx\r\nEND\r\n" * 50
