"""The Debian package (issue 48): script/package builds it, it installs
on this machine, its files, units, user and options file are as the
package says, the installed binary runs as the unit runs it, an upgrade
under a played systemd (tests/svcman.py) keeps every connection and item,
and a purge leaves nothing behind.

One test, in steps, since each needs the one before it; it installs on
the machine and purges after (serial: nothing else runs meanwhile)."""

import grp
import os
import pwd
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import VERSION_RE, Conn, free_port, serves, wait_for
from svcman import ServiceManager

pytestmark = [pytest.mark.mcpm, pytest.mark.serial]

REPO = Path(__file__).resolve().parent.parent
BIN = "/usr/bin/memcached-pm"
UNIT_DIR = Path("/lib/systemd/system")
UNITS = ["memcached-pm.service", "memcached-pm.socket",
         "memcached-pm@.service", "memcached-pm@.socket"]
CONF = Path("/etc/memcached-pm.conf")
STATE = Path("/var/lib/memcached-pm")
RUNTIME = Path("/run/memcached-pm")
USER = "memcached-pm"
# what a purge must leave no trace of
TRACES = [BIN, str(CONF), str(STATE), "/usr/share/doc/memcached-pm",
          "/usr/share/man/man1/memcached-pm.1.gz",
          "/etc/systemd/system/multi-user.target.wants/memcached-pm.service",
          "/etc/systemd/system/sockets.target.wants/memcached-pm.socket",
          "/var/lib/systemd/deb-systemd-helper-enabled/"
          "memcached-pm.service.dsh-also"] + [str(UNIT_DIR / u) for u in UNITS]


