"""The soak's checker (bench/soak_model.py): what each reply may be, given
what the client was told; and the soak itself failing, with its seed,
when a key written once is changed behind its back.

The soak's own runs against every fault are in script/test (a minute,
under both builds) and in bench/soak.py for an hour; these tests keep its
judge honest: a checker that allowed everything would pass those too.
"""

import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from soak_model import ABSENT, Fixed, Keys, Shared, View, Violation  # noqa
from soak_proto import Op  # noqa

CALM = View(rec=False, evict=False)
RECOVERING = View(rec=True, evict=False)
EVICTING = View(rec=False, evict=True)


def op(kind, key=b"k", value=b"", t=100.0, **kw):
    o = Op(kind, [key], value, **kw)
    o.sent, o.done = t, t + 0.01
    return o


def told(keys, kind, reply, view=CALM, key=b"k", **kw):
    keys.judge(key, op(kind, key, **kw), reply, view)


def hit(value, flags=0, cas=7):
    return (flags, value, cas)


def verdict(fn):
    with pytest.raises(Violation) as e:
        fn()
    return e.value.kind


def test_a_read_must_give_the_last_acknowledged_value():
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v1")
    told(k, "set", "STORED", value=b"v2")
    told(k, "get", hit(b"v2"))
    assert verdict(lambda: told(k, "get", hit(b"v1"))) == "stale"
    assert verdict(lambda: told(k, "get", None)) == "lost"
    assert verdict(lambda: told(k, "get", hit(b"v2x"))) == "wrong"
    assert verdict(lambda: told(k, "get", hit(b"v2", flags=3))) == "wrong"


def test_a_deleted_key_never_comes_back():
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v")
    told(k, "delete", "DELETED")
    assert verdict(lambda: told(k, "get", hit(b"v"))) == "resurrected"
    assert verdict(lambda: told(k, "get", hit(b"v"), RECOVERING)) == \
        "resurrected"


def test_a_write_in_flight_at_a_crash_may_show_until_the_recovery_ends():
    """The crash can leave the write's item beside the older copy it was
    replacing; the recovery may link the older first.  So while it runs a
    read may give the old value and a later one the new; once it has
    ended (or the key was written again) the value stays as read."""
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v1")
    k.in_flight(b"k", op("replace", value=b"v2"))
    told(k, "get", hit(b"v1"), RECOVERING)
    told(k, "touch", "TOUCHED", RECOVERING, exptime=0)
    told(k, "get", hit(b"v2"), RECOVERING)
    assert verdict(lambda: told(k, "get", hit(b"v1"), RECOVERING)) == \
        "stale"
    # the recovery's end may link it after a read during the recovery
    # found the old value (seeds 809, 810); after a read once it is over,
    # nothing shows late
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v1")
    k.in_flight(b"k", op("replace", value=b"v2"))
    told(k, "get", hit(b"v1"), RECOVERING)
    told(k, "get", hit(b"v2"))
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v1")
    k.in_flight(b"k", op("replace", value=b"v2"))
    told(k, "get", hit(b"v1"))
    assert verdict(lambda: told(k, "get", hit(b"v2"))) == "stale"
    # a write refused meanwhile changes nothing (seed 706: a cas EXISTS)
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v1")
    k.in_flight(b"k", op("append", value=b"+x"))
    told(k, "get", hit(b"v1"), RECOVERING)
    told(k, "cas", "EXISTS", RECOVERING, value=b"v9", cas=3)
    told(k, "add", "NOT_STORED", RECOVERING, value=b"v8")
    told(k, "get", hit(b"v1+x"), RECOVERING)
    # nor after a write acknowledged since
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v1")
    k.in_flight(b"k", op("replace", value=b"v2"))
    told(k, "get", hit(b"v1"), RECOVERING)
    told(k, "set", "STORED", RECOVERING, value=b"v3")
    assert verdict(lambda: told(k, "get", hit(b"v2"), RECOVERING)) == \
        "stale"


def test_a_miss_while_recovering_changes_nothing():
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v")
    told(k, "get", None, RECOVERING)
    told(k, "incr", "NOT_FOUND", RECOVERING, delta=1)
    told(k, "append", "NOT_STORED", RECOVERING, value=b"x")
    told(k, "get", hit(b"v"))
    assert k.counts["miss:recovering"] == 1
    # and once the recovery is over, the key must be there
    assert verdict(lambda: told(k, "get", None)) == "lost"


def test_a_delete_while_recovering_deletes_all_the_same():
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v")
    told(k, "delete", "NOT_FOUND", RECOVERING)
    told(k, "get", None)
    assert verdict(lambda: told(k, "get", hit(b"v"))) == "resurrected"


def test_an_add_while_recovering_stores_over_what_is_not_back():
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"old")
    told(k, "add", "STORED", RECOVERING, value=b"new")
    told(k, "get", hit(b"new"))
    assert verdict(lambda: told(k, "get", hit(b"old"))) == "stale"


def test_a_write_whose_reply_never_came_happened_or_not():
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v1")
    k.in_flight(b"k", op("set", value=b"v2"))
    told(k, "get", hit(b"v1"))          # it did not happen
    told(k, "get", hit(b"v1"))
    assert verdict(lambda: told(k, "get", hit(b"v2"))) == "stale"
    k2 = Keys([b"k"])
    told(k2, "set", "STORED", value=b"v1")
    k2.in_flight(b"k", op("set", value=b"v2"))
    told(k2, "get", hit(b"v2"))         # it did, and stays
    assert verdict(lambda: told(k2, "get", hit(b"v1"))) == "stale"


