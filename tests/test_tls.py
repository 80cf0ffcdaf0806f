"""TLS (-Z): handshakes, every protocol over TLS, notls: listeners, client
certificates, refresh_certs, and the clients that get it wrong.

Certificates are made here with the openssl command: a CA, a server
certificate it signs, a client certificate it signs, and a second server
certificate to rotate to.
"""

import socket
import ssl
import struct
import subprocess
import time

import pytest
from pymemcache.client.base import Client

from conftest import (Conn, ConnClosed, free_port, wait_seconds_pass,
                      tls_client_context)

# TLS sessions ride on each engine's reads and writes.
pytestmark = pytest.mark.engine


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   capture_output=True)


def make_cert(d, name, cn, ca="ca"):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", name + ".key",
            "-out", name + ".csr", "-subj", "/CN=" + cn, cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt",
            "-CAkey", ca + ".key", "-CAcreateserial", "-out", name + ".crt",
            "-days", "2", cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca",
            cwd=d)
    make_cert(d, "server", "localhost")
    make_cert(d, "server2", "rotated.example")
    make_cert(d, "client", "client-alice")
    for f in d.iterdir():
        f.chmod(0o644)          # the reference drops root (-u) first
    return d


def tls_flags(certs, *extra):
    opts = "ssl_chain_cert=%s,ssl_key=%s" % (certs / "server.crt",
                                             certs / "server.key")
    for e in extra:
        opts += "," + e
    return ["-Z", "-o", opts]


@pytest.fixture
def tls_server(server_factory, certs):
    return server_factory(*tls_flags(certs))


def peer_cn(sock):
    der = sock.getpeercert(binary_form=True)
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout",
                          "-subject"], input=der, capture_output=True,
                         check=True).stdout.decode()
    return out.strip().split("CN", 1)[1].lstrip(" =")


# --------------------------------------------------------------------------
# every protocol over TLS
# --------------------------------------------------------------------------

def test_text_commands_over_tls(tls_server):
    with tls_server.conn() as c:
        c.call(b"set k 5 0 3\r\nabc\r\n", b"STORED\r\n")
        c.call(b"get k\r\n", b"VALUE k 5 3\r\nabc\r\nEND\r\n")
        c.call(b"append k 0 0 2\r\nde\r\n", b"STORED\r\n")
        c.call(b"set n 0 0 2\r\n10\r\n", b"STORED\r\n")
        c.call(b"incr n 5\r\n", b"15\r\n")
        c.call(b"get k n missing\r\n",
               b"VALUE k 5 5\r\nabcde\r\nVALUE n 0 2\r\n15\r\nEND\r\n")
        c.call(b"delete n\r\n", b"DELETED\r\n")
        c.call(b"mn\r\n", b"MN\r\n")


def test_meta_and_pipelines_over_tls(tls_server):
    with tls_server.conn() as c:
        # many requests in one TLS record, replies in order
        c.send(b"".join(b"ms m%d 2 T0\r\nv%d\r\n" % (i, i % 10)
                        for i in range(200)))
        for _ in range(200):
            assert c.readline() == b"HD\r\n"
        c.send(b"".join(b"mg m%d v\r\n" % i for i in range(200)) + b"mn\r\n")
        for i in range(200):
            assert c.readline() == b"VA 2\r\n"
            assert c.readline() == b"v%d\r\n" % (i % 10)
        assert c.readline() == b"MN\r\n"


@pytest.mark.v1645      # 1.6.18 hangs here (fixed in memcached 1.6.39)
def test_large_values_cross_many_records(tls_server):
    """A value much larger than a TLS record (16 KB) and than the read
    buffer, in and out, followed at once by the next request."""
    big = bytes(range(256)) * 2000          # 512000 bytes
    with tls_server.conn() as c:
        c.send(b"set big 0 0 %d\r\n%s\r\nget big\r\n" % (len(big), big))
        assert c.readline() == b"STORED\r\n"
        assert c.readline() == b"VALUE big 0 %d\r\n" % len(big)
        assert c.read_exact(len(big) + 2) == big + b"\r\n"
        assert c.readline() == b"END\r\n"


