"""The meta-memcache client (PyPI `meta-memcache`) against the server.

These drive the server through the client's high-level API only, so they
check that a real meta-protocol client understands every reply it gets:
get/set/delete/touch, counters, CAS writes, stale-while-revalidate with a
StalePolicy and recache (R) and lease (N) herd control.
"""

import pytest
from meta_memcache import (
    CacheClient,
    Key,
    LeasePolicy,
    RecachePolicy,
    ServerAddress,
    SetMode,
    StalePolicy,
    connection_pool_factory_builder,
)

# A client's calls on items.
pytestmark = pytest.mark.storage


@pytest.fixture(scope="module")
def client(mc):
    c = CacheClient.cache_client_from_servers(
        servers=[ServerAddress(host="127.0.0.1", port=mc.port)],
        connection_pool_factory_fn=connection_pool_factory_builder(
            recv_timeout=3, connection_timeout=3),
    )
    return c


@pytest.fixture
def cache(client, mc):
    with mc.conn() as c:
        c.call(b"flush_all\r\n", b"OK\r\n")
    yield client
    mc.check_alive()


def raw_get(mc, key):
    """The stored bytes of `key` via a raw mg, or None."""
    with mc.conn() as c:
        c.send(b"mg %s v\r\n" % key.encode())
        head = c.readline()
        if head == b"EN\r\n":
            return None
        n = int(head.split()[1])
        return c.read_exact(n + 2)[:-2]


def test_get_set_delete(cache, mc):
    assert cache.get("nokey") is None
    assert cache.set("k1", "value one", ttl=0)
    assert cache.get("k1") == "value one"
    assert raw_get(mc, "k1") == b"value one"
    assert cache.set("k2", {"a": [1, 2]}, ttl=100)
    assert cache.get("k2") == {"a": [1, 2]}
    assert cache.set("k3", 12345, ttl=0)
    assert cache.get("k3") == 12345
    assert cache.set("k4", b"\x00\x01raw", ttl=0)
    assert cache.get("k4") == b"\x00\x01raw"
    got = cache.multi_get(["k1", "k3", "nokey"])
    assert got == {Key("k1"): "value one", Key("k3"): 12345,
                   Key("nokey"): None}
    assert cache.delete("k1") is True
    assert cache.delete("k1") is False
    assert cache.invalidate("k1") is True
    assert cache.get("k1") is None


def test_set_modes_and_cas(cache):
    assert cache.set("m", "a", ttl=0, set_mode=SetMode.ADD)
    assert not cache.set("m", "b", ttl=0, set_mode=SetMode.ADD)
    assert not cache.set("none", "b", ttl=0, set_mode=SetMode.REPLACE)
    assert cache.set("m", "c", ttl=0, set_mode=SetMode.REPLACE)
    assert cache.refill("m", "d", ttl=0) is False
    assert cache.refill("fresh", "d", ttl=0) is True
    value, cas = cache.get_cas("m")
    assert value == "c" and cas > 0
    new_cas = cache.set_cas("m", "e", ttl=0, cas_token=cas)
    assert new_cas is not None and new_cas > cas
    # the old CAS no longer matches
    assert not cache.set("m", "f", ttl=0, cas_token=cas)
    assert cache.get("m") == "e"
    assert cache.delete("m", cas_token=cas) is False
    assert cache.delete("m", cas_token=new_cas) is True


def test_touch(cache, mc):
    assert cache.touch("nokey", ttl=10) is False
    assert cache.set("t", "v", ttl=0)
    assert cache.touch("t", ttl=100) is True
    with mc.conn() as c:
        line = c.req(b"mg t t\r\n")
    assert line in (b"HD t100\r\n", b"HD t99\r\n")
    assert cache.get("t", touch_ttl=500) == "v"
    with mc.conn() as c:
        line = c.req(b"mg t t\r\n")
    assert line in (b"HD t500\r\n", b"HD t499\r\n")


