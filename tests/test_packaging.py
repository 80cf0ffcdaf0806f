"""What packaging needs: the man page lists every option -h lists and
renders without a groff warning, `make install` puts it in man1, the
systemd units pass systemd-analyze and start the server their options
files describe, and the twemproxy configuration for a pool is valid."""

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import Conn, free_port, serves, wait_for

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "doc" / "memcached-pm.1"
SOCKETS = [REPO / "contrib" / "memcached-pm.socket",
           REPO / "contrib" / "memcached-pm@.socket"]
CONFS = {"memcached-pm.service": REPO / "contrib" / "memcached-pm.conf",
         "memcached-pm@.service": REPO / "contrib" / "memcached-pm-node.conf"}


def units(binary):
    """The service units as this build wrote them (from contrib/*.in,
    with its paths: /usr/local unless configured otherwise)."""
    build = Path(binary).resolve().parent.parent
    return [build / "contrib" / name for name in sorted(CONFS)]


def conf_value(text, flag):
    """The last value of `flag` in an options file (memcached.conf's
    layout: options as on the command line, '#' comments)."""
    found = None
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        for i, w in enumerate(words[:-1]):
            if w == flag:
                found = words[i + 1]
    return found


def help_names(binary):
    """Every option's short and long name, and every -o suboption."""
    out = subprocess.run([binary, "-h"], capture_output=True, check=True,
                         text=True).stdout.splitlines()[1:]
    names = []
    for line in out:
        m = re.match(r"(-\w)(?:, (--[\w-]+))?", line)
        if m:
            names += [n for n in m.groups() if n]
        m = re.match(r"   (\[no_\])?(\w+)", line)
        if m:
            names.append(m.group(2))
    return names


@pytest.mark.mcpm
def test_man_page_lists_every_option(binary):
    text = PAGE.read_text().replace("\\-", "-")
    names = help_names(binary)
    assert len(names) > 100
    missing = [n for n in names
               if not re.search(r"(^|[\s\"\]])%s\b" % re.escape(n), text)]
    assert missing == [], "run script/manpage: %s" % missing


@pytest.mark.mcpm
def test_man_page_renders_without_warnings():
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(PAGE)],
                       capture_output=True)
    assert r.returncode == 0 and r.stderr == b""
    r = subprocess.run(["man", "--warnings", str(PAGE)], capture_output=True,
                       env=dict(os.environ, MANPAGER="cat", MANWIDTH="80"))
    assert r.returncode == 0 and r.stderr == b""
    for section in (b"EXIT STATUS", b"SIGNALS", b"TIERS",
                    b"RESTART AND CRASH"):
        assert section in r.stdout


@pytest.mark.mcpm
def test_make_install_puts_the_page_in_man1(binary, tmp_path):
    build = Path(binary).resolve().parent.parent
    if not (build / "Makefile").exists():
        pytest.fail("no build tree around %s" % binary)
    subprocess.run(["make", "-C", str(build), "install",
                    "DESTDIR=%s" % tmp_path], check=True,
                   capture_output=True, timeout=300)
    pages = list(tmp_path.rglob("man1/memcached-pm.1"))
    assert len(pages) == 1
    assert pages[0].read_bytes() == PAGE.read_bytes()
    assert list(tmp_path.rglob("bin/memcached-pm"))


def installed(unit, binary, tmp_path):
    """The unit as `make install` would find it: systemd-analyze checks
    that its server exists, so it names this build's."""
    path = tmp_path / unit.name
    path.write_text(re.sub(r"^ExecStart=\S+", "ExecStart=" +
                           os.path.abspath(binary), unit.read_text(),
                           flags=re.M))
    return path


def instances(tmp_path, binary):
    """The units as systemd loads them: the templates through an instance
    named by its port (systemd-analyze verifies a template as instance
    "i", which no socket address takes)."""
    paths = []
    for unit in units(binary) + SOCKETS:
        path = installed(unit, binary, tmp_path)
        if "@" in unit.name:
            link = tmp_path / unit.name.replace("@.", "@11211.")
            link.symlink_to(path.name)
            path = link
        paths.append(str(path))
    return paths


@pytest.mark.mcpm
def test_systemd_units_verify(binary, tmp_path):
    assert shutil.which("systemd-analyze"), "systemd-analyze is missing"
    r = subprocess.run(["systemd-analyze", "verify", "--man=no"] +
                       instances(tmp_path, binary), capture_output=True)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    for unit in units(binary):
        text = unit.read_text()
        for key in ("StateDirectory=memcached-pm", "Restart=on-failure",
                    "NoNewPrivileges=yes", "ProtectSystem=strict",
                    "PrivateTmp=yes", "User=memcached-pm",
                    "Group=memcached-pm",
                    "ExecStart=/usr/local/bin/memcached-pm --config-file="
                    "/usr/local/etc/memcached-pm",
                    # restarts no client sees (doc/POOL.md): a reload
                    # is a takeover whose successor names itself MAINPID
                    "Type=notify", "NotifyAccess=all",
                    "ExecReload=/bin/kill -USR2 $MAINPID",
                    "RuntimeDirectory=memcached-pm"):
            assert key in text, (unit.name, key)
        assert "sh -c" not in text and "@" not in text.replace(
            "memcached-pm@", ""), unit.name
        assert re.search(r" -o takeover=%t/memcached-pm(-%i)?/takeover\.sock",
                         text)

        def number(key, text=text):
            return int(re.search(r"^%s=(\d+)$" % key, text, re.M).group(1))

        # a restart's fd store holds every connection -c allows and the
        # listeners, and says its size to a systemd before 254; the
        # descriptor limit leaves room for what the server reserves
        maxconn = int(conf_value(CONFS[unit.name].read_text(), "-c"))
        store = number("FileDescriptorStoreMax")
        assert store >= maxconn + 2
        assert number("Environment=FDSTORE") == store
        assert number("LimitNOFILE") >= maxconn + 100
    for sock, want in zip(SOCKETS, ["ListenStream=127.0.0.1:11211",
                                    "ListenStream=127.0.0.1:%i"]):
        assert want in sock.read_text().splitlines()


