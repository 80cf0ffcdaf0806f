"""Debian's own systemd for a test: booted as PID 1 of new pid, mount and
cgroup namespaces, so that units, the package's scripts and every
`systemctl` verb meet the real service manager, not a played one.

    sd = Systemd(workdir)       # workdir: outside /tmp (see below)
    sd.boot()                   # until `systemctl is-system-running`
    sd.sh("dpkg -i x.deb")      # any command, inside the namespaces
    sd.systemctl("reload", "memcached-pm")
    sd.shutdown()               # SIGKILL to its PID 1 ends them all

What the namespaces keep from the machine, and what they do not:
- The network and the file systems are the machine's (the package is
  installed on it: a test purges it again).  /tmp, /var/tmp and /run get
  fresh tmpfs mounts inside, so systemd-tmpfiles, PrivateTmp= and the
  units' runtime directories touch nothing outside; the checkout this
  file is in (and each path of `shared`) is mounted back over them if it
  lies under /tmp or /var/tmp, as a fresh clone in CI does.
- Units that change the machine (sysctl, remount-fs, binfmt, modules,
  tmpfiles, sysusers, hwclock) are masked inside by bind-mounting
  /dev/null over them, and what the targets a service depends on would
  start beside it (sysinit, timers such as fstrim's and apt's, paths,
  local-fs) hidden by an empty directory over their .wants; Docker's /usr/sbin/policy-rc.d, which forbids starting
  services, says yes inside.
- The cgroup tree is a new cgroup of the machine's cgroup2 hierarchy,
  the namespace's root: systemd's slices land there, removed at the end.
- systemd boots into a target of the test's that wants basic.target
  (sockets, slices; sysinit, timers and paths as hidden above) and
  journald, as a boot reaches before its services: no service starts.

unavailable() says why it cannot run here (not root, no cgroup2, no
unshare or systemd): a test then skips, saying so."""

import itertools
import os
import shutil
import subprocess

from rawconn import serves
from waiting import wait_for

SYSTEMD = "/lib/systemd/systemd"
REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
MASKED = ["systemd-sysctl.service", "systemd-remount-fs.service",
          "systemd-binfmt.service", "proc-sys-fs-binfmt_misc.automount",
          "systemd-modules-load.service", "systemd-tmpfiles-setup.service",
          "systemd-tmpfiles-setup-dev.service",
          "systemd-tmpfiles-clean.timer", "hwclock.service",
          "systemd-hwdb-update.service", "systemd-udevd.service",
          "systemd-udev-trigger.service", "systemd-random-seed.service",
          "systemd-update-utmp.service", "systemd-journal-flush.service",
          "systemd-sysusers.service", "systemd-firstboot.service",
          "systemd-machine-id-commit.service", "ldconfig.service",
          "systemd-update-done.service", "systemd-journal-catalog-update.service"]
TARGET = "mcpm-test.target"

BOOT = """#!/bin/sh
set -e
mkdir -p %(work)s/host-tmp %(work)s/host-var-tmp
mount --rbind /tmp %(work)s/host-tmp
mount --rbind /var/tmp %(work)s/host-var-tmp
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /var/tmp
%(shares)s
mount -t tmpfs tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# what a service's default dependencies would start beside it (timers
# such as fstrim's or apt's, mounts, whatever sysinit wants): nothing of
# it inside.  (sockets.target's stay: the Debian package's socket unit,
# once enabled, starts through it before its service, as at a boot.)
for t in sysinit timers paths local-fs remote-fs; do
    for d in /lib/systemd/system /etc/systemd/system; do
        if [ -d $d/$t.target.wants ]; then
            mkdir -p %(work)s/empty$d/$t
            mount --bind %(work)s/empty$d/$t $d/$t.target.wants
        fi
    done
done
for u in %(masked)s; do
    if [ -e /lib/systemd/system/$u ]; then
        mount --bind /dev/null /lib/systemd/system/$u
    fi
done
if [ -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\\nexit 0\\n' > /run/policy-rc.d
    chmod 755 /run/policy-rc.d
    mount --bind /run/policy-rc.d /usr/sbin/policy-rc.d
fi
mkdir -p /run/systemd/system
cat > /run/systemd/system/%(target)s <<EOF
[Unit]
Description=a test's target: what a boot reaches before services
Wants=basic.target systemd-journald.socket systemd-journald.service
After=basic.target
EOF
exec %(systemd)s --system --unit=%(target)s --log-target=journal-or-kmsg
"""