def run(*argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def installed_version():
    r = run("dpkg-query", "-W", "-f=${Status} ${Version}", "memcached-pm")
    if r.returncode != 0 or "ok installed" not in r.stdout:
        return None
    return r.stdout.split()[-1]


def configure_version():
    m = re.search(r"^AC_INIT\(\[memcached-pm\], *\[([^]]+)\]",
                  (REPO / "configure.ac").read_text(), re.M)
    return m.group(1)


def build(out):
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck")
    r = run("bash", str(REPO / "script" / "package"), "--out", str(out),
            env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    debs = list(out.glob("memcached-pm_*.deb"))
    assert len(debs) == 1, debs
    return debs[0], r.stdout


def newer(deb, tmp_path):
    """The same build as a newer revision: what `apt install` of a later
    build does to the files (each replaced), with the package's scripts."""
    root = tmp_path / "repack"
    assert run("dpkg-deb", "-R", str(deb), str(root)).returncode == 0
    control = root / "DEBIAN" / "control"
    text = control.read_text()
    version = re.search(r"^Version: (.*)-(\d+)$", text, re.M)
    later = "%s-%d" % (version.group(1), int(version.group(2)) + 1)
    control.write_text(text.replace(version.group(0), "Version: " + later))
    out = tmp_path / ("memcached-pm_%s_amd64.deb" % later)
    r = run("dpkg-deb", "--root-owner-group", "-b", str(root), str(out))
    assert r.returncode == 0, r.stderr
    return out, later


def dpkg(*args):
    r = run("dpkg", *args,
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def exec_start(unit, port):
    """What the installed unit runs, with the test's port after it (the
    command line's options come after the options file's)."""
    text = (UNIT_DIR / unit).read_text()
    line = re.search(r"^ExecStart=(.*)$", text, re.M).group(1)
    line = line.replace("%S", "/var/lib").replace("%t", "/run")
    return line.split() + ["-p", str(port)]


def as_user(argv):
    return ["setpriv", "--reuid=" + USER, "--regid=" + USER,
            "--clear-groups"] + argv


def check_files():
    files = dpkg("-L", "memcached-pm").split()
    for path in [BIN, str(CONF), "/usr/share/man/man1/memcached-pm.1.gz",
                 "/usr/share/doc/memcached-pm/README.md.gz",
                 "/usr/share/doc/memcached-pm/examples/memcached-pm-node.conf"
                 ] + [str(UNIT_DIR / u) for u in UNITS]:
        assert path in files, (path, files)
        assert os.path.exists(path), path
    conffiles = run("dpkg-query", "-W", "-f=${Conffiles}",
                    "memcached-pm").stdout
    assert str(CONF) in conffiles
    assert "/usr/local" not in (UNIT_DIR / "memcached-pm.service").read_text()
    st = STATE.stat()
    assert pwd.getpwuid(st.st_uid).pw_name == USER
    assert grp.getgrgid(st.st_gid).gr_name == USER
    assert oct(st.st_mode & 0o777) == "0o700"
    assert pwd.getpwnam(USER).pw_shell in ("/usr/sbin/nologin",
                                           "/bin/false")
    # the units as systemd would load them; a template through an instance
    links = []
    for unit in UNITS:
        if "@" in unit:
            link = UNIT_DIR / unit.replace("@.", "@11299.")
            link.symlink_to(unit)
            links.append(link)
    try:
        r = run("systemd-analyze", "verify", "--man=no",
                *[str(UNIT_DIR / u) for u in UNITS if "@" not in u],
                *[str(link) for link in links])
        assert r.returncode == 0 and r.stderr == "", r.stderr
    finally:
        for link in links:
            link.unlink()


def check_version():
    v = run(BIN, "-V").stdout.strip()
    assert v == "memcached-pm 1.6.45-pm-%s" % configure_version(), v
    assert installed_version().startswith(configure_version() + "-")


def check_memcached_conf(port):
    """Debian's /etc/memcached.conf (memcached's package, installed by
    script/bootstrap) starts the installed binary as it is."""
    p = subprocess.Popen(as_user([BIN, "--config-file=/etc/memcached.conf",
                                  "-p", str(port), "-U", "0"]),
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: p.poll() is None and serves(port), 10,
                 "memcached-pm on /etc/memcached.conf")
        with Conn(port) as c:
            assert VERSION_RE.match(c.req(b"version\r\n"))
            assert c.stats("settings")["maxbytes"] == str(64 << 20)
    finally:
        p.terminate()
        p.wait(10)


def manager(port):
    """systemd's part for memcached-pm.service and its socket: the
    listener the .socket unit names (its port this test's), the notify
    socket the service user can reach."""
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(1024)
    fdstore = re.search(r"^FileDescriptorStoreMax=(\d+)$",
                        (UNIT_DIR / "memcached-pm.service").read_text(),
                        re.M).group(1)
    m = ServiceManager([("memcached-pm.socket", lst)],
                       fdstore_max=int(fdstore))
    os.chmod(m.dir, 0o755)
    os.chmod(m.path, 0o777)
    return m, lst


def upgrade_under_manager(deb2, port):
    """The old package's binary serving with connections open, the new
    package installed, the service reloaded as its postinst does: no
    connection closed, every item back, served by the new file."""
    RUNTIME.mkdir(mode=0o700, exist_ok=True)
    shutil.chown(RUNTIME, USER, USER)
    m, lst = manager(port)
    conns = []
    try:
        m.start(as_user(exec_start("memcached-pm.service", port)))
        old_ino = os.stat(BIN).st_ino
        conns = [Conn(port) for _ in range(20)]
        assert VERSION_RE.match(conns[0].req(b"version\r\n"))
        for i, c in enumerate(conns):
            for j in range(50):
                c.call(b"set k%d.%d 0 0 2\r\n%02d\r\n" % (i, j, j),
                       b"STORED\r\n")
        dpkg("-i", str(deb2))
        assert os.stat(BIN).st_ino != old_ino     # the file replaced
        old = m.main_pid
        m.reload()
        assert m.main_pid != old
        exe = os.readlink("/proc/%d/exe" % m.main_pid)
        assert exe == BIN, exe
        assert os.stat("/proc/%d/exe" % m.main_pid).st_ino == \
            os.stat(BIN).st_ino
        for i, c in enumerate(conns):
            for j in range(50):
                c.call(b"get k%d.%d\r\n" % (i, j),
                       b"VALUE k%d.%d 0 2\r\n%02d\r\nEND\r\n" % (i, j, j))
        assert conns[0].stats()["pid"] == str(m.main_pid)
        assert int(conns[0].stats()["curr_connections"]) >= 20
        rc = m.terminate()
        assert rc == 0, m.stderr()
    finally:
        for c in conns:
            c.close()
        m.close()
        lst.close()
        shutil.rmtree(RUNTIME, ignore_errors=True)


def test_package_installs_upgrades_and_purges(tmp_path):
    assert shutil.which("systemd-analyze"), "systemd-analyze is missing"
    if installed_version() is not None:
        pytest.fail("memcached-pm is installed on this machine already: "
                    "this test installs and purges its own")
    deb, out = build(tmp_path / "out")
    assert deb.name.startswith("memcached-pm_%s-1_" % configure_version())
    assert not re.search(r"^E: ", out, re.M), out      # lintian
    deb2, later = newer(deb, tmp_path)
    try:
        dpkg("-i", str(deb))
        check_files()
        check_version()
        check_memcached_conf(free_port())
        upgrade_under_manager(deb2, free_port())
        assert installed_version() == later
        dpkg("-r", "memcached-pm")
        assert CONF.exists() and STATE.exists()     # kept on remove
        assert not os.path.exists(BIN)
    except BaseException:
        run("dpkg", "-P", "memcached-pm")       # leave the machine as found
        raise
    dpkg("-P", "memcached-pm")
    left = [p for p in TRACES if os.path.lexists(p)]
    assert left == [], left
    assert run("getent", "passwd", USER).returncode == 2
    assert run("getent", "group", USER).returncode == 2
