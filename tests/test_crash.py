"""Crash consistency of the PMEM tier (issue 4).

Four client threads write, replace, add, delete and incr their own keys
while the server runs; it is SIGKILLed at a random moment and restarted on
the same file, MCPM_CRASH_POINTS times (default 20).  The killed runs
alternate between the power-loss simulator (-o memory_file_strict: only
what was flushed reaches the file) and a plain process crash.  After each
restart every key must hold its last acknowledged state or the one of the
request in flight, byte-exact and checksum-valid (tests/crashlib.py has
the model), no item may be dropped as torn, and the checksum pass must
have run.  MCPM_CRASH_SEED replays a run's choices (the timing of the
threads is the machine's).

The SIGKILL test runs under tier_policy=pmem and, with half the points,
under tier_policy=cache: there the checks' reads copy items into DRAM, so
later writes, deletes and incrs go through the copies, and must still
reach the file before their reply.  Fewer points land in the middle of
a recovery and in the middle of the hash table's growth.
"""

import os
import subprocess

import pytest

import crashlib
from test_durability import diskfile  # noqa: F401  (a fixture)

pytestmark = pytest.mark.mcpm

POINTS = int(os.environ.get("MCPM_CRASH_POINTS", "20"))
SEED = int(os.environ.get("MCPM_CRASH_SEED", "4242"))


def starter(server_factory, flags, **kw):
    """start(strict) for run_crash_points(): a server on the file with
    `flags`, under the power-loss simulator when strict."""
    def start(strict):
        extra = ("-o", "memory_file_strict") if strict else ()
        return server_factory(*flags + extra, **kw)
    return start


def crash_points(start, points, **kw):
    """run_crash_points() with the seed to replay named on a failure, and
    what every run must show: every point run, nothing acknowledged lost,
    nothing torn.  (clients, the last server, the tally)."""
    tally = crashlib.new_tally()
    try:
        clients, server = crashlib.run_crash_points(start, points, SEED,
                                                    tally, **kw)
    except (crashlib.CrashError, pytest.fail.Exception) as e:
        pytest.fail("%s\n(replay: MCPM_CRASH_SEED=%d; tally %s)"
                    % (e, SEED, tally))
    assert tally["points"] == points
    assert tally["lost_writes"] == 0 and tally["torn_values"] == 0
    assert tally["torn_dropped"] == 0
    return clients, server, tally