_serial = itertools.count()


def cgroup2_root():
    """Where the machine mounts its cgroup2 hierarchy, or None."""
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, path, kind = line.split()[:3]
            if kind == "cgroup2":
                return path
    return None


def unavailable():
    """Why systemd cannot boot for a test here, or None."""
    if os.geteuid() != 0:
        return "not root: namespaces and mounts need it"
    for tool in ("unshare", "nsenter"):
        if shutil.which(tool) is None:
            return "no %s (util-linux)" % tool
    if not os.access(SYSTEMD, os.X_OK):
        return "no %s (Debian's systemd package)" % SYSTEMD
    if cgroup2_root() is None:
        return "no cgroup2 hierarchy mounted"
    return None


class Systemd:
    def __init__(self, workdir, shared=()):
        self.workdir = str(workdir)
        # host paths the namespace must see although they lie under its
        # fresh /tmp or /var/tmp (a checkout and its builds, say)
        self.shared = [os.path.realpath(p) for p in shared] + [REPO]
        self.proc = None
        self.pid = None
        root = cgroup2_root()
        self.cgroup = os.path.join(
            root, "mcpm-systemd-%d-%d" % (os.getpid(), next(_serial)))

    # -- the machine ---------------------------------------------------

    def boot(self, timeout=60.0):
        os.makedirs(self.workdir, exist_ok=True)
        script = os.path.join(self.workdir, "boot.sh")
        with open(script, "w") as f:
            f.write(BOOT % {"masked": " ".join(MASKED), "target": TARGET,
                            "systemd": SYSTEMD, "work": self.workdir,
                            "shares": self._shares()})
        os.mkdir(self.cgroup)
        procs = os.path.join(self.cgroup, "cgroup.procs")

        def into_cgroup():
            with open(procs, "w") as f:
                f.write("0")

        self.log = open(os.path.join(self.workdir, "boot.log"), "wb")
        self.proc = subprocess.Popen(
            ["unshare", "--cgroup", "--pid", "--fork", "--mount",
             "--propagation", "private", "--mount-proc", "sh", script],
            stdin=subprocess.DEVNULL, stdout=self.log,
            stderr=subprocess.STDOUT, preexec_fn=into_cgroup)
        self.pid = wait_for(lambda: self._alive() and self._pid1(),
                            timeout, "systemd to start")

        def booted():
            state = self.sh("systemctl is-system-running", check=False,
                            timeout=timeout).stdout.strip()
            return self._alive() and state in ("running", "degraded")
        wait_for(booted, timeout, "systemd to finish booting")
        return self

    def _shares(self):
        """Bind-mount each shared path under /tmp or /var/tmp back over
        the namespace's fresh tmpfs."""
        lines = []
        for path in self.shared:
            for top, host in (("/tmp/", "host-tmp"),
                              ("/var/tmp/", "host-var-tmp")):
                if path.startswith(top):
                    lines.append("mkdir -p '%s'\nmount --rbind '%s/%s/%s' '%s'"
                                 % (path, self.workdir, host,
                                    path[len(top):], path))
        return "\n".join(lines)

    def _alive(self):
        """True while the namespace lives; its end is an error."""
        if self.proc.poll() is not None:
            raise RuntimeError("systemd's namespace ended (%s): %s"
                               % (self.proc.returncode, self.boot_log()))
        return True

    def _pid1(self):
        """The namespace's PID 1 as the machine numbers it: unshare's
        child."""
        try:
            with open("/proc/%d/task/%d/children"
                      % (self.proc.pid, self.proc.pid)) as f:
                kids = f.read().split()
        except FileNotFoundError:
            return None
        if not kids:
            return None
        try:
            with open("/proc/%s/comm" % kids[0]) as f:
                comm = f.read().strip()
        except FileNotFoundError:
            return None
        return int(kids[0]) if comm == "systemd" else None

    def boot_log(self):
        with open(os.path.join(self.workdir, "boot.log"), "rb") as f:
            return f.read().decode(errors="replace")

    def shutdown(self):
        """SIGKILL to PID 1 ends every process of the namespace; then the
        cgroups it made go."""
        if self.proc is None:
            return
        if self.pid is not None:
            try:
                os.kill(self.pid, 9)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self.log.close()
        self.proc = None
        wait_for(self._cgroup_removed, 30, "cgroup %s to empty"
                 % self.cgroup)

    def _cgroup_removed(self):
        """Remove what is left of the namespace's cgroups (a cgroup its
        processes are still leaving stays for the next call)."""
        for top, _, _ in os.walk(self.cgroup, topdown=False):
            try:
                os.rmdir(top)
            except OSError:
                pass
        return not os.path.exists(self.cgroup)

    # -- commands inside -----------------------------------------------

    def sh(self, cmd, check=True, timeout=120, env=None, input=None):
        """Run a shell command inside the namespaces (as root)."""
        r = subprocess.run(["nsenter", "-t", str(self.pid), "-m", "-p",
                            "--", "sh", "-c", cmd], capture_output=True,
                           text=True, timeout=timeout, input=input,
                           env=dict(os.environ, **(env or {})))
        if check and r.returncode != 0:
            raise AssertionError("inside systemd's namespace, %r: exit %d\n"
                                 "%s%s" % (cmd, r.returncode, r.stdout,
                                           r.stderr))
        return r

    def write(self, path, text):
        """A file inside the namespaces (its directories made)."""
        d = os.path.dirname(path)
        self.sh("mkdir -p '%s' && cat > '%s'" % (d, path), input=text)

    def systemctl(self, *args, check=True, timeout=120):
        return self.sh("systemctl --no-pager " + " ".join(args),
                       check=check, timeout=timeout)

    def show(self, unit, prop):
        return self.systemctl("show", "-P", prop, unit).stdout.strip()

    def main_pid(self, unit):
        """The unit's main process as the namespace numbers it (as the
        server's `stats` pid does); 0: none."""
        return int(self.show(unit, "MainPID"))

    def failed(self):
        """Units in the failed state."""
        r = self.systemctl("list-units", "--state=failed", "--plain",
                           "--no-legend")
        return [line.split()[0] for line in r.stdout.splitlines()
                if line.strip()]

    def journal(self, since_cursor=None):
        """systemd's and the units' log, from a cursor on (cursor())."""
        args = "journalctl --no-pager -o short-monotonic"
        if since_cursor:
            args += " --after-cursor='%s'" % since_cursor
        return self.sh(args, check=False).stdout

    def cursor(self):
        r = self.sh("journalctl -n 0 --show-cursor --no-pager", check=False)
        for line in r.stdout.splitlines():
            if line.startswith("-- cursor: "):
                return line[len("-- cursor: "):]
        return None


