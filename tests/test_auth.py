"""Authentication: -Y (ascii auth, a `set` whose data is "user password")
and -S (SASL PLAIN over the binary protocol).

memcached-pm reads SASL users from the file MEMCACHED_SASL_PWDB names
("user:password" lines); Debian's memcached is built without that and
asks Cyrus SASL, so for the reference the same users go into a sasldb
(saslpasswd2) named by a SASL_CONF_PATH configuration.  Both variables
are given to both servers.
"""

import signal
import struct
import subprocess

import pytest

from conftest import free_port, wait_for

# The exchange comes before any command, read as it arrives: credentials
# split across reads, the close after a refusal.
pytestmark = pytest.mark.engine

USERS = {"alice": "secret", "bob": "pw2"}


@pytest.fixture
def authfile(tmp_path):
    path = tmp_path / "auth"
    path.write_text("".join("%s:%s\n" % kv for kv in USERS.items()))
    tmp_path.chmod(0o755)
    path.chmod(0o644)
    return path


@pytest.fixture
def ascii_server(server_factory, authfile):
    return server_factory("-Y", str(authfile))


def login(c, user="alice", password="secret"):
    data = ("%s %s" % (user, password)).encode()
    return c.req(b"set auth 0 0 %d\r\n%s\r\n" % (len(data), data))


# --------------------------------------------------------------------------
# -Y
# --------------------------------------------------------------------------

def test_everything_waits_for_authentication(ascii_server):
    with ascii_server.conn() as c:
        for cmd in (b"get foo\r\n", b"version\r\n", b"stats\r\n",
                    b"mg foo v\r\n", b"set a b c\r\n", b"flush_all\r\n"):
            c.call(cmd, b"CLIENT_ERROR unauthenticated\r\n")