def test_binary_protocol_over_tls(tls_server):
    def pkt(op, key=b"", val=b"", extra=b""):
        return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extra), 0,
                           0, len(key) + len(extra) + len(val), 7, 0) \
            + extra + key + val
    with tls_server.conn() as c:
        c.send(pkt(0x01, b"bk", b"hello", struct.pack(">II", 9, 0)))
        hdr = c.read_exact(24)
        assert hdr[:2] == b"\x81\x01" and hdr[6:8] == b"\0\0"
        c.send(pkt(0x00, b"bk"))
        hdr = c.read_exact(24)
        body = c.read_exact(struct.unpack(">I", hdr[8:12])[0])
        assert hdr[6:8] == b"\0\0" and body == struct.pack(">I", 9) + b"hello"


def test_pymemcache_with_tls_context(tls_server):
    client = Client(("127.0.0.1", tls_server.port),
                    tls_context=tls_client_context())
    try:
        client.set("pk", b"pv", expire=0)
        assert client.get("pk") == b"pv"
        assert client.get_many(["pk", "nope"]) == {"pk": b"pv"}
        assert client.incr("ctr", 1) is None
    finally:
        client.close()


def test_openssl_s_client_speaks_to_it(tls_server, certs):
    out = subprocess.run(
        ["openssl", "s_client", "-quiet", "-connect",
         "127.0.0.1:%d" % tls_server.port, "-CAfile", str(certs / "ca.crt"),
         "-verify_return_error"],
        input=b"set s 0 0 2\r\nok\r\nget s\r\nquit\r\n", capture_output=True,
        timeout=10)
    assert out.stdout == b"STORED\r\nVALUE s 0 2\r\nok\r\nEND\r\n"
    assert b"verify return:1" in out.stderr


@pytest.mark.mcpm       # memcached counts a refusal after accept() nowhere
def test_tls13_only_refuses_tls12(server_factory, certs):
    s = server_factory(*tls_flags(certs, "ssl_min_version=3"))
    old = tls_client_context(maximum_version=ssl.TLSVersion.TLSv1_2)
    with pytest.raises(ssl.SSLError):
        Conn(s.port, tls=old)
    with s.conn() as c:
        assert c.sock.version() == "TLSv1.3"
    assert s.stats()["ssl_handshake_errors"] == "1"


# --------------------------------------------------------------------------
# listeners, settings, stats
# --------------------------------------------------------------------------

def test_notls_listener_next_to_a_tls_one(server_factory, certs):
    plain = free_port()
    s = server_factory(*tls_flags(certs),
                       "-l", "notls:127.0.0.1:%d" % plain)
    with Conn(plain) as c:
        c.call(b"set x 0 0 1\r\n1\r\n", b"STORED\r\n")
    with s.conn() as c:
        c.call(b"get x\r\n", b"VALUE x 0 1\r\n1\r\nEND\r\n")
    # TLS bytes on the plain listener are a bad command line, not a
    # handshake
    raw = socket.create_connection(("127.0.0.1", plain), timeout=5)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        tls_client_context().wrap_socket(raw)
    raw.close()
    s.check_alive()


def test_notls_needs_tls(run):
    r = run("-l", "notls:127.0.0.1:%d" % free_port())
    assert r.returncode != 0
    assert b"'notls' option is valid only when SSL is enabled" in r.stderr


def client_cert(certs):
    return tls_client_context(str(certs / "client.crt"),
                              str(certs / "client.key"))


def test_stats_settings_show_the_ssl_options(server_factory, certs):
    s = server_factory(*tls_flags(certs, "ssl_verify_mode=2",
                                  "ssl_ca_cert=%s" % (certs / "ca.crt"),
                                  "ssl_wbuf_size=32", "ssl_session_cache",
                                  "ssl_min_version=3",
                                  "ssl_ciphers=ECDHE+AESGCM"),
                       tls=client_cert(certs))
    st = s.stats("settings")
    want = {
        "ssl_enabled": "yes",
        "ssl_chain_cert": str(certs / "server.crt"),
        "ssl_key": str(certs / "server.key"),
        "ssl_verify_mode": "3",
        "ssl_keyformat": "1",
        "ssl_ciphers": "ECDHE+AESGCM",
        "ssl_ca_cert": str(certs / "ca.crt"),
        "ssl_wbuf_size": "32768",
        "ssl_session_cache": "yes",
        "ssl_kernel_tls": "no",
        "ssl_min_version": "tlsv1.3",
    }
    assert {k: st[k] for k in want} == want
    keys = list(st)
    assert keys.index("ssl_enabled") < keys.index("ssl_min_version")


