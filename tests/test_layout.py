"""The folders are the architecture: script/rooms passes on this tree, and
refuses a copy of it with an include that runs back up, a room its house
does not list, a file in no room, a circle of includes or of calls
inside a room and a file too long."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOPS = ("memcached-pm", "storage", "proto", "bench", "fuzz", "t")


def rooms(root):
    return subprocess.run([sys.executable, str(root / "script" / "rooms")],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def tree(tmp_path):
    """The sources and script/rooms, copied, to be broken."""
    for top in TOPS:
        shutil.copytree(REPO / top, tmp_path / top,
                        ignore=shutil.ignore_patterns("*.o", ".deps"))
    (tmp_path / "script").mkdir()
    shutil.copy(REPO / "script" / "rooms", tmp_path / "script" / "rooms")
    return tmp_path


def add_line(path, after, line):
    text = path.read_text()
    assert after in text, after
    path.write_text(text.replace(after, after + line + "\n", 1))


def test_this_tree_holds():
    r = rooms(REPO)
    assert r.returncode == 0, r.stdout
    assert r.stdout == ("rooms: every include and call runs down, every "
                        "file in a room, none too long\n")


def test_the_copy_holds(tree):
    r = rooms(tree)
    assert r.returncode == 0, r.stdout


def test_an_include_that_runs_back_up(tree):
    add_line(tree / "memcached-pm/net/given.c",
             '#include "memcached-pm/base/log.h"\n',
             '#include "memcached-pm/conn/conn.h"')
    add_line(tree / "storage/slab/item.c", '#include "storage/slab/item.h"\n',
             '#include "storage/lru/lru.h"')
    r = rooms(tree)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "rooms: memcached-pm/net/given.c: includes memcached-pm/conn/conn.h, "
        "and memcached-pm/net/README.md does not allow memcached-pm/conn/",
        "rooms: storage/slab/item.c: includes storage/lru/lru.h, and "
        "storage/slab/README.md does not allow storage/lru/",
    ]


def test_a_header_past_the_door(tree):
    add_line(tree / "memcached-pm/cmd/exec.c",
             '#include "memcached-pm/cmd/exec.h"\n',
             '#include "storage/slab/slabs.h"')
    r = rooms(tree)
    assert r.returncode == 1
    assert r.stdout == (
        "rooms: memcached-pm/cmd/exec.c: includes storage/slab/slabs.h; "
        "memcached-pm/cmd/README.md allows only ['item.h'] of "
        "storage/slab/\n")


def test_a_room_allowed_what_is_above_it(tree):
    readme = tree / "storage/index/README.md"
    readme.write_text(readme.read_text().replace(
        "May use: storage/base/,", "May use: storage/cache/, storage/base/,"))
    r = rooms(tree)
    assert r.returncode == 1
    assert r.stdout == (
        "rooms: storage/index/README.md: may use storage/cache/, which is "
        "not below it in storage/README.md\n")


def test_files_outside_the_rooms(tree):
    (tree / "storage/stray.c").write_text("int stray;\n")
    (tree / "memcached-pm/attic").mkdir()
    r = rooms(tree)
    assert r.returncode == 1
    out = r.stdout.splitlines()
    assert out[0].startswith("rooms: memcached-pm/README.md lists ['base', ")
    assert out[0].endswith("the folder holds ['admin', 'attic', 'base', "
                           "'cmd', 'conn', 'life', 'migrate', 'net', "
                           "'security', 'serve', 'watch']")
    assert out[1:] == ["rooms: storage/stray.c: in no room"]


def test_a_circle_inside_a_room(tree):
    add_line(tree / "storage/lru/lru.h", '#include "storage/slab/item.h"\n',
             '#include "storage/lru/link.h"')
    r = rooms(tree)
    assert r.returncode == 1
    assert r.stdout == ("rooms: include circle: storage/lru/link -> "
                        "storage/lru/lru -> storage/lru/link\n")


SUBMIT = "\nstatic int\nsubmit(struct ring *r)\n{\n"


def test_a_call_circle_inside_a_room(tree):
    """ring_io.c calls ring.c; a call back from ring.c closes a circle,
    though no include does (both include ring_priv.h).  A call named in a
    comment, a string or a header's declaration is no call."""
    add_line(tree / "memcached-pm/net/ring.c", SUBMIT, "    ring_wait(NULL, 0);")
    r = rooms(tree)
    assert r.returncode == 1
    assert r.stdout == ("rooms: call circle: memcached-pm/net/ring -> "
                        "memcached-pm/net/ring_io -> memcached-pm/net/ring\n")


def test_a_call_in_words_is_no_call(tree):
    add_line(tree / "memcached-pm/net/ring.c", SUBMIT,
             '    /* not ring_wait(io, 0) */ (void)"ring_read(io)";')
    r = rooms(tree)
    assert r.returncode == 0, r.stdout


def test_a_file_too_long(tree):
    path = tree / "storage/base/tslot.c"
    path.write_text(path.read_text() + "/* */\n" * 1000)
    r = rooms(tree)
    assert r.returncode == 1
    assert r.stdout.startswith("rooms: storage/base/tslot.c: ")
    assert r.stdout.endswith(" lines with its headers (at most 1000)\n")