def test_append_prepend_and_counters():
    k = Keys([b"k"], counters=[b"n"])
    told(k, "set", "STORED", value=b"b")
    told(k, "append", "STORED", value=b"c")
    told(k, "prepend", "STORED", value=b"a")
    told(k, "get", hit(b"abc"))
    told(k, "set", "STORED", key=b"n", value=b"10")
    told(k, "incr", 15, key=b"n", delta=5)
    told(k, "decr", 0, key=b"n", delta=20)
    told(k, "get", hit(b"0 "), key=b"n")    # decr pads, as memcached
    assert verdict(lambda: told(k, "incr", 3, key=b"n", delta=1)) == "wrong"
    assert verdict(lambda: told(k, "get", hit(b"15"), key=b"n")) == "stale"


def test_cas_stores_only_over_what_it_saw():
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v")
    told(k, "gets", hit(b"v", cas=41))
    assert verdict(lambda: told(k, "cas", "EXISTS", value=b"w",
                                cas=41)) == "wrong"
    told(k, "cas", "EXISTS", value=b"w", cas=40)
    told(k, "cas", "STORED", value=b"w", cas=41)
    assert verdict(lambda: told(k, "cas", "STORED", value=b"x",
                                cas=41)) == "wrong"


def test_a_ttl_allows_a_miss_only_in_its_window():
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v", exptime=2, t=100.0)
    told(k, "get", hit(b"v"), t=100.3)
    assert verdict(lambda: told(k, "get", None, t=100.4)) == "lost"
    told(k, "get", None, t=101.0)       # the clock may be a second ahead
    assert verdict(lambda: told(k, "get", hit(b"v"), t=105.0)) == \
        "resurrected"
    assert k.counts["miss:expired"] == 1


def test_eviction_allows_a_miss_and_memcacheds_append_refusal():
    k = Keys([b"k"])
    told(k, "set", "STORED", value=b"v")
    told(k, "append", "NOT_STORED", EVICTING, value=b"x")
    told(k, "get", hit(b"v"), EVICTING)
    told(k, "get", None, EVICTING)
    assert verdict(lambda: told(k, "get", hit(b"v"))) == "resurrected"


def test_written_once_keys():
    f = Fixed()
    f.add(b"p", 3, b"v")
    assert f.judge(b"p", (3, b"v", 9), CALM) is None
    assert f.judge(b"p", None, RECOVERING) == "recovering"
    assert verdict(lambda: f.judge(b"p", None, CALM)) == "lost"
    assert verdict(lambda: f.judge(b"p", (3, b"w", 9), CALM)) == "wrong"
    f.volatile()                        # capacity, after a restart
    assert f.judge(b"p", None, CALM) == "volatile"
    assert verdict(lambda: f.judge(b"p", (3, b"v", 9), CALM)) == \
        "resurrected"


def test_shared_counters_never_go_back():
    sh = Shared([b"s"], threading.Lock())
    sh.sending(b"s")
    sh.answered(b"s", True)             # 1 acknowledged
    sh.sending(b"s")                    # 1 more in flight
    assert sh.judge(b"s", 1, 2, hit(b"2"), CALM, False) == 2
    sh.seen(b"s", 2)
    assert sh.floor(b"s") == 2          # served once: it stays
    assert verdict(lambda: sh.judge(b"s", 2, 2, hit(b"1"), CALM,
                                    False)) == "stale"
    assert verdict(lambda: sh.judge(b"s", 2, 2, hit(b"3"), CALM,
                                    False)) == "wrong"
    assert verdict(lambda: sh.judge(b"s", 2, 2, None, CALM, False)) == \
        "lost"


@pytest.mark.parametrize("how,kind", [("lose", "lost"), ("change", "wrong")])
def test_the_soak_reports_a_key_changed_behind_its_back(binary, how, kind):
    """At its first event the soak deletes (or changes) a key written
    once without telling its checker: it must fail, naming the key, the
    seed and the schedule."""
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "soak.py"),
         "--seed", "7", "--duration", "20", "--preload", "2000",
         "--clients", "1", "--faults", "crawl", "--every", "0.2-0.3",
         "--inject", how],
        env=dict(os.environ, MCPM_BIN=binary), capture_output=True,
        text=True, timeout=120)
    # A failed run keeps the node's files (a 256 MB memory file) for
    # whoever looks into it: this one is made to fail, so they go.
    kept = re.search(r"the node's files and logs are kept in (\S+)",
                     out.stdout)
    if kept:
        shutil.rmtree(kept.group(1), ignore_errors=True)
    assert out.returncode == 1, out.stdout + out.stderr
    assert kept, out.stdout
    assert re.search(r"SOAK FAILED at [\d.]+ s: verifier \(text wire\): "
                     r"%s: b'p:1000'" % kind, out.stdout), out.stdout
    assert "replay: python3 bench/soak.py --seed 7 " in out.stdout
    assert re.search(r"inject %s p:1000" % how, out.stdout), out.stdout