def test_plain_server_shows_ssl_off(mc):
    st = mc.stats("settings")
    assert [(k, st[k]) for k in st if k.startswith("ssl_")] == [
        ("ssl_enabled", "no"), ("ssl_chain_cert", "(null)"),
        ("ssl_key", "(null)"), ("ssl_verify_mode", "0"),
        ("ssl_keyformat", "1"), ("ssl_ciphers", "NULL"),
        ("ssl_ca_cert", "NULL"), ("ssl_wbuf_size", "16384"),
        ("ssl_session_cache", "no"), ("ssl_kernel_tls", "no"),
        ("ssl_min_version", "tlsv1.2")]
    assert not [k for k in mc.stats() if k.startswith("ssl_")]


def test_refresh_certs_without_tls(mc):
    with mc.conn() as c:
        c.call(b"refresh_certs\r\n", b"Error TLS not enabled\r\n")


@pytest.mark.v1645
def test_stats_lines_with_tls(tls_server):
    st = tls_server.stats()
    keys = list(st)
    i = keys.index("ssl_handshake_errors")
    assert keys[i:i + 3] == ["ssl_handshake_errors", "ssl_proto_errors",
                             "time_since_server_cert_refresh"]
    assert keys[i - 1] == "log_watchers"
    assert st["ssl_handshake_errors"] == "0"
    assert st["ssl_proto_errors"] == "0"
    assert "ssl_new_sessions" not in st


def test_session_cache_counts_new_sessions(server_factory, certs):
    """TLS 1.3 with the cache: a full handshake issues two tickets (two
    new sessions), a resumed one a single ticket, as memcached counts."""
    s = server_factory(*tls_flags(certs, "ssl_session_cache"))
    with s.conn() as c:             # after the readiness probe's two
        assert c.stats()["ssl_new_sessions"] == "4"
        session = c.sock.session
    with Conn(s.port, tls=s.tls, session=session) as resumed:
        assert resumed.sock.session_reused
        assert resumed.stats()["ssl_new_sessions"] == "5"


# --------------------------------------------------------------------------
# client certificates
# --------------------------------------------------------------------------

@pytest.mark.mcpm       # memcached counts a refusal after accept() nowhere
def test_verify_mode_2_requires_a_client_certificate(server_factory, certs):
    s = server_factory(*tls_flags(certs, "ssl_verify_mode=2",
                                  "ssl_ca_cert=%s" % (certs / "ca.crt")),
                       tls=client_cert(certs))
    # no certificate: refused (TLS 1.3 tells the client on its first read)
    with pytest.raises((ssl.SSLError, ConnClosed, ConnectionError)):
        with Conn(s.port, tls=tls_client_context()) as c:
            c.req(b"version\r\n")
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\nz\r\n", b"STORED\r\n")
        assert c.stats()["ssl_handshake_errors"] == "1"


@pytest.mark.v1645      # listener prefixes newer than 1.6.18
def test_mtls_and_btls_listeners(server_factory, certs):
    """memcached's -l prefixes: an "mtls:" listener requires a client
    certificate whatever ssl_verify_mode says, a "btls:" one asks for
    none even under ssl_verify_mode=2; the -Z listener keeps the mode."""
    mtls, btls = free_port(), free_port()
    ca = "ssl_ca_cert=%s" % (certs / "ca.crt")
    s = server_factory(*tls_flags(certs, ca), "-l", "mtls:127.0.0.1:%d" % mtls)
    with s.conn() as c:                             # -Z's: none asked
        c.call(b"mn\r\n", b"MN\r\n")
    with Conn(mtls, tls=client_cert(certs)) as c:
        c.call(b"mn\r\n", b"MN\r\n")
    with pytest.raises((ssl.SSLError, ConnClosed, ConnectionError)):
        with Conn(mtls, tls=tls_client_context()) as c:
            c.req(b"version\r\n")
    s = server_factory(*tls_flags(certs, ca, "ssl_verify_mode=2"),
                       "-l", "btls:127.0.0.1:%d" % btls, tls=client_cert(certs))
    with Conn(btls, tls=tls_client_context()) as c:
        c.call(b"mn\r\n", b"MN\r\n")
    with pytest.raises((ssl.SSLError, ConnClosed, ConnectionError)):
        with Conn(s.port, tls=tls_client_context()) as c:
            c.req(b"version\r\n")