def exec_start(unit, instance, state, runtime=None):
    """The command systemd runs for the unit: ExecStart with %i, %S and
    %t expanded."""
    line = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1)
    line = line.replace("%i", instance).replace("%S", state)
    return line.replace("%t", runtime or state).split()


def conf_for_test(conf, path, port=None, mb=8):
    """The shipped options file made this test's: its -p (if it has one)
    and -m replaced, its -l left out (the suite's servers listen on
    127.0.0.1 already, and -l adds to the addresses), written to
    `path`."""
    text = re.sub(r"^-m \d+$", "-m %d" % mb, conf.read_text(), flags=re.M)
    text = re.sub(r"^-l .*$", "", text, flags=re.M)
    if port is not None:
        text = re.sub(r"^-p \d+$", "-p %d" % port, text, flags=re.M)
    path.write_text(text)
    return str(path)


def with_conf(argv, path):
    """argv with its --config-file naming `path` instead."""
    return [("--config-file=" + path) if a.startswith("--config-file=")
            else a for a in argv]


@pytest.mark.mcpm
@pytest.mark.parametrize("unit, settings", [
    ("memcached-pm.service", {"maxconns": "1024", "num_threads": "4"}),
    ("memcached-pm@.service", {"maxconns": "1024", "num_threads": "4",
                               "memory_file_max_downtime": "300"}),
])
def test_unit_starts_the_server_its_conf_describes(server_factory, binary,
                                                    tmp_path, unit,
                                                    settings):
    """What the unit runs with its shipped options file starts, with those
    settings and its memory file in the StateDirectory (the port and -m
    made this test's; an instance's port is its name)."""
    port = free_port()
    instance = str(port) if "@" in unit else ""
    text = (Path(binary).resolve().parent.parent / "contrib" /
            unit).read_text()
    argv = exec_start(text, instance, str(tmp_path))
    assert argv[0] == "/usr/local/bin/memcached-pm"
    assert conf_value(CONFS[unit].read_text(), "-l") == "127.0.0.1"
    conf = conf_for_test(CONFS[unit], tmp_path / "test.conf",
                     None if instance else port)
    state = tmp_path / "memcached-pm" / instance
    state.mkdir(parents=True, exist_ok=True)     # systemd makes them
    runtime = re.search(r"^RuntimeDirectory=(.*)$", text, re.M).group(1)
    (tmp_path / runtime.replace("%i", instance)).mkdir(exist_ok=True)
    s = server_factory(*with_conf(argv[1:], conf), port=port)
    st = s.stats("settings")
    assert st["tcpport"] == str(port)
    assert st["memory_file"] == str(state / "items.pm")
    for name, want in settings.items():
        assert st[name] == want, name
    assert os.path.getsize(state / "items.pm") > 8 << 20


@pytest.mark.mcpm
def test_nutcracker_conf_is_valid():
    r = subprocess.run(["nutcracker", "-t", "-c",
                        str(REPO / "contrib" / "nutcracker.yml")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "syntax is ok" in r.stderr, r.stderr


def readme_command():
    """The server part of the README's first command, as words."""
    text = (REPO / "README.md").read_text()
    line = next(l for l in text.splitlines()
                if l.startswith("    bash script/bootstrap && "))
    steps = [s.strip() for s in line.split("&&")]
    assert steps[1] == "mkdir -p data"
    return steps[2].split()


@pytest.mark.mcpm
def test_the_readmes_node_keeps_its_items(binary, tmp_path):
    """The README's node runs on a memory file under data/: stopped
    (Ctrl-C) and started again, or taken over by the same command run
    again, it serves every item it had."""
    words = readme_command()
    assert words[0] == "build/memcached-pm/memcached-pm"
    port = free_port()
    words[0] = os.path.abspath(binary)
    words[words.index("-p") + 1] = str(port)
    (tmp_path / "data").mkdir()

    def run():
        p = subprocess.Popen(words, cwd=tmp_path, stderr=subprocess.PIPE)
        wait_for(lambda: p.poll() is None and serves(port), 10,
                 "the README's node")
        return p
    p = run()
    with Conn(port) as c:
        c.call(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n")
    q = subprocess.Popen(words, cwd=tmp_path, stderr=subprocess.PIPE)
    assert p.wait(10) == 0              # taken over
    wait_for(lambda: serves(port), 10)
    q.send_signal(signal.SIGINT)        # Ctrl-C
    assert q.wait(10) == 0
    p = run()
    with Conn(port) as c:
        c.call(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n")
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
    assert (tmp_path / "data" / "items.pm").stat().st_size > 64 << 20