class Service:
    """A memcached-pm service and its .socket unit written for a test or
    a benchmark under `sd`, as contrib/'s units run it (Type=notify, the
    socket unit's listeners, the fd store, ExecReload= a takeover,
    Restart=on-failure after 100 ms), running `argv` with
    -o takeover=<its runtime directory>/t.sock added (takeover=False:
    not).  sockets: the socket unit's Listen lines (default: TCP on
    127.0.0.1:port; empty: no socket unit); extra: more [Service] lines."""

    def __init__(self, sd, name, port, argv, env=(), fdstore=4200,
                 access="all", sockets=None, extra="", takeover=True):
        self.sd, self.name, self.port = sd, name, port
        self.unit = name + ".service"
        if sockets is None:
            sockets = ["ListenStream=127.0.0.1:%d" % port]
        self.socket = name + ".socket" if sockets else None
        env = list(env) + ["%s=%s" % (k, os.environ[k])
                           for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS")
                           if k in os.environ]
        cmd = list(argv)
        if takeover:
            cmd += ["-o", "takeover=/run/%s/t.sock" % name]
        if self.socket:
            sd.write("/run/systemd/system/" + self.socket,
                     "[Socket]\n%s\nBacklog=1024\n" % "\n".join(sockets))
        # (no start limit: a test restarts more than five times in ten
        # seconds)
        sd.write("/run/systemd/system/%s" % self.unit,
                 "[Unit]\nStartLimitIntervalSec=0\n"
                 "[Service]\nType=notify\nNotifyAccess=%s\n"
                 "ExecStart=%s\nExecReload=/bin/kill -USR2 $MAINPID\n"
                 "RuntimeDirectory=%s\nFileDescriptorStoreMax=%d\n"
                 "Environment=FDSTORE=%d\nLimitNOFILE=%d\n"
                 "Restart=on-failure\nRestartSec=100ms\nTimeoutStopSec=60\n"
                 "%s%s" % (access, " ".join(cmd), name, fdstore, fdstore,
                           2 * fdstore + 1000,
                           "".join("Environment=%s\n" % e for e in env),
                           extra))
        sd.systemctl("daemon-reload")

    def units(self):
        return ([self.socket] if self.socket else []) + [self.unit]

    def log(self, cursor=None):
        """The unit's lines in the journal (from a cursor on)."""
        return self.sd.sh("journalctl --no-pager -o cat -u %s%s"
                          % (self.unit, " --after-cursor='%s'" % cursor
                             if cursor else ""), check=False).stdout

    def stored(self):
        """How many descriptors systemd's fd store holds for it."""
        return int(self.sd.show(self.unit, "NFileDescriptorStore"))

    def main_pid(self):
        return self.sd.main_pid(self.unit)

    def start(self, timeout=30.0, check=True):
        """Start it (and its socket unit), until its port answers; with
        check False, the systemctl result (for a start that must fail)."""
        r = self.sd.systemctl("start", *self.units(), check=False)
        if not check:
            return r
        if r.returncode != 0:
            raise RuntimeError("%s did not start:\n%s" % (
                self.unit, self.sd.sh("journalctl --no-pager -n 40 -u %s"
                                      % self.unit, check=False).stdout))
        wait_for(lambda: self.main_pid() > 0 and
                 (self.port is None or serves(self.port)),
                    timeout, "%s to serve" % self.unit)

    def status(self):
        return self.sd.show(self.unit, "StatusText")

    def reload(self, timeout=30.0):
        """systemctl reload, until the main process has taken the node
        back from its successor (the same pid, its status counting one
        reload more)."""
        was = self.status()
        self.sd.systemctl("reload", self.unit)
        wait_for(lambda: self.status() != was, timeout,
                 "the reload of %s" % self.unit)

    def restart(self, timeout=30.0):
        main = self.main_pid()
        r = self.sd.systemctl("restart", self.unit, check=False)
        if r.returncode != 0:
            raise RuntimeError("%s did not restart:\n%s" % (
                self.unit, self.sd.sh("journalctl --no-pager -n 40 -u %s"
                                      % self.unit, check=False).stdout))
        wait_for(lambda: self.main_pid() not in (0, main) and
                 serves(self.port), timeout, "the restart of " + self.unit)

    def crash(self, timeout=30.0):
        """SIGKILL of the main process; Restart= starts it again."""
        main = self.main_pid()
        self.sd.sh("kill -9 %d" % main)
        wait_for(lambda: self.main_pid() not in (0, main) and
                 serves(self.port), timeout, "Restart= of " + self.unit)

    def stop(self):
        self.sd.systemctl("stop", *self.units(), check=False)