@pytest.mark.v1645
@pytest.mark.parametrize("prefix,name", [("mtls", "otls"), ("btls", "btls")])
def test_tls_prefixes_need_tls(run, prefix, name):
    """Refused without -Z in memcached's words ("otls" for mtls, as it
    prints it)."""
    r = run("-l", "%s:127.0.0.1:%d" % (prefix, free_port()))
    assert r.returncode != 0
    assert (b"'%s' option is valid only when SSL is enabled" % name.encode()
            in r.stderr)


def test_verify_mode_1_asks_but_does_not_require(server_factory, certs):
    s = server_factory(*tls_flags(certs, "ssl_verify_mode=1",
                                  "ssl_ca_cert=%s" % (certs / "ca.crt")))
    with s.conn() as c:
        c.call(b"mn\r\n", b"MN\r\n")
    with s.conn(tls=client_cert(certs)) as c:
        c.call(b"mn\r\n", b"MN\r\n")
    assert s.stats()["ssl_handshake_errors"] == "0"


def test_s_client_with_and_without_a_certificate(server_factory, certs):
    s = server_factory(*tls_flags(certs, "ssl_verify_mode=2",
                                  "ssl_ca_cert=%s" % (certs / "ca.crt")),
                       tls=client_cert(certs))

    def s_client(*extra):
        return subprocess.run(
            ["openssl", "s_client", "-quiet", "-connect",
             "127.0.0.1:%d" % s.port, "-CAfile", str(certs / "ca.crt")]
            + list(extra), input=b"mn\r\nquit\r\n", capture_output=True,
            timeout=10)
    good = s_client("-cert", str(certs / "client.crt"), "-key",
                    str(certs / "client.key"))
    assert good.stdout == b"MN\r\n"
    bad = s_client()
    assert bad.stdout == b""
    assert b"certificate required" in bad.stderr


@pytest.mark.mcpm
def test_client_cn_in_stats_conns(server_factory, certs):
    s = server_factory(*tls_flags(certs, "ssl_verify_mode=2",
                                  "ssl_ca_cert=%s" % (certs / "ca.crt")),
                       tls=client_cert(certs))
    with s.conn() as c:
        port = c.sock.getsockname()[1]
        st = c.stats("conns")
    fd = [k.split(":")[0] for k, v in st.items()
          if k.endswith(":addr") and v.endswith(":%d" % port)][0]
    assert st[fd + ":tls_peer_cn"] == "client-alice"


def test_watch_over_tls(tls_server):
    with tls_server.conn() as w:
        w.call(b"watch mutations\r\n", b"OK\r\n")
        with tls_server.conn() as c:
            c.call(b"set wk 0 0 2\r\nhi\r\n", b"STORED\r\n")
        line = w.read_until(b"\n")
        assert line.startswith(b"ts=") and b" key=wk " in line


# --------------------------------------------------------------------------
# refresh_certs
# --------------------------------------------------------------------------

def test_refresh_certs_swaps_the_certificate(server_factory, certs,
                                             tmp_path):
    crt, key = tmp_path / "live.crt", tmp_path / "live.key"
    crt.write_bytes((certs / "server.crt").read_bytes())
    key.write_bytes((certs / "server.key").read_bytes())
    tmp_path.chmod(0o755)
    for f in (crt, key):
        f.chmod(0o644)
    s = server_factory("-Z", "-o", "ssl_chain_cert=%s,ssl_key=%s"
                       % (crt, key))
    with s.conn() as old:
        assert peer_cn(old.sock) == "localhost"
        crt.write_bytes((certs / "server2.crt").read_bytes())
        key.write_bytes((certs / "server2.key").read_bytes())
        old.call(b"refresh_certs\r\n", b"OK\r\n")
        # the session already up keeps working
        old.call(b"mn\r\n", b"MN\r\n")
    with s.conn() as new:
        assert peer_cn(new.sock) == "rotated.example"
    # a key that does not match: the reply says so, the old pair stays
    key.write_bytes((certs / "client.key").read_bytes())
    with s.conn() as c:
        line = c.req(b"refresh_certs\r\n")
        assert line.startswith(b"Error validating the certificate: ") or \
            line.startswith(b"Error loading the key: ")
        assert line.endswith(b"\r\n")
    with s.conn() as c:
        assert peer_cn(c.sock) == "rotated.example"
    key.write_bytes(b"not a key\n")
    with s.conn() as c:
        line = c.req(b"refresh_certs\r\n")
        assert line.startswith(b"Error loading the key: %s : "
                               % str(key).encode())


