"""How the suite, and the tools it shares with bench/, wait: on a
condition with a deadline, never for a fixed time.  No pytest here, so
that bench/'s scripts (Debian's python3) can use it too."""

import time


def wait_for(cond, timeout=10.0, what=None):
    """Call cond() until it returns a true value, and return that value.

    This is the one way a test waits for the server: on a condition (a
    stats value, a reply, a closed descriptor, a log line) with a
    deadline, never for a fixed time.  The polls start 5 ms apart and back
    off to 100 ms.  After `timeout` seconds the test fails, naming `what`
    (or cond) and the last value cond returned."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        got = cond()
        if got:
            return got
        left = deadline - time.monotonic()
        if left <= 0:
            name = what or getattr(cond, "__name__", repr(cond))
            raise AssertionError("waited %.1f s for %s; last: %r"
                                 % (timeout, name, got))
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.1)
