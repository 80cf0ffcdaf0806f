"""What packaging needs: the man page lists every option -h lists and
renders without a groff warning, `make install` puts it in man1, and the
systemd unit passes systemd-analyze."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "doc" / "memcached-pm.1"
UNIT = REPO / "contrib" / "memcached-pm.service"


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


@pytest.mark.mcpm
def test_systemd_unit_verifies():
    assert shutil.which("systemd-analyze"), "systemd-analyze is missing"
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(UNIT)],
                       capture_output=True)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    unit = UNIT.read_text()
    for key in ("StateDirectory=memcached-pm", "Restart=on-failure",
                "NoNewPrivileges=yes", "ProtectSystem=strict",
                "PrivateTmp=yes"):
        assert key in unit
    conf = (REPO / "contrib" / "memcached-pm.conf").read_text()
    assert "-e /var/lib/memcached-pm/items.pm" in conf