# --------------------------------------------------------------------------
# clients that get it wrong
# --------------------------------------------------------------------------

def test_plaintext_client_on_a_tls_port(tls_server):
    c = Conn(tls_server.port)
    c.send(b"get foo\r\n")
    with pytest.raises((ConnClosed, ConnectionError)):
        c.read_until(b"\r\n", timeout=5)
    c.close()
    assert tls_server.stats()["ssl_handshake_errors"] == "1"
    tls_server.check_alive()


@pytest.mark.mcpm
def test_stalled_handshake_is_closed_and_blocks_nobody(server_factory,
                                                       certs):
    s = server_factory("-t", "1", *tls_flags(certs,
                                             "ssl_handshake_timeout=1"))
    stalled = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    half = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    # the one worker still serves everybody else
    for i in range(5):
        with s.conn() as c:
            c.call(b"mn\r\n", b"MN\r\n")
    t0 = time.monotonic()
    assert stalled.recv(1) == b""
    assert half.recv(1) == b""
    assert time.monotonic() - t0 < 5
    stalled.close()
    half.close()
    assert s.stats()["ssl_handshake_errors"] == "2"


@pytest.mark.mcpm       # ssl_handshake_timeout is memcached-pm's
def test_a_finished_handshake_is_not_timed_out(server_factory, certs):
    """A client that finished its handshake and sends nothing for longer
    than ssl_handshake_timeout stays connected: the handshake ends on the
    client's last flight, not on its first request (the server counted
    it finished only once data came, and closed idle clients; memcached's
    maxconns test, over TLS, lost a third of its connections so)."""
    s = server_factory(*tls_flags(certs, "ssl_handshake_timeout=1"))
    with s.conn() as idle, s.conn() as clock:
        wait_seconds_pass(clock, 3)
        idle.call(b"mn\r\n", b"MN\r\n")
        assert clock.stats()["ssl_handshake_errors"] == "0"


@pytest.mark.v1645      # ssl_proto_errors is newer than 1.6.18
def test_truncated_record_and_garbage_after_handshake(tls_server):
    # a record header promising 16 KB, then a hang-up
    raw = socket.create_connection(("127.0.0.1", tls_server.port), timeout=5)
    raw.sendall(b"\x16\x03\x01\x40\x00" + b"\x01" * 100)
    raw.close()
    # a finished handshake, then bytes that are not a TLS record
    with tls_server.conn() as c:
        c.call(b"mn\r\n", b"MN\r\n")
        raw_fd = socket.socket(fileno=c.sock.fileno())
        raw_fd.sendall(b"\x17\x03\x03\x00\x10" + b"\xee" * 16)
        with pytest.raises((ssl.SSLError, ConnClosed, ConnectionError)):
            c.read_until(b"\r\n", timeout=5)
        raw_fd.detach()
    tls_server.check_alive()
    st = tls_server.stats()
    assert int(st["ssl_proto_errors"]) >= 1


@pytest.mark.v1645
def test_renegotiation_is_refused(tls_server):
    out = subprocess.run(
        ["openssl", "s_client", "-tls1_2", "-connect",
         "127.0.0.1:%d" % tls_server.port],
        input=b"R\n", capture_output=True, timeout=10)
    assert b"RENEGOTIATING" in out.stdout + out.stderr
    assert b"no renegotiation" in out.stdout + out.stderr
    tls_server.check_alive()


def test_start_errors(run, certs, tmp_path):
    r = run("-Z", "-p", str(free_port()))
    assert r.returncode == 64
    assert b"\nError loading the certificate chain: (null) : " \
        in b"\n" + r.stderr
    r = run("-Z", "-p", str(free_port()), "-o",
            "ssl_chain_cert=%s,ssl_key=%s" % (certs / "server.crt",
                                             tmp_path / "none.key"))
    assert r.returncode == 64
    assert b"\nError loading the key: %s : " % str(
        tmp_path / "none.key").encode() in b"\n" + r.stderr
    r = run("-Z", "-o", "ssl_verify_mode=4")
    assert r.returncode == 1
    assert r.stderr == b"Invalid ssl_verify_mode. Use help to see valid " \
        b"options.\n"
