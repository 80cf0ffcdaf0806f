"""The process as memcached runs it: exit statuses from sysexits.h with
memcached's messages, -u, -d, -r and -c's limits."""

import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import (Conn, VERSION_RE, base_args, binary_has_asan,
                      free_port, wait_for)


def limit(pid, name):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith(name):
                return line[len(name):].split()[0]
    return None


def test_unknown_user_is_ex_nouser(run):
    r = run("-p", str(free_port()), "-u", "no-such-user-here")
    assert r.returncode == 67
    assert r.stderr == b"can't find the user no-such-user-here to switch to\n"


@pytest.mark.v1645      # 1.6.18: "can't run as root without the -u switch"
@pytest.mark.skipif(os.geteuid() != 0, reason="only root must name a user")
def test_root_needs_u(run):
    r = run("-p", str(free_port()), "-u", "")
    assert r.returncode == 64
    assert r.stderr == b"must add '-u root' to start as root\n"


def test_port_in_use_is_ex_oserr(run):
    # every address of both families, as memcached listens on all
    with socket.socket(socket.AF_INET6) as taken:
        taken.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        taken.bind(("::", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = run("-U", "0", "-p", str(port))
    assert r.returncode == 71
    assert r.stderr == b"failed to listen on TCP port %d: Address already " \
        b"in use\n" % port


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a user to switch to")
def test_u_drops_privileges(server_factory):
    s = server_factory("-u", "nobody")
    with open("/proc/%d/status" % s.pid) as f:
        uids = [line.split()[1:] for line in f if line.startswith("Uid:")][0]
    assert set(uids) == {str(65534)}


def test_c_sets_the_file_limit_and_r_the_core_limit(server_factory):
    s = server_factory("-c", "333", "-r")
    assert limit(s.pid, "Max open files") == "333"
    assert limit(s.pid, "Max core file size") == "unlimited"


def wait_version(port, alive=lambda: True):
    """Until a server on port answers `version`; alive() says whether it
    may still come up."""
    def answers():
        try:
            with Conn(port, 2) as c:
                assert VERSION_RE.match(c.req(b"version\r\n"))
                return True
        except OSError:
            assert alive(), "the server is gone"
            return False
    wait_for(answers, what="the server to answer version")


def daemon(binary, tmp_path, *flags):
    pidfile = tmp_path / "mc.pid"
    port = free_port()
    cmd = [os.path.abspath(binary), "-d", "-P", str(pidfile)] + \
        base_args(port) + list(flags)
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=10, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(),
             what="the pid file")
    pid = int(pidfile.read_text())
    wait_version(port)
    return pid, pidfile


def stop(pid):
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: exited(pid), what="the daemon to stop")


def exited(pid):
    """The process has exited: gone, or a zombie its new parent (init, or
    a subreaper) has not yet reaped."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_daemon_moves_to_root_and_detaches(binary, tmp_path):
    pid, pidfile = daemon(binary, tmp_path)
    try:
        assert os.readlink("/proc/%d/cwd" % pid) == "/"
        for fd in (0, 1, 2):
            assert os.readlink("/proc/%d/fd/%d" % (pid, fd)) == "/dev/null"
        assert os.getsid(pid) == pid
    finally:
        stop(pid)
    assert not pidfile.exists()


def test_daemon_with_r_stays_for_its_core(binary, tmp_path):
    pid, _ = daemon(binary, tmp_path, "-r")
    try:
        assert os.readlink("/proc/%d/cwd" % pid) == str(tmp_path)
    finally:
        stop(pid)


def test_bad_option_leaves_nothing_behind(run, tmp_path):
    pidfile = tmp_path / "mc.pid"
    memfile = tmp_path / "items.pm"
    r = run("-p", str(free_port()), "-d", "-P", str(pidfile), "-e",
            str(memfile), "-m", "0")
    assert r.returncode == 64
    assert r.stderr.count(b"\n") == 1
    # -m 0 is 0 MB, as memcached reads it: the item size check says so
    assert r.stderr == (b"Cannot set item size limit higher than 1/2 of "
                        b"memory max.\n")
    assert not pidfile.exists() and not memfile.exists()


@pytest.mark.mcpm
def test_bad_option_keeps_an_existing_memory_file(server_factory, run,
                                                  memfile):
    s = server_factory("-e", memfile, "-m", "32")
    with s.conn() as c:
        c.call(b"set kept 0 0 2\r\nok\r\n", b"STORED\r\n")
    s.stop()
    before = open(memfile, "rb").read(4096), os.path.getsize(memfile)
    r = run("-p", str(free_port()), "-e", memfile, "-m", "32", "-t", "0")
    assert r.returncode == 1
    assert (open(memfile, "rb").read(4096), os.path.getsize(memfile)) == \
        before
    s = server_factory("-e", memfile, "-m", "32")
    with s.conn() as c:
        c.call(b"get kept\r\n", b"VALUE kept 0 2\r\nok\r\nEND\r\n")


def as_nobody(nofile=None, memlock=None):
    """A preexec function: limits, then user nobody."""
    import resource

    def run():
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        if memlock is not None:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (memlock, memlock))
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    return run


@pytest.fixture
def nobody_binary(binary):
    """A copy of the binary that user nobody may run, wherever the build
    lives."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="mcpm-nobody-", dir="/tmp")
    os.chmod(d, 0o755)
    exe = os.path.join(d, os.path.basename(binary))
    shutil.copy(binary, exe)
    os.chmod(exe, 0o755)
    yield exe
    shutil.rmtree(d)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
