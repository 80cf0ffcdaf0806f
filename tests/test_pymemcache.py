"""A real client library (pymemcache) against the server."""

import pytest
from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient

# A client's calls on items.
pytestmark = pytest.mark.storage


@pytest.fixture
def client(mc):
    c = Client(("127.0.0.1", mc.port), connect_timeout=5, timeout=5,
               default_noreply=False)
    c.flush_all()
    yield c
    c.close()


def test_set_get(client):
    assert client.set("a", b"hello", expire=0, flags=3) is True
    assert client.get("a") == b"hello"
    assert client.get("missing") is None
    assert client.get("missing", default=b"d") == b"d"


def test_get_many(client):
    client.set_many({"k%d" % i: b"v%d" % i for i in range(50)})
    got = client.get_many(["k%d" % i for i in range(60)])
    assert got == {"k%d" % i: b"v%d" % i for i in range(50)}


def test_add_replace(client):
    assert client.add("a", b"1") is True
    assert client.add("a", b"2") is False
    assert client.replace("b", b"1") is False
    assert client.replace("a", b"3") is True
    assert client.get("a") == b"3"


def test_append_prepend(client):
    assert client.append("a", b"x") is False
    client.set("a", b"mid")
    assert client.append("a", b">") is True
    assert client.prepend("a", b"<") is True
    assert client.get("a") == b"<mid>"


def test_gets_cas(client):
    client.set("a", b"1")
    val, cas = client.gets("a")
    assert val == b"1" and int(cas) > 0
    assert client.cas("a", b"2", cas) is True
    assert client.cas("a", b"3", cas) is False
    assert client.cas("missing", b"3", cas) is None
    assert client.get("a") == b"2"
    many = client.gets_many(["a", "missing"])
    assert list(many) == ["a"] and many["a"][0] == b"2"


def test_delete(client):
    client.set("a", b"1")
    assert client.delete("a") is True
    assert client.delete("a") is False
    client.set_many({"x": b"1", "y": b"2"})
    assert client.delete_many(["x", "y"]) is True
    assert client.get_many(["x", "y"]) == {}


def test_incr_decr(client):
    assert client.incr("n", 1) is None
    client.set("n", b"10")
    assert client.incr("n", 5) == 15
    assert client.decr("n", 20) == 0
    assert client.incr("n", 2 ** 64 - 1) == 2 ** 64 - 1
    assert client.incr("n", 1) == 0


def test_touch(client):
    assert client.touch("a", 10) is False
    client.set("a", b"1")
    assert client.touch("a", 10) is True
    assert client.touch("a", -1) is True
    assert client.get("a") is None


def test_flush_all(client):
    client.set("a", b"1")
    assert client.flush_all() is True
    assert client.get("a") is None


def test_stats(client):
    client.set("a", b"1")
    client.get("a")
    st = client.stats()
    assert st[b"curr_connections"] >= 1
    assert st[b"get_hits"] >= 1
    assert isinstance(st[b"version"], bytes)
    settings = client.stats("settings")
    assert settings[b"maxbytes"] == 64 * 1024 * 1024


def test_version_and_large_value(client):
    assert client.version().startswith(b"1.6.")
    big = bytes(range(256)) * 4000
    assert client.set("big", big) is True
    assert client.get("big") == big


def test_hash_client_two_servers(server_factory):
    a, b = server_factory(), server_factory()
    hc = HashClient([("127.0.0.1", a.port), ("127.0.0.1", b.port)],
                    connect_timeout=5, timeout=5, default_noreply=False)
    try:
        data = {"key%d" % i: b"val%d" % i for i in range(200)}
        hc.set_many(data)
        assert hc.get_many(list(data)) == data
        assert hc.incr("key_missing", 1) is None
        hc.set("n", b"1")
        assert hc.incr("n", 1) == 2
        assert hc.delete("key0") is True
        assert hc.get("key0") is None
    finally:
        hc.close()
    # both servers got a share of the keys
    ia, ib = int(a.stats()["curr_items"]), int(b.stats()["curr_items"])
    assert ia + ib == 200 and ia > 20 and ib > 20
