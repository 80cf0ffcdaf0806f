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
"""

import os

import pytest

import crashlib

pytestmark = pytest.mark.mcpm

POINTS = int(os.environ.get("MCPM_CRASH_POINTS", "20"))
SEED = int(os.environ.get("MCPM_CRASH_SEED", "4242"))


def test_sigkill_loses_nothing_acknowledged(server_factory, memfile):
    flags = ("-e", memfile, "-m", "64")

    def start(strict):
        extra = ("-o", "memory_file_strict") if strict else ()
        return server_factory(*flags + extra)

    tally = crashlib.new_tally()
    try:
        clients, server = crashlib.run_crash_points(start, POINTS, SEED,
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
        SEED, POINTS, "\n".join(problems[:30]))
    assert tally["points"] == POINTS
    assert tally["lost_writes"] == 0 and tally["torn_values"] == 0
    assert tally["torn_dropped"] == 0