@pytest.mark.parametrize("policy", ["pmem", "cache"])
def test_sigkill_loses_nothing_acknowledged(server_factory, memfile, policy):
    flags = ("-m", "64", "-o", "memory_file=%s,tier_policy=%s"
             % (memfile, policy))
    points = POINTS if policy == "pmem" else max(1, POINTS // 2)
    start = starter(server_factory, flags)
    tally = crashlib.new_tally()
    try:
        clients, server = crashlib.run_crash_points(start, points, SEED,
                                                    tally)
        # After all the crashes, a clean stop: the next start skips the
        # checksum pass and finds every key exactly as the last check did.
        live = tally["live"]
        server.assert_clean_stop()
        server = start(False)
        problems = crashlib.check_all(server.port, clients, tally)
        problems += crashlib.check_recovery_stats(server.stats(), live, 0)
        if tally["live"] != live:
            problems.append("%d keys live after the clean restart, %d "
                            "before" % (tally["live"], live))
    except (crashlib.CrashError, pytest.fail.Exception) as e:
        pytest.fail("%s\n(replay: MCPM_CRASH_SEED=%d; tally %s)"
                    % (e, SEED, tally))
    finally:
        crashlib.write_summary(tally)
    assert not problems, "seed %d, clean restart after %d points:\n%s" % (
        SEED, points, "\n".join(problems[:30]))
    assert tally["points"] == points
    assert tally["lost_writes"] == 0 and tally["torn_values"] == 0
    assert tally["torn_dropped"] == 0


def test_sigkill_on_a_disk_file_loses_nothing_acknowledged(server_factory,
                                                          diskfile):
    """The memory file in a directory on a disk, its default durability
    there (process, no flushes): a SIGKILL keeps every acknowledged write,
    the page cache holding what was not written back.  (Every other point
    runs the power-loss simulator, which models power whatever the
    file.)"""
    flags = ("-m", "64", "-o", "memory_file=%s,tier_policy=pmem" % diskfile)
    crash_points(starter(server_factory, flags), max(2, POINTS // 10))


def test_sigkill_during_recovery_under_writes(server_factory, memfile):
    """A crash while the node reads its file back after a crash, the four
    clients writing all along (a key not read back yet answers as missing:
    crashlib's lenient model), then a full restart: nothing acknowledged
    lost, nothing deleted back, nothing torn."""
    flags = ("-m", "64", "-o", "memory_file=%s,tier_policy=pmem" % memfile)
    # one thread resting after each page: the recovery lasts the epoch
    slow = ("-o", "recovery_threads=1,recovery_pace_us=300000")
    points = max(2, POINTS // 4)
    _, _, tally = crash_points(
        starter(server_factory, flags), points,
        recover=starter(server_factory, flags + slow, recovered=False))
    # (a full cache's writers read pages back themselves, so a recovery
    # may end before its epoch's first stats)
    assert tally["epochs_in_recovery"] >= points // 2, tally


def test_sigkill_during_growth(server_factory, memfile):
    """A crash while the hash table grows: a filler links new keys all
    through each epoch on a table started small, the kill armed once the
    table is seen growing, so that the workers split buckets when it
    lands; then the checks of every other crash point."""
    flags = ("-m", "256", "-o", "memory_file=%s,tier_policy=pmem,hashpower=13"
             % memfile)
    points = max(2, POINTS // 6)
    _, _, tally = crash_points(starter(server_factory, flags), points,
                               grow=True)
    assert tally["epochs_growing"] >= points // 2, tally


# --------------------------------------------------------------------------
# A power cut at every flush of a scripted sequence
# --------------------------------------------------------------------------

BIG = b"B" * 600000             # chunked: its pieces are flushed first

# (request, reply, the keys' values after it: None = absent)
SCRIPT = [
    (b"set a 0 0 2\r\na1\r\n", b"STORED\r\n", {"a": b"a1"}),
    (b"set b 0 0 2\r\nb1\r\n", b"STORED\r\n", {"b": b"b1"}),
    (b"set n 0 0 1\r\n5\r\n", b"STORED\r\n", {"n": b"5"}),
    (b"set a 0 0 2\r\na2\r\n", b"STORED\r\n", {"a": b"a2"}),
    (b"delete b\r\n", b"DELETED\r\n", {"b": None}),
    (b"incr n 10\r\n", b"15\r\n", {"n": b"15"}),
    (b"append a 0 0 1\r\nx\r\n", b"STORED\r\n", {"a": b"a2x"}),
    (b"set big 0 0 %d\r\n%s\r\n" % (len(BIG), BIG), b"STORED\r\n",
     {"big": BIG}),
    (b"touch a 1000\r\n", b"TOUCHED\r\n", {}),
    (b"set big 0 0 1\r\ns\r\n", b"STORED\r\n", {"big": b"s"}),
    (b"add b 0 0 2\r\nb2\r\n", b"STORED\r\n", {"b": b"b2"}),
]
KEYS = ("a", "b", "n", "big")


def state_after(step):
    """The keys' values once SCRIPT[:step] has run."""
    state = dict.fromkeys(KEYS)
    for _, _, change in SCRIPT[:step]:
        state.update(change)
    return state


def read_state(server):
    with server.conn() as c:
        return {k: c.get_block(b"get %s\r\n" % k.encode()) for k in KEYS}


def as_state(blocks):
    """get replies -> values (None when the key is absent)."""
    out = {}
    for k, block in blocks.items():
        if block == b"END\r\n":
            out[k] = None
        else:
            head, rest = block.split(b"\r\n", 1)
            out[k] = rest[:int(head.split()[3])]
    return out


def run_until_cut(server):
    """Run SCRIPT one request at a time; the number of replies read before
    the server died (or len(SCRIPT) if it never did)."""
    done = 0
    try:
        with server.conn() as c:
            for req, reply, _ in SCRIPT:
                c.call(req, reply)
                done += 1
    except Exception as e:      # the connection died with the server
        try:
            server.proc.wait(5)
        except subprocess.TimeoutExpired:
            raise AssertionError("step %d failed, server alive: %r"
                                 % (done, e))
    return done


def test_power_cut_at_every_flush(server_factory, memfile):
    """memory_file_crash_after=N cuts the power before the N-th flush
    after start-up: N = 1, 2, ... walks the cut through every step of the
    commit order of set, replace, delete, incr, append, a chunked set,
    touch and add.  After each cut the restarted server must hold either
    the state before the request in flight or the one after it.

    The file is not DAX, so the server flushes by group commit: a flush
    point is each range a pass's sync writes (a cut can land inside one
    sync, as inside one msync's writes), and a pass that replaced items
    syncs their deaths in a second round.

    The clock tick commits the superblock (the time the server last ran)
    each second, a flush point too: it may take the cut anywhere in the
    script, which only moves the cut, or before the server has answered
    on a slow start (ASan on a busy machine), a cut before the first
    request."""
    cuts = replaced = 0
    for n in range(1, 400):
        if os.path.exists(memfile):
            os.unlink(memfile)
        s = server_factory("-e", memfile, "-m", "16", "-o",
                           "memory_file_strict,memory_file_crash_after=%d"
                           % n, may_die=True)
        # cut before it answered, the server took no request in flight
        in_flight = 1 if s.alive() else 0
        done = run_until_cut(s)
        if done == len(SCRIPT) and s.alive():
            # No flush left to cut (its clean stop would be the next).
            s.proc.kill()
            s.proc.wait()
            break
        s.proc.wait(10)
        assert s.proc.returncode == -9, "cut %d: exit %s" % (
            n, s.proc.returncode)
        cuts += 1
        r = server_factory("-e", memfile, "-m", "16")
        got = as_state(read_state(r))
        st = r.stats()
        ok_states = [state_after(done), state_after(done + in_flight)]
        assert got in ok_states, (
            "cut at flush %d, %d requests acknowledged: got %r, expected "
            "%r or %r" % (n, done, got, ok_states[0], ok_states[1]))
        assert st["recovery_dropped_torn"] == "0", "cut %d" % n
        replaced += int(st["recovery_dropped_replaced"])
        r.assert_clean_stop()
    # Every request flushes at least once; the chunked set and the page
    # cuts more.
    assert cuts > len(SCRIPT), "the script flushed only %d times" % cuts
    # Some cuts fell between a new copy's commit and the old one's death
    # (between a pass's two syncs).
    assert replaced > 0
