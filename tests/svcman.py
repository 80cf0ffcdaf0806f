"""A service manager's part of systemd's protocols with a service, played
for tests and benchmarks where no systemd runs: socket activation (the
sockets of a .socket unit passed at fd 3 on, with LISTEN_FDS, LISTEN_PID
and LISTEN_FDNAMES), and the notification socket (NOTIFY_SOCKET) with
READY=1, STOPPING=1, MAINPID=, BARRIER=1 and the file descriptor store.

What systemd does, done here too:

- The store: FDSTORE=1 with FDNAME= keeps a service's fds for its next
  start, FDSTOREREMOVE=1 drops those of a name.  Each fd sent is compared
  with every one in the store (systemd's service_add_fd_store() walks it
  with same_fd()), a second copy of the same socket ignored; past
  FileDescriptorStoreMax= (fdstore_max, said to the service in $FDSTORE
  as systemd 254 does) an fd is closed.  The store is passed again, after
  the unit's sockets, on every start until the service is stopped for
  good.
- Who may notify (NotifyAccess=, notify_access): "main", only the main
  process (each message's sender is read from its credentials); "all",
  any process of the service.  MAINPID= names another main process: the
  one the manager waits for from then on.  The manager is the service's
  child subreaper, as systemd is, so that a main process started by the
  last one becomes its child once that one exits.
- reload(): ExecReload=/bin/kill -USR2 $MAINPID, as the shipped units
  do; then until a new main process is named (MAINPID=) and the old
  one has exited.  If the main process exits without naming a successor, the
  service has ended (`ended`).

    m = ServiceManager([("memcached-pm.socket", listening_socket)])
    m.start([binary, "-p", ...])   # waits for READY=1
    m.restart()                    # SIGTERM, exit, start again
    m.reload()                     # SIGUSR2: a takeover inside the unit
    m.stop()
"""

import ctypes
import os
import select
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

PR_SET_CHILD_SUBREAPER = 36