def test_a_good_pair_authenticates(ascii_server):
    with ascii_server.conn() as c:
        assert login(c) == b"STORED\r\n"
        c.call(b"get auth\r\n", b"END\r\n")     # nothing was stored
        c.call(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n")
        c.call(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n")
        st = c.stats()
        assert (st["auth_cmds"], st["auth_errors"]) == ("1", "0")
    with ascii_server.conn() as c:          # per connection
        c.call(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n")
        assert login(c, "bob", "pw2") == b"STORED\r\n"
        c.call(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n")


def test_a_wrong_pair_fails_and_stays_out(ascii_server):
    with ascii_server.conn() as c:
        assert login(c, "alice", "wrong") == \
            b"CLIENT_ERROR authentication failure\r\n"
        c.call(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n")
        assert login(c, "alice", "secre") == \
            b"CLIENT_ERROR authentication failure\r\n"
        assert login(c, "alicex", "secret") == \
            b"CLIENT_ERROR authentication failure\r\n"
        assert login(c, "bob", "secret") == \
            b"CLIENT_ERROR authentication failure\r\n"
        assert login(c) == b"STORED\r\n"
        st = c.stats()
        assert (st["auth_cmds"], st["auth_errors"]) == ("5", "4")


def test_malformed_exchanges(ascii_server):
    with ascii_server.conn() as c:
        c.call(b"set x 0 0 5\r\nalice\r\n",
               b"CLIENT_ERROR bad authentication token format\r\n")
        c.call(b"set x 0 0 12\r\nalice secretXX",
               b"CLIENT_ERROR bad command line termination\r\n")
        c.call(b"set x 0 0 abc\r\n", b"CLIENT_ERROR unauthenticated\r\n")
        # noreply does not silence it
        c.call(b"set x 0 0 12 noreply\r\nalice secret\r\n", b"STORED\r\n")


@pytest.mark.v1645
def test_1_6_45_rules(ascii_server):
    with ascii_server.conn() as c:
        # a password is everything after the first space
        assert login(c, "alice", "secret x") == \
            b"CLIENT_ERROR authentication failure\r\n"
        c.call(b"set x 0 0 16385\r\n", b"CLIENT_ERROR auth token too long\r\n")
    with ascii_server.conn() as c:
        c.send(b"quit\r\n")             # too short to be the set: closed
        assert c.wait_closed()
    with ascii_server.conn() as c:
        c.send(b"x" * 3000)             # no line at all
        assert c.wait_closed()


@pytest.mark.mcpm
def test_pipelined_exchange(ascii_server):
    """memcached 1.6.18 answers one line per read here; each request of a
    pipeline is answered in turn."""
    with ascii_server.conn() as c:
        c.send(b"get a\r\nset x 0 0 12\r\nalice secret\r\nset k 0 0 1\r\n"
               b"1\r\nget k\r\n")
        assert c.readline() == b"CLIENT_ERROR unauthenticated\r\n"
        assert c.readline() == b"STORED\r\n"
        assert c.readline() == b"STORED\r\n"
        assert c.readline() == b"VALUE k 0 1\r\n"
        assert c.readline() == b"1\r\n"
        assert c.readline() == b"END\r\n"


def test_credentials_longer_than_any_buffer(ascii_server):
    with ascii_server.conn() as c:
        big = b"alice " + b"s" * 16000
        c.call(b"set x 0 0 %d\r\n%s\r\n" % (len(big), big),
               b"CLIENT_ERROR authentication failure\r\n")
        assert login(c) == b"STORED\r\n"


def test_sighup_reads_the_file_again(ascii_server, authfile):
    authfile.write_text("carol:new\n")
    ascii_server.signal(signal.SIGHUP)

    def carol_logs_in():
        with ascii_server.conn() as c:
            return login(c, "carol", "new") == b"STORED\r\n"
    wait_for(carol_logs_in, what="SIGHUP to reload the file")
    with ascii_server.conn() as c:
        assert login(c) == b"CLIENT_ERROR authentication failure\r\n"


@pytest.mark.mcpm
def test_sighup_keeps_the_table_when_the_file_breaks(ascii_server, authfile):
    authfile.write_text("no colon here\n")
    ascii_server.signal(signal.SIGHUP)
    # the reload has run and said why
    wait_for(lambda: "malformed entry" in ascii_server.stderr(),
             what="SIGHUP to reload the file")
    with ascii_server.conn() as c:
        assert login(c) == b"STORED\r\n"


def test_stats_settings_name_the_file(ascii_server, authfile):
    with ascii_server.conn() as c:
        assert login(c) == b"STORED\r\n"
        st = c.stats("settings")
    assert st["auth_enabled_ascii"] == str(authfile)
    assert st["auth_enabled_sasl"] == "no"
    assert st["binding_protocol"] == "ascii"


def test_bad_auth_files_refuse_to_start(run, tmp_path):
    missing = tmp_path / "none"
    r = run("-Y", str(missing), "-p", str(free_port()))
    assert r.returncode == 1
    assert ("Could not open authfile [%s] for reading, error No such file "
            "or directory" % missing).encode() in r.stderr
    bad = tmp_path / "bad"
    bad.write_text("alice:secret\nnocolon\n")
    bad.chmod(0o644)
    r = run("-Y", str(bad), "-p", str(free_port()))
    assert r.returncode == 1
    assert r.stderr.startswith(b"Authfile [%s] has a malformed entry. Should "
                               b"be 'user:password'" % str(bad).encode())


def test_ascii_auth_excludes_binary_and_udp(run, authfile):
    r = run("-Y", str(authfile), "-B", "binary", "-p", str(free_port()))
    assert (r.returncode, r.stderr) == (64, b"ERROR: You cannot allow the "
                                        b"BINARY protocol while using ascii "
                                        b"authentication tokens.\n")
    r = run("-Y", str(authfile), "-U", str(free_port()), "-p",
            str(free_port()))
    assert (r.returncode, r.stderr) == (64, b"Cannot use UDP with ascii "
                                        b"authentication enabled (-U 0 to "
                                        b"disable)\n")


# --------------------------------------------------------------------------
# -S
# --------------------------------------------------------------------------

@pytest.fixture
def sasl_env(tmp_path):
    pwdb = tmp_path / "pwdb"
    pwdb.write_text("".join("%s:%s\n" % kv for kv in USERS.items()))
    sasldb = tmp_path / "sasldb2"
    for user, password in USERS.items():
        subprocess.run(["saslpasswd2", "-p", "-a", "memcached", "-c", "-f",
                        str(sasldb), user], input=password.encode(),
                       check=True, capture_output=True)
    conf = tmp_path / "sasl2"
    conf.mkdir()
    (conf / "memcached.conf").write_text(
        "mech_list: plain\nsasldb_path: %s\n" % sasldb)
    tmp_path.chmod(0o755)
    for f in (pwdb, sasldb, conf / "memcached.conf"):
        f.chmod(0o644)
    conf.chmod(0o755)
    return {"MEMCACHED_SASL_PWDB": str(pwdb), "SASL_CONF_PATH": str(conf)}


@pytest.fixture(params=["pwdb", "cyrus"])
def sasl_server(request, server_factory, sasl_env, reference):
    """-S with the users in MEMCACHED_SASL_PWDB, or through Cyrus SASL and
    the sasldb (-o sasl_cyrus); the reference always asks Cyrus."""
    if request.param == "cyrus" and not reference:
        return server_factory("-S", "-o", "sasl_cyrus", env=sasl_env)
    return server_factory("-S", env=sasl_env)


def pkt(op, key=b"", val=b"", opaque=0):
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), 0, 0, 0,
                       len(key) + len(val), opaque, 0) + key + val


def answer(c):
    hdr = c.read_exact(24)
    _, op, _, _, _, status, blen, opaque, _ = struct.unpack(">BBHBBHIIQ", hdr)
    return op, status, c.read_exact(blen) if blen else b""


def bin_stats(c, group=b""):
    """A binary STAT: one packet per line, then an empty one."""
    c.send(pkt(0x10, group))
    out = {}
    while True:
        hdr = c.read_exact(24)
        klen, blen = struct.unpack(">H", hdr[2:4])[0], \
            struct.unpack(">I", hdr[8:12])[0]
        body = c.read_exact(blen) if blen else b""
        if klen == 0:
            return out
        out[body[:klen].decode()] = body[klen:].decode()


def auth(c, user="alice", password="secret", mech=b"PLAIN"):
    c.send(pkt(0x21, mech, b"\0%s\0%s" % (user.encode(), password.encode())))
    return answer(c)


AUTH_FAIL = (0x21, 0x20, b"Auth failure.")
AUTH_OK = (0x21, 0x00, b"Authenticated")


def test_sasl_list_mechs(sasl_server):
    with sasl_server.conn() as c:
        c.send(pkt(0x20))
        assert answer(c) == (0x20, 0, b"PLAIN")


def test_sasl_unauthenticated_command_is_refused_and_closed(sasl_server):
    with sasl_server.conn() as c:
        c.send(pkt(0x0b))                # VERSION needs no auth
        assert answer(c)[:2] == (0x0b, 0)
        c.send(pkt(0x00, b"foo"))
        assert answer(c) == (0x00, 0x20, b"Auth failure.")
        assert c.wait_closed()


def test_sasl_plain_success_and_failure(sasl_server):
    with sasl_server.conn() as c:
        assert auth(c, "alice", "wrong") == AUTH_FAIL
        assert auth(c, "nobody", "secret") == AUTH_FAIL
        c.send(pkt(0x21, b"PLAIN", b"alice\0bob\0pw2"))     # as another
        assert answer(c) == AUTH_FAIL
        assert auth(c) == AUTH_OK
        c.send(pkt(0x00, b"foo"))
        assert answer(c) == (0x00, 0x01, b"Not found")
        st = bin_stats(c)
        assert (st["auth_cmds"], st["auth_errors"]) == ("4", "3")
    with sasl_server.conn() as c:
        c.send(pkt(0x21, b"PLAIN", b"bob\0bob\0pw2"))       # as itself
        assert answer(c) == AUTH_OK


@pytest.mark.mcpm
def test_sasl_again_on_the_same_connection(server_factory, sasl_env):
    """Cyrus SASL refuses every other AUTH on a connection that has
    authenticated ("server step after doneflag"); checked against the
    password file, each attempt is judged on its own."""
    s = server_factory("-S", env=sasl_env)
    with s.conn() as c:
        assert auth(c) == AUTH_OK
        assert auth(c, "bob", "pw2") == AUTH_OK
        assert auth(c) == AUTH_OK


def test_sasl_failed_attempt_after_success_logs_out(sasl_server):
    with sasl_server.conn() as c:
        assert auth(c) == AUTH_OK
        assert auth(c, "bob", "nope") == AUTH_FAIL
        c.send(pkt(0x00, b"foo"))
        assert answer(c) == (0x00, 0x20, b"Auth failure.")
        assert c.wait_closed()


def test_sasl_step_and_bad_mechanisms(sasl_server):
    with sasl_server.conn() as c:
        c.send(pkt(0x22, b"PLAIN", b"\0alice\0secret"))  # no AUTH first
        assert answer(c) == (0x22, 0x20, b"Auth failure.")
        assert auth(c, mech=b"CRAM-MD5") == AUTH_FAIL
        c.send(pkt(0x21, b"PLAIN", b"garbage"))
        assert answer(c) == AUTH_FAIL
        c.send(pkt(0x21, b"P" * 33, b"x"))
        assert answer(c) == (0x21, 0x04, b"Invalid arguments")
        assert auth(c) == AUTH_OK


def test_sasl_plain_in_two_steps(sasl_server):
    with sasl_server.conn() as c:
        c.send(pkt(0x21, b"PLAIN"))
        assert answer(c) == (0x21, 0x21, b"")
        c.send(pkt(0x22, b"PLAIN", b"\0alice\0secret"))
        assert answer(c) == (0x22, 0, b"Authenticated")


@pytest.mark.mcpm
def test_sasl_credentials_longer_than_any_buffer(sasl_server):
    with sasl_server.conn() as c:
        assert auth(c, "alice", "s" * 100000) == AUTH_FAIL
        assert auth(c) == AUTH_OK
        c.send(pkt(0x0a))
        assert answer(c) == (0x0a, 0, b"")


@pytest.mark.mcpm
def test_sasl_cyrus_by_default_without_a_password_file(server_factory,
                                                       sasl_env):
    """As Debian's memcached: no MEMCACHED_SASL_PWDB, so Cyrus and its
    sasldb decide."""
    s = server_factory("-S", env={"SASL_CONF_PATH":
                                  sasl_env["SASL_CONF_PATH"]})
    with s.conn() as c:
        assert auth(c, "bob", "pw2") == AUTH_OK


def test_sasl_turns_text_off(sasl_server):
    with sasl_server.conn() as c:
        # a header's worth (24 bytes) of text: its first byte is no magic
        c.send(b"get foo\r\n" * 3)
        assert c.wait_closed()


def test_sasl_settings_and_rules(sasl_server, run):
    with sasl_server.conn() as c:
        assert auth(c) == AUTH_OK
        st = bin_stats(c, b"settings")
    assert st["auth_enabled_sasl"] == "yes"
    assert st["binding_protocol"] == "binary"
    r = run("-S", "-B", "ascii", "-p", str(free_port()))
    assert (r.returncode, r.stderr) == (64, b"ERROR: You cannot allow the "
                                        b"ASCII protocol while using "
                                        b"SASL.\n")
    r = run("-S", "-U", str(free_port()), "-p", str(free_port()))
    assert (r.returncode, r.stderr) == (64, b"ERROR: Cannot enable UDP "
                                        b"while using binary SASL "
                                        b"authentication.\n")


def test_bmemcached_with_plain(sasl_server):
    script = r"""
import sys, bmemcached
port = int(sys.argv[1])
mc = bmemcached.Client(["127.0.0.1:%d" % port], "alice", "secret")
assert mc.set("k", "v")
assert mc.get("k") == "v"
bad = bmemcached.Client(["127.0.0.1:%d" % port], "alice", "nope")
try:
    bad.get("k")
    raise SystemExit("a wrong password was let in")
except bmemcached.exceptions.AuthenticationNotSupported:
    raise SystemExit("PLAIN not offered")
except Exception as e:
    assert "Auth" in type(e).__name__ or "auth" in str(e).lower(), repr(e)
print("ok")
"""
    out = subprocess.run(["/usr/bin/python3", "-c", script,
                          str(sasl_server.port)], capture_output=True,
                         timeout=30)
    assert out.stdout.strip().splitlines()[-1:] == [b"ok"], out
