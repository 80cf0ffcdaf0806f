"""--config-file: options from a file laid out as Debian's
/etc/memcached.conf, as the Debian package's service reads
/etc/memcached-pm.conf (issue 48).

The file's options come first and the command line's after them; '#'
starts a comment ("\\#" is a '#'); -d, -h and `logfile` lines are passed
over, as Debian's start script passes them; anything else that is not an
option, an option memcached-pm does not take, or a bad value stops the
start with the file's name and the line's number."""

import os
import subprocess

import pytest

from conftest import Conn, Server, free_port, run_binary, serves, wait_for

pytestmark = pytest.mark.mcpm

DEBIAN_CONF = "/etc/memcached.conf"


def conf(tmp_path, text):
    path = tmp_path / "memcached-pm.conf"
    path.write_text(text)
    return str(path)


def settings_of(binary, args):
    s = Server(binary, args, False).start()
    try:
        return s.stats("settings")
    finally:
        s.stop()


@pytest.mark.skipif(not os.path.exists(DEBIAN_CONF),
                    reason="Debian's memcached (script/bootstrap installs "
                    "it) ships /etc/memcached.conf")
def test_debians_memcached_conf_is_taken(binary):
    """memcached's own file as Debian ships it: -d passed over (the
    server stays in the foreground: this very process answers), its -m
    and -l taken; the test's port comes after it and wins."""
    port = free_port()
    cmd = [binary, "--config-file=" + DEBIAN_CONF, "-p", str(port), "-U",
           "0"] + (["-u", "root"] if os.geteuid() == 0 else [])
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: p.poll() is None and serves(port), 10,
                 "memcached-pm on " + DEBIAN_CONF)
        with Conn(port) as c:
            got = c.stats("settings")
    finally:
        p.terminate()
        assert p.wait(10) == 0, p.stderr.read()
    with open(DEBIAN_CONF) as f:
        words = [line.split() for line in f if line.startswith(("-m ",
                                                                "-l "))]
    want = dict((w[0], w[1]) for w in words)
    assert got["maxbytes"] == str(int(want.get("-m", "64")) << 20)
    assert got["inter"] == want.get("-l", "NULL")


def test_comments_skipped_lines_and_the_command_line_last(binary, tmp_path):
    path = conf(tmp_path, "\n".join([
        "# a comment line",
        "   ",
        "-d",
        "logfile /var/log/memcached-pm.log",
        "-m 100   # trailing comment",
        "-c 700 -R 7",
        "\t-D \\#",
        "-o hashpower=20,no_lru_crawler",
        "-v",
        ""]))
    got = settings_of(binary, ["--config-file", path, "-c", "800"])
    assert got["maxbytes"] == str(100 << 20)
    assert got["maxconns"] == "800"         # the command line's, after
    assert got["reqs_per_event"] == "7"
    assert got["stat_key_prefix"] == "#"
    assert got["hashpower_init"] == "20"
    assert got["lru_crawler"] == "no"
    assert got["verbosity"] == "1"


@pytest.mark.parametrize("lines, number, message", [
    (["-m 64", "-j"], 2, "Illegal option: -j"),
    (["-m 64", "", "-m -5"], 3, 'Invalid value for -m: "-5"'),
    (["# -c", "-c"], 2, "Missing argument for option: -c"),
    (["-m", "64"], 1, "Missing argument for option: -m"),  # not line 2's
    (["-p 1 stray"], 1, "Unexpected argument: stray"),
    (["-m 64", "maxconns 10"], 2, "not an option"),
    (["-o no_such_option"], 1, "Illegal suboption"),
    (["-m 64", "--config-file=/etc/memcached.conf"], 2,
     "--config-file: once, in full, on the command line"),
], ids=["unknown", "bad-value", "no-value", "value-on-next-line", "stray",
        "directive", "suboption", "nested"])
def test_refused_with_the_line(binary, tmp_path, lines, number, message):
    path = conf(tmp_path, "\n".join(lines) + "\n")
    r = run_binary(binary, ["-p", "0", "-U", "0", "--config-file=" + path])
    err = r.stderr.decode()
    assert r.returncode != 0, err
    assert message in err, err
    assert "%s line %d: " % (path, number) in err, err


@pytest.mark.parametrize("args", [["--config=%s"], ["--config-file=%s",
                                                   "--config-file=%s"]],
                         ids=["abbreviated", "twice"])
def test_only_one_file_named_in_full(binary, tmp_path, args):
    """getopt takes --config for --config-file; read unseen, it would be
    dropped without a word: refused, as a second file is."""
    path = conf(tmp_path, "-m 100\n")
    r = run_binary(binary, ["-p", "0", "-U", "0"] +
                   [a % path for a in args])
    assert r.returncode == 1
    assert r.stderr.decode() == ("--config-file: once, in full, on the "
                                 "command line\n")


def test_missing_file(binary, tmp_path):
    path = str(tmp_path / "none.conf")
    r = run_binary(binary, ["-p", "0", "--config-file", path])
    assert r.returncode != 0
    assert r.stderr.decode() == ("cannot read the options file %s: No such "
                                 "file or directory\n" % path)
