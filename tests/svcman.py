"""A service manager's part of systemd's protocols with a service, played
for tests and benchmarks where no systemd runs: socket activation (the
sockets of a .socket unit passed at fd 3 on, with LISTEN_FDS, LISTEN_PID
and LISTEN_FDNAMES), and the notification socket (NOTIFY_SOCKET) with
READY=1, STOPPING=1 and the file descriptor store: FDSTORE=1 with
FDNAME= keeps a service's fds for its next start, FDSTOREREMOVE=1 drops
them, BARRIER=1 is answered by closing the fd it carries.  As systemd
does, the store keeps an fd once (a second copy of the same socket is
ignored), and passes it again, after the unit's sockets, on every start
until the service is stopped for good.

    m = ServiceManager([("memcached-pm.socket", listening_socket)])
    m.start([binary, "-p", ...])   # waits for READY=1
    m.restart()                    # SIGTERM, exit, start again
    m.stop()
"""

import os
import signal
import socket
import subprocess
import tempfile
import threading
import time


class ServiceManager:
    def __init__(self, sockets=(), fdstore_max=4096, env=None):
        self.sockets = list(sockets)        # (name, socket object)
        self.fdstore_max = fdstore_max
        self.env = env or {}
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
        self.notify.bind(self.path)
        self.notify.settimeout(0.2)
        self.halt = False
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    # -- the notification socket ------------------------------------------

    def _listen(self):
        while not self.halt:
            try:
                data, fds, _, _ = socket.recv_fds(self.notify, 4096, 253)
            except socket.timeout:
                continue
            except OSError:
                return
            self._handle(data.decode(errors="replace"), fds)

    def _same(self, a, b):
        sa, sb = os.fstat(a), os.fstat(b)
        return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)

    def _handle(self, text, fds):
        fields = dict(line.split("=", 1) for line in text.split("\n")
                      if "=" in line)
        with self.lock:
            self.messages.append(text)
            if fields.get("BARRIER") == "1":
                for fd in fds:
                    os.close(fd)
                return
            if fields.get("FDSTORE") == "1":
                name = fields.get("FDNAME", "stored")
                for fd in fds:
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
        if fields.get("READY") == "1":
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
                   NOTIFY_SOCKET=self.path)
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
