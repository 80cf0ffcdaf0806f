"""The Debian package: script/package builds it; under Debian's own
systemd (tests/realsystemd.py: PID 1 of new namespaces) it installs and
starts, its files, units, user and options file are as the package says,
and through its whole life (reloads, restarts, an upgrade, a stop and a
start, crashes, remove, install again, purge) the clients that hold
connections and the ones that open new connections every millisecond
(tests/heldload.py) see nothing but a pause: no connection closed (the
stop and the crashes aside), no value wrong, no new connection refused;
systemd kills nothing and no unit fails.  The purge leaves nothing
behind.

One test, in steps, since each needs the one before it; it installs on
the machine and purges after (serial: nothing else runs meanwhile)."""

import grp
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import VERSION_RE, Conn, free_port, serves, wait_for
from heldload import HeldLoad
import realsystemd
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

pytestmark = [pytest.mark.mcpm, pytest.mark.serial]

REPO = Path(__file__).resolve().parent.parent
BIN = "/usr/bin/memcached-pm"
UNIT_DIR = Path("/lib/systemd/system")
UNITS = ["memcached-pm.service", "memcached-pm.socket",
         "memcached-pm@.service", "memcached-pm@.socket"]
CONF = Path("/etc/memcached-pm.conf")
STATE = Path("/var/lib/memcached-pm")
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
    """script/package's .deb (MCPM_TEST_DEB names one built before, to
    try the steps again without building)."""
    given = os.environ.get("MCPM_TEST_DEB")
    if given:
        out.mkdir(parents=True)
        shutil.copy(given, out)
        return out / os.path.basename(given), ""
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