class MainProcess:
    """A main process the manager did not start itself (MAINPID=): its
    child once the process that started it has exited (the manager is a
    subreaper), waited for as a Popen is."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is not None:
            return self.returncode
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:       # not (yet) the manager's child
            return None if _alive(self.pid) else 0
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        """Until it exits: its pidfd turns readable then (pidfd_open(2)),
        whoever its parent is."""
        if self.poll() is None:
            try:
                fd = os.pidfd_open(self.pid)
            except ProcessLookupError:      # gone already
                fd = None
            if fd is not None:
                try:
                    exited, _, _ = select.select([fd], [], [], timeout)
                finally:
                    os.close(fd)
                if not exited:
                    raise subprocess.TimeoutExpired(["pid %d" % self.pid],
                                                    timeout)
        return self.poll()                  # a zombie: reaped, or gone

    def send_signal(self, sig):
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def _alive(pid):
    """Does pid run (not gone, not a zombie)?"""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


class ServiceManager:
    def __init__(self, sockets=(), fdstore_max=4096, env=None,
                 notify_access="all"):
        self.sockets = list(sockets)        # (name, socket object)
        self.fdstore_max = fdstore_max
        self.notify_access = notify_access
        self.env = env or {}
        self.main_pid = None
        self.ready_pid = None               # who said READY=1 last
        self.ended = False                  # the main process exited
        self.refused = 0                    # messages NotifyAccess dropped
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.store = []                     # [name, fd]
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.messages = []
        self.proc = None
        self.argv = None
        self.procs = []                     # every process started
        self.errs = []
        self.dir = tempfile.mkdtemp(prefix="mcpm-sd-")
        self.path = os.path.join(self.dir, "notify")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.notify.bind(self.path)
        self.notify.settimeout(0.2)
        self.halt = False
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    # -- the notification socket ------------------------------------------

    def _listen(self):
        room = socket.CMSG_SPACE(253 * 4) + socket.CMSG_SPACE(12)
        while not self.halt:
            try:
                data, anc, _, _ = self.notify.recvmsg(4096, room)
            except socket.timeout:
                continue
            except OSError:
                return
            fds, pid = [], None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    n = len(payload) // 4
                    fds += list(struct.unpack("%di" % n, payload[:4 * n]))
                elif (level == socket.SOL_SOCKET and
                      kind == socket.SCM_CREDENTIALS):
                    pid = struct.unpack("3i", payload[:12])[0]
            self._handle(data.decode(errors="replace"), fds, pid)

    def _same(self, a, b):
        sa, sb = os.fstat(a), os.fstat(b)
        return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)

    def _handle(self, text, fds, pid):
        fields = dict(line.split("=", 1) for line in text.split("\n")
                      if "=" in line)
        with self.lock:
            if self.notify_access == "main" and pid != self.main_pid:
                self.refused += 1           # systemd logs and drops it
                for fd in fds:
                    os.close(fd)
                return
            self.messages.append(text)
            if fields.get("BARRIER") == "1":
                for fd in fds:
                    os.close(fd)
                return
            if fields.get("FDSTORE") == "1":
                name = fields.get("FDNAME", "stored")
                for fd in fds:
                    # compared with the whole store, as systemd does
                    if (len(self.store) >= self.fdstore_max or
                            any(self._same(fd, s[1]) for s in self.store)):
                        os.close(fd)
                    else:
                        self.store.append([name, fd])
                return
            for fd in fds:
                os.close(fd)
            if fields.get("FDSTOREREMOVE") == "1":
                name = fields.get("FDNAME")
                for s in [s for s in self.store if s[0] == name]:
                    os.close(s[1])
                    self.store.remove(s)
            if fields.get("MAINPID", "").isdigit():
                new = int(fields["MAINPID"])
                if new != self.main_pid:
                    self.main_pid = new
                    self.proc = MainProcess(new)
                    self.procs.append(self.proc)
        if fields.get("READY") == "1":
            self.ready_pid = pid
            self.ready.set()
        if fields.get("STOPPING") == "1":
            self.stopping.set()

    def stored(self, prefix=""):
        with self.lock:
            return [s[0] for s in self.store if s[0].startswith(prefix)]

    # -- the service ------------------------------------------------------

    def _passed(self):
        with self.lock:
            return ([(n, s.fileno()) for n, s in self.sockets] +
                    [(n, fd) for n, fd in self.store])

    def start(self, argv=None, wait=True, timeout=20.0, extra_env=None):
        """Start the service with the unit's sockets and the store's fds;
        with wait, until it says READY=1."""
        self.argv = argv or self.argv
        passed = self._passed()
        fds = [fd for _, fd in passed]
        env = dict(os.environ, **self.env, **(extra_env or {}))
        env.update(LISTEN_FDS=str(len(fds)),
                   LISTEN_FDNAMES=":".join(n for n, _ in passed),
                   NOTIFY_SOCKET=self.path, FDSTORE=str(self.fdstore_max))
        self.ready.clear()
        self.stopping.clear()

        def place_fds():
            # high first, so that moving them to 3.. overwrites none
            high = [os.dup2(fd, 1000 + i) for i, fd in enumerate(fds)]
            for i, fd in enumerate(high):
                os.dup2(fd, 3 + i)
                os.set_inheritable(3 + i, True)
            for fd in high:
                os.close(fd)
        err = tempfile.NamedTemporaryFile(prefix="mcpm-sd-err-")
        # LISTEN_PID is the service's own pid: a shell that execs it
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh"] + self.argv,
            env=env, preexec_fn=place_fds, close_fds=False,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        self.procs.append(self.proc)
        self.errs.append(err)
        self.main_pid = self.proc.pid
        self.ended = False
        if wait:
            self.wait_ready(timeout)
        return self.proc

    def wait_ready(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.05):
            if self.proc.poll() is not None:
                raise AssertionError("the service exited %s:\n%s"
                                     % (self.proc.returncode, self.stderr()))
            if time.monotonic() > deadline:
                raise AssertionError("no READY=1 in %s s:\n%s"
                                     % (timeout, self.stderr()))

    def stderr(self, which=-1):
        f = self.errs[which]
        f.flush()
        with open(f.name, "rb") as r:
            return r.read().decode(errors="replace")

    def reload(self, timeout=20.0):
        """systemctl reload with ExecReload=/bin/kill -USR2 $MAINPID: the
        main process starts its successor, which takes it over and is
        named the main process (MAINPID=); until the old one has exited
        (a Type=notify service is not asked to say READY=1 again).
        Returns the new main process."""
        old = self.proc
        os.kill(self.main_pid, signal.SIGUSR2)
        try:
            old.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("no takeover in %s s:\n%s"
                                 % (timeout, self.stderr())) from None
        # it named its successor (MAINPID=, behind a BARRIER) before it
        # exited, or never will
        with self.lock:
            moved = self.proc is not old
        if not moved:
            self.ended = True
            raise AssertionError("the main process exited without "
                                 "naming a successor:\n" + self.stderr())
        if old.returncode != 0:
            raise AssertionError("the old main process exited %s:\n%s"
                                 % (old.returncode, self.stderr()))
        return self.proc

    def restart(self, argv=None, timeout=20.0):
        """systemctl restart: SIGTERM, wait for the exit, start again (the
        store kept).  Returns the old process's exit status."""
        rc = self.terminate(timeout)
        self.start(argv, timeout=timeout)
        return rc

    def terminate(self, timeout=20.0):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self):
        """systemctl stop: the service ends, and the store is emptied."""
        rc = None
        if self.proc is not None and self.proc.poll() is None:
            rc = self.terminate()
        with self.lock:
            for _, fd in self.store:
                os.close(fd)
            self.store = []
        return rc

    def close(self):
        self.stop()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.halt = True
        self.thread.join(2)
        self.notify.close()
        for s in self.sockets:
            s[1].close()
        os.unlink(self.path)
        os.rmdir(self.dir)
