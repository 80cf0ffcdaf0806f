"""Command-line handling: bad flags fail loudly, good ones take effect,
signals stop the server cleanly."""

import os
import re
import signal
import socket
import subprocess

import pytest

from conftest import free_port, wait_for

BAD = [
    ["-p", "70000"],
    ["-t", "0"],
    ["-m", "abc"],
    ["-o", "bogus"],
    ["-o", "hashpower=40"],
    ["--no-such-flag"],
    ["-I", "1"],
    ["-f", "0.5"],
    ["-o", "hot_lru_pct=70,warm_lru_pct=70"],
]


def bad_args(args):
    return ["-U", "0", "-l", "127.0.0.1", "-p", str(free_port())] + args


@pytest.mark.parametrize("args", BAD, ids=lambda a: " ".join(a))
def test_bad_flag_fails_with_message(run, args):
    if args[0] == "-p":
        r = run("-U", "0", "-l", "127.0.0.1", *args)
    else:
        r = run(*bad_args(args))
    assert r.returncode != 0
    assert r.stderr.strip(), "no message on stderr"


# memcached's exit status for each: 1 where its option parser returns
# (the value is read at once), EX_USAGE (64) where the rule is checked
# after all options are read (sizes, ports, protocols, LRU shares).
BAD_STATUS = {
    "-p 70000": 64, "-t 0": 1, "-m abc": 64, "-o bogus": 1,
    "-o hashpower=40": 1, "--no-such-flag": 1, "-I 1": 64, "-f 0.5": 1,
    "-o hot_lru_pct=70,warm_lru_pct=70": 64,
}


@pytest.mark.parametrize("args", BAD, ids=lambda a: " ".join(a))
def test_bad_flag_exit_status(run, args):
    if args[0] == "-p":
        r = run("-U", "0", "-l", "127.0.0.1", *args)
    else:
        r = run(*bad_args(args))
    assert r.returncode == BAD_STATUS[" ".join(args)], r.stderr


def test_version_flag(run):
    r = run("-V")
    assert r.returncode == 0
    assert re.match(rb"^\S+ 1\.6\.\d+\S*\n$", r.stdout), r.stdout


def test_help_flag(run):
    r = run("-h")
    assert r.returncode == 0
    for flag in (b"-p", b"-m", b"-c", b"-t", b"-I", b"-o"):
        assert flag in r.stdout


@pytest.mark.engine         # the workers close what they hold
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly(server_factory, sig):
    s = server_factory()
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
        s.signal(sig)
        assert c.wait_closed(10)
    assert s.wait(10) == 0


def test_many_flags_accepted(server_factory):
    s = server_factory(
        "-c", "100", "-t", "2", "-R", "5", "-B", "ascii", "-f", "1.1",
        "-n", "32", "-I", "2m", "-m", "32", "-M", "-C", "-A", "-b", "64",
        "-v", "-o",
        "hashpower=12,idle_timeout=100,lru_maintainer,lru_crawler,"
        "hot_lru_pct=10,warm_lru_pct=20,temporary_ttl=10,slab_reassign,"
        "slab_automove=2,no_hashexpand,maxconns_fast,hash_algorithm=murmur3,"
        "lru_crawler_sleep=10,lru_crawler_tocrawl=5,"
        "hot_max_factor=0.3,warm_max_factor=1.5,tail_repair_time=60,modern")
    st = s.stats("settings")
    assert st["binding_protocol"] == "ascii"
    assert st["item_size_max"] == str(2 * 1024 * 1024)
    assert st["slab_automove"] == "2"
    assert st["temporary_ttl"] == "10" and st["temp_lru"] == "yes"
    assert st["hot_lru_pct"] == "10" and st["warm_lru_pct"] == "20"
    assert st["reqs_per_event"] == "5"
    assert st["verbosity"] == "1"
    assert st["shutdown_command"] == "yes"
    assert st["hashpower_init"] == "12"
    assert st["tail_repair_time"] == "60"


def test_vv_and_no_lru_maintainer(server_factory):
    s = server_factory("-vv", "-o", "no_lru_maintainer,no_lru_crawler,"
                       "no_slab_reassign")
    st = s.stats("settings")
    assert st["lru_maintainer_thread"] == "no"
    assert st["lru_crawler"] == "no"
    assert st["slab_reassign"] == "no"
    assert st["verbosity"] == "2"
    s.check_alive()


def start_raw(binary, args):
    cmd = [binary] + args
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop_raw(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def test_unix_socket(binary, tmp_path):
    unix_socket_serves(binary, tmp_path, [])


@pytest.mark.mcpm
@pytest.mark.parametrize("engine", ["epoll", "io_uring"])
def test_unix_socket_on_each_engine(binary, tmp_path, engine):
    unix_socket_serves(binary, tmp_path, ["-o", "event_engine=" + engine])


def unix_socket_serves(binary, tmp_path, extra):
    path = str(tmp_path / "mc.sock")
    proc = start_raw(binary, ["-s", path, "-a", "0600", "-U", "0"] + extra)

    def accepting():
        assert proc.poll() is None, proc.stderr.read()
        u = socket.socket(socket.AF_UNIX)
        u.settimeout(5)
        try:
            u.connect(path)         # bound and listening
            return u
        except (FileNotFoundError, ConnectionRefusedError):
            u.close()
            return None
    try:
        with wait_for(accepting, what="the unix socket to accept") as u:
            assert os.stat(path).st_mode & 0o777 == 0o600
            u.sendall(b"set a 0 0 1\r\nx\r\nget a\r\n")
            got = b""
            while not got.endswith(b"END\r\n"):
                chunk = u.recv(4096)
                assert chunk
                got += chunk
            assert got == b"STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n"
    finally:
        assert stop_raw(proc) == 0