def unit_in(deb, unit):
    """A unit file as the package ships it."""
    r = subprocess.run("dpkg-deb --fsys-tarfile %s | tar -xO "
                       "./lib/systemd/system/%s" % (deb, unit), shell=True,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout, r.stderr
    return r.stdout


def port_drop_ins(sd, deb, port):
    """The service and its socket on the test's port (drop-ins in the
    namespace's /run: the package's files stay as shipped)."""
    line = re.search(r"^ExecStart=(.*)$",
                     unit_in(deb, "memcached-pm.service"), re.M).group(1)
    sd.write("/run/systemd/system/memcached-pm.service.d/test.conf",
             "[Service]\nExecStart=\nExecStart=%s -p %d\n"
             % (line, port))
    sd.write("/run/systemd/system/memcached-pm.socket.d/test.conf",
             "[Socket]\nListenStream=\nListenStream=127.0.0.1:%d\n"
             % port)
    sd.systemctl("daemon-reload")


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


# --------------------------------------------------------------------------
# the whole life, under systemd
# --------------------------------------------------------------------------

SERVICE = "memcached-pm.service"
# A step's longest request may not pass this (the goal, 100 ms, is the
# benchmark's: bench/pool.py rolling-systemd; this machine is shared).
HANG = 5.0
PRELOAD = 2000


class Life:
    """The package's life under `sd`, one step at a time, the clients
    running through it: each step is judged by what they saw and by what
    systemd logged meanwhile."""

    def __init__(self, sd, port):
        self.sd = sd
        self.port = port
        self.load = None
        self.seen = []

    def main(self):
        return self.sd.main_pid(SERVICE)

    def active(self):
        return self.sd.show(SERVICE, "ActiveState") == "active"

    def serving(self):
        """Active, and its main process answers (its pid in stats)."""
        pid = self.main()
        if not self.active() or pid <= 0 or not serves(self.port):
            return False
        with Conn(self.port) as c:
            return c.stats()["pid"] == str(pid)

    def status(self):
        return self.sd.show(SERVICE, "StatusText")

    def step(self, name, action, closes=False, kills=False):
        """Run action() as step `name`: returns what systemd logged.
        closes: the step ends the process that holds the connections;
        kills: by SIGKILL."""
        cursor = self.sd.cursor()
        if self.load is not None:
            self.load.mark(name)
        action()
        log = self.sd.journal(cursor)
        bad = [line for line in log.splitlines()
               if "not our child" in line or "signal SIGKILL" in line
               or ("status=9/KILL" in line and not kills)]
        assert bad == [], "%s: systemd said\n%s" % (name, "\n".join(bad))
        assert self.sd.failed() == [], (name, self.sd.failed(), log[-3000:])
        if self.load is not None:
            c = self.load.mark(name + " (after)")
            print(c)
            self.seen.append(c)
            assert c.wrong == 0, c
            assert c.refused == 0, c        # the port is never closed
            # a connection open when the process ends by design (a stop,
            # a crash) closes with it, a new one just accepted too
            assert closes or (c.closed == 0 and c.failed == 0), c
            assert c.longest < HANG and c.longest_probe < HANG, c
        return log

    # -- the steps -----------------------------------------------------

    def reload(self):
        """systemctl reload, until the main process serves again: its
        status counts one reload more."""
        main, was = self.main(), self.status()
        self.sd.systemctl("reload", SERVICE)
        wait_for(lambda: self.status() != was, 30, "the reload to end")
        assert self.main() == main, "the main process changed at a reload"

    def restart(self):
        main = self.main()
        self.sd.systemctl("restart", SERVICE)
        wait_for(lambda: self.main() not in (0, main) and self.serving(),
                 30, "the restart")

    def recovered(self):
        with Conn(self.port) as c:
            return c.stats()["recovery_running"] == "0"

    def crash(self):
        """SIGKILL; Restart= starts it again, which serves at once while
        it reads its file back (a key not read back yet misses), and
        then has every item."""
        main = self.main()
        self.load.misses_allowed = True
        self.sd.sh("kill -9 %d" % main)
        wait_for(lambda: self.main() not in (0, main) and self.serving(),
                 30, "Restart= after the crash")
        wait_for(self.recovered, 30, "the recovery after the crash")
        self.load.misses_allowed = False


NODE_CONF = "/usr/share/doc/memcached-pm/examples/memcached-pm-node.conf"


def instances(sd, tmp_path):
    """Three nodes of the template unit (memcached-pm@<port>, the shipped
    example options file each), a pool behind nutcracker with the shipped
    configuration, clients through it: a rolling reload and a rolling
    restart, none of them noticing.  The nodes are stopped and their
    files removed after (purge knows nothing of them)."""
    from nutcracker_conf import nutcracker_conf
    ports = [free_port() for _ in range(3)]
    units = ["memcached-pm@%d.socket" % p for p in ports] + \
        ["memcached-pm@%d.service" % p for p in ports]
    proxy = None
    load = None
    try:
        for p in ports:
            sd.sh("install -d /etc/memcached-pm && "
                  "install -m 644 %s /etc/memcached-pm/%d.conf"
                  % (NODE_CONF, p))
        sd.systemctl("start", *units)
        for p in ports:
            wait_for(lambda p=p: serves(p), 30, "node %d" % p)
        conf = tmp_path / "nutcracker.yml"
        listen = free_port()
        conf.write_text(nutcracker_conf(listen, ports))
        proxy = subprocess.Popen(["nutcracker", "-c", str(conf), "-s",
                                  str(free_port()), "-a", "127.0.0.1"],
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)

        def proxied():
            try:
                with Conn(listen, timeout=1) as c:
                    return c.get_block(b"get x\r\n") == b"END\r\n"
            except OSError:
                return False
        wait_for(proxied, 30, "nutcracker")
        load = HeldLoad(listen, conns=20,
                        probe=(b"get probe\r\n", b"END")).start()
        seen = []
        for verb in ("reload", "restart"):
            for p in ports:
                unit = "memcached-pm@%d.service" % p
                load.mark("%s %d" % (verb, p))
                main, was = sd.main_pid(unit), sd.show(unit, "StatusText")
                sd.systemctl(verb, unit)
                if verb == "reload":
                    wait_for(lambda: sd.show(unit, "StatusText") != was, 30,
                             "the reload of " + unit)
                    assert sd.main_pid(unit) == main
                else:
                    wait_for(lambda: sd.main_pid(unit) not in (0, main) and
                             serves(p), 30, "the restart of " + unit)
                c = load.mark("%s %d (after)" % (verb, p))
                print(c)
                seen.append(c)
        load.stop()
        load = None
        for c in seen:
            assert c.wrong == c.closed == c.refused == c.failed == 0, c
            assert c.longest < HANG and c.longest_probe < HANG, c
        assert sd.failed() == []
    finally:
        if load is not None:
            load.stop()
        if proxy is not None:
            proxy.terminate()
            proxy.wait(10)
        sd.systemctl("stop", *units, check=False)
        sd.sh("rm -rf /etc/memcached-pm " + " ".join(
            "/var/lib/memcached-pm/%d" % p for p in ports), check=False)


def preload(port):
    with Conn(port) as c:
        c.send(b"".join(b"set pre:%d 0 0 8 noreply\r\n%08d\r\n" % (i, i)
                        for i in range(PRELOAD)))
        c.sync()


def check_items(port, held):
    """The preloaded keys and every key the held clients were told of."""
    with Conn(port) as c:
        for i in range(0, PRELOAD, 100):
            got = c.get_block(b"get " + b" ".join(
                b"pre:%d" % k for k in range(i, i + 100)) + b"\r\n")
            assert got.count(b"VALUE ") == 100, got[-200:]
        for key, allowed in held.items():
            reply = c.get_block(b"get %s\r\n" % key)
            value = None
            if reply != b"END\r\n":
                value = reply.split(b"\r\n")[1]
            assert value in allowed, (key, reply, allowed)


def test_the_package_s_whole_life_under_systemd(tmp_path):
    why = realsystemd.unavailable()
    if why:
        pytest.skip("Debian's systemd cannot boot here: " + why)
    if installed_version() is not None:
        pytest.fail("memcached-pm is installed on this machine already: "
                    "this test installs and purges its own")
    deb, out = build(tmp_path / "out")
    assert deb.name.startswith("memcached-pm_%s-1_" % configure_version())
    assert not re.search(r"^E: ", out, re.M), out      # lintian
    deb2, later = newer(deb, tmp_path)
    # what the namespace must reach (its /tmp is its own)
    shared = Path(tempfile.mkdtemp(prefix="mcpm-systemd-", dir="/var/lib"))
    for d in (deb, deb2):
        shutil.copy(d, shared)
    deb, deb2 = shared / deb.name, shared / deb2.name
    sd = realsystemd.Systemd(shared / "boot")
    life = None
    try:
        sd.boot()
        port = free_port()
        port_drop_ins(sd, deb, port)
        life = Life(sd, port)
        life.step("install", lambda: sd.sh("dpkg -i %s" % deb))
        wait_for(life.serving, 30, "the service installed to serve")
        check_files()
        check_version()
        check_memcached_conf(free_port())
        instances(sd, tmp_path)
        preload(port)
        life.load = HeldLoad(port).start()
        for i in range(3):
            life.step("reload %d" % (i + 1), life.reload)
        for i in range(3):
            life.step("restart %d" % (i + 1), life.restart)

        def upgrade():
            old = sd.sh("stat -c %i /usr/bin/memcached-pm").stdout
            main, was = life.main(), life.status()
            sd.sh("dpkg -i %s" % deb2)
            assert sd.sh("stat -c %i /usr/bin/memcached-pm").stdout != old
            wait_for(lambda: life.status() != was, 30, "the upgrade's reload")
            assert life.main() == main
            # the main process runs the file now installed
            exe = sd.sh("stat -L -c %%i /proc/%d/exe" % main).stdout
            assert exe == sd.sh("stat -c %i /usr/bin/memcached-pm").stdout
        life.step("upgrade", upgrade)
        assert installed_version() == later
        life.step("restart after the upgrade", life.restart)

        def stop_start():
            main = life.main()
            sd.systemctl("stop", SERVICE)
            # a client coming meanwhile may start it again (the socket
            # unit stays): either way a new process
            sd.systemctl("start", SERVICE)
            wait_for(lambda: life.main() not in (0, main) and
                     life.serving(), 30, "the start")
        stopped = life.step("stop and start", stop_start, closes=True)
        assert "Deactivated successfully" in stopped, stopped[-3000:]
        life.step("crash", life.crash, closes=True, kills=True)
        life.step("reload before a crash", life.reload)
        life.step("crash after a reload", life.crash, closes=True,
                  kills=True)
        life.load.pause_probes()
        life.load.holding(False)

        def remove():
            sd.sh("dpkg -r memcached-pm")
            life.load.drop_held()
        removed = life.step("remove", remove, closes=True)
        held = life.load.keys()
        assert "Deactivated successfully" in removed, removed[-3000:]
        assert CONF.exists() and (STATE / "items.pm").exists()
        assert not os.path.exists(BIN)
        life.step("install again", lambda: sd.sh("dpkg -i %s" % deb2))
        wait_for(life.serving, 30, "the service installed again")
        check_items(port, held)             # every item back
        seen = life.load.stop()
        life.load = None
        life.step("purge", lambda: sd.sh("dpkg -P memcached-pm"))
        left = [p for p in TRACES if os.path.lexists(p)]
        assert left == [], left
        assert run("getent", "passwd", USER).returncode == 2
        assert run("getent", "group", USER).returncode == 2
        print(seen)
    finally:
        if installed_version() is not None and sd.pid is not None:
            sd.sh("dpkg -P memcached-pm", check=False)
        if life is not None and life.load is not None:
            life.load.stop()
        sd.shutdown()
        run("dpkg", "-P", "memcached-pm")   # leave the machine as found
        shutil.rmtree(shared, ignore_errors=True)