def test_counters(cache, mc):
    assert cache.delta("cnt", 1) is False
    assert cache.delta_and_get("cnt", 1) is None
    assert cache.delta_initialize("cnt", 5, initial_value=10,
                                  initial_ttl=0) is True
    assert raw_get(mc, "cnt") == b"10"
    assert cache.delta("cnt", 5) is True
    assert cache.delta_and_get("cnt", 1) == 16
    assert cache.delta_and_get("cnt", -6) == 10
    # decrement stops at zero
    assert cache.delta_and_get("cnt", -100) == 0
    assert cache.delta_initialize_and_get("c2", 3, initial_value=7,
                                          initial_ttl=100) == 7
    assert cache.delta_initialize_and_get("c2", 3, initial_value=7,
                                          initial_ttl=100) == 10
    # the counter reads back as the client's plain string
    assert cache.get("c2") == "10"


def test_stale_while_revalidate(cache, client, mc):
    policy = StalePolicy(mark_stale_on_deletion_ttl=30,
                         mark_stale_on_cas_mismatch=True)
    assert cache.set("swr", "old", ttl=0)
    _, cas = cache.get_cas("swr")
    # invalidation marks the item stale instead of deleting it
    assert cache.delete("swr", stale_policy=policy) is True
    with mc.conn() as c:
        line = c.req(b"mg swr t\r\n")
    assert line in (b"HD t30 X W\r\n", b"HD t29 X W\r\n")
    # the winner was handed out above: every client now reads the stale
    # value, nobody else gets a miss
    assert cache.get("swr") == "old"
    # a late writer with the old CAS stores, but the item stays stale
    assert cache.set("swr", "late", ttl=0, cas_token=cas,
                     stale_policy=policy)
    assert cache.get("swr") == "late"
    with mc.conn() as c:
        line = c.req(b"mg swr c\r\n")
    assert line.startswith(b"HD c") and line.endswith(b" Z X\r\n")
    cur = int(line.split()[1][1:])
    # the refill with the current CAS makes it fresh again
    assert cache.set("swr", "new", ttl=0, cas_token=cur)
    with mc.conn() as c:
        assert c.req(b"mg swr v\r\n") == b"VA 3\r\n"
        assert c.readline() == b"new\r\n"


def test_stale_first_reader_wins(cache):
    policy = StalePolicy(mark_stale_on_deletion_ttl=30)
    assert cache.set("s2", "old", ttl=0)
    assert cache.invalidate("s2", stale_policy=policy) is True
    # the first reader gets the win: the client reports a miss so that it
    # recomputes; the next readers get the stale value
    assert cache.get("s2") is None
    assert cache.get("s2") == "old"
    assert cache.get("s2") == "old"


def test_recache_policy(cache):
    assert cache.set("rc", "v", ttl=100)
    recache = RecachePolicy(ttl=30)
    # plenty of TTL left: a normal hit
    assert cache.get("rc", recache_policy=recache) == "v"
    assert cache.set("rc2", "v", ttl=10)
    # under the recache TTL: the first caller wins (sees a miss) ...
    assert cache.get("rc2", recache_policy=recache) is None
    # ... the others keep the value while the winner refills
    assert cache.get("rc2", recache_policy=recache) == "v"
    assert cache.set("rc2", "refilled", ttl=100)
    assert cache.get("rc2", recache_policy=recache) == "refilled"


def test_lease(cache):
    lease = LeasePolicy(ttl=30, miss_retries=2, miss_retry_wait=0.01,
                        miss_max_retry_wait=0.01)
    waits = []
    # the first caller wins the lease on a miss and refills
    value, cas = cache.get_or_lease_cas("lz", lease_policy=lease)
    assert value is None and cas is not None
    # a second caller loses, retries, then gives up with a miss
    assert cache.get_or_lease("lz", lease_policy=lease,
                              lease_wait_fn=waits.append) is None
    assert len(waits) == 1
    assert cache.set("lz", "filled", ttl=0, cas_token=cas)
    assert cache.get_or_lease("lz", lease_policy=lease) == "filled"