def test_c_above_the_file_limit_is_ex_oserr(nobody_binary):
    """Without the right to raise its file limit (not root, hard limit
    64), -c 1024 cannot be had: memcached's message and EX_OSERR."""
    r = subprocess.run([nobody_binary, "-U", "0", "-p", str(free_port()),
                        "-c", "1024"], preexec_fn=as_nobody(nofile=64),
                       capture_output=True, timeout=10, cwd="/")
    assert r.returncode == 71
    assert r.stderr == b"failed to set rlimit for open files. Try starting " \
        b"as root or requesting smaller maxconns value.\n"


@pytest.mark.build          # ASan's runtime says mlockall() worked
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
def test_k_warns_when_memory_cannot_be_locked(nobody_binary, tmp_path):
    port = free_port()
    err = tmp_path / "err"
    with open(err, "wb") as f:
        proc = subprocess.Popen([nobody_binary, "-U", "0", "-l", "127.0.0.1",
                                 "-p", str(port), "-k", "-c", "64"],
                                preexec_fn=as_nobody(memlock=0),
                                stdin=subprocess.DEVNULL, stderr=f, cwd="/")
    try:
        wait_version(port, lambda: proc.poll() is None)
    finally:
        proc.terminate()
        proc.wait(10)
    if binary_has_asan(nobody_binary):
        # ASan's runtime intercepts mlockall() and reports success: no
        # shadow memory could be locked anyway
        assert err.read_bytes() == b""
    else:
        assert err.read_bytes().startswith(b"warning: -k invalid, "
                                           b"mlockall() failed: ")


@pytest.mark.parametrize("engine", ["io_uring", "epoll"])
@pytest.mark.parametrize("open_conns", [5, 500])
def test_a_killed_server_refuses_at_once(server_factory, engine, open_conns):
    """After SIGKILL the port refuses connections as soon as the process
    is gone: none is accepted and then reset (an io_uring accept held the
    listening socket for 1-18 ms, while the kernel tore the ring down).
    Every attempt in the 50 ms after the kill is refused."""
    s = server_factory("-o", "event_engine=%s" % engine, "-c", "1024")
    conns = [s.conn() for _ in range(open_conns)]
    for c in conns[:5]:
        c.sync()
    s.proc.kill()
    s.proc.wait()
    attempts, accepted = 0, []
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:
        attempts += 1
        try:
            socket.create_connection(("127.0.0.1", s.port), 0.1).close()
            accepted.append("accepted")
        except ConnectionResetError:
            accepted.append("reset")
        except ConnectionRefusedError:
            pass
    for c in conns:
        c.close()
    assert attempts > 0 and accepted == [], "%d of %d: %s" % (
        len(accepted), attempts, accepted[:5])
