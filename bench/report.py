#!/usr/bin/env python3
"""report.py OUT DOC: bench/perf.sh's results, written into DOC.

Reads what bench/perf.sh left in OUT (parts.tsv, workloads.tsv,
results.tsv, files-*.tsv, flushlat.txt, callgrind.txt, scale.json,
durable.txt, large.txt) and
replaces the lines of DOC between BEGIN and END (both kept) with the
tables.  A part that has never run says so; the text around the markers
(how to read the figures, their history) is left alone.
"""

import json
import os
import sys

BEGIN = "<!-- bench/perf.sh writes from here -->"
END = "<!-- bench/perf.sh writes up to here -->"


def tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def text(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read().rstrip("\n")


def ran(parts, name):
    for p in parts:
        if p[0] == name:
            extra = ", " + p[4] if len(p) > 4 and p[4] else ""
            return "run %s on commit %s, %s%s" % (p[1], p[2], p[3], extra)
    return None


def k(x):
    return "{:,.0f}".format(x)


def compared(out, parts, part, prefix, title, intro):
    """The table of a part of compare.sh runs (results and workloads in
    OUT/<prefix>results.tsv and <prefix>workloads.tsv)."""
    lines = ["### " + title, ""]
    when = ran(parts, part)
    results = [r for r in tsv(os.path.join(out, prefix + "results.tsv"))
               if len(r) == 11]
    if not when or not results:
        return lines + ["Not run yet.", ""]
    what = dict((r[0], r[1]) for r in
                tsv(os.path.join(out, prefix + "workloads.tsv")))
    lines += [
        "`bench/compare.sh` per workload (%s).  %s  Medians of the runs;"
        " both servers preloaded with the same keys and pinned to one CPU,"
        " mcload to the other.  CPU/req is the server's user + system"
        " time over the requests it served: where the load generator is the"
        " limit, it still shows the difference." % (when, intro), "",
        "| workload | ops/s A | ops/s B | A/B | CPU/req A / B (ns) | A/B "
        "| p99 A / B (us) | p99.9 A / B (us) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        oa, qa, ca, ob, qb, cb, za, zb = (float(r[i]) for i in
                                          (2, 3, 4, 6, 7, 8, 9, 10))
        lines.append("| %s: %s | %s | %s | **%.2f** | %s / %s | %.2f "
                     "| %.0f / %.0f | %.0f / %.0f |" % (
                         r[0], what.get(r[0], ""), k(oa), k(ob), oa / ob,
                         k(ca), k(cb), ca / cb, qa, qb, za, zb))
    return lines + [""]


def wires(out, parts):
    lines = compared(out, parts, "wires", "",
                     "Every wire, memcached-pm (A) against memcached (B)",
                     "Items in DRAM.")
    if lines[-2:] == ["Not run yet.", ""]:
        return lines
    return lines + ["![throughput](perf/throughput.png)"
                    " ![CPU per request](perf/cpu.png)",
                    "![p99](perf/p99.png) ![p99.9](perf/p999.png)", ""]


def files(out, parts):
    lines = compared(out, parts, "files", "files-",
                     "The memory file on a disk and on tmpfs, memcached-pm"
                     " (A) against memcached (B)",
                     "memcached-pm with its items in a memory file (-e) in"
                     " the directory named, memcached as it runs by"
                     " default; the disk's own flush latency below.")
    flush = text(os.path.join(out, "flushlat.txt"))
    if flush:
        lines += ["```", flush, "```", ""]
    return lines


def fenced(title, body, when, intro):
    lines = ["### " + title, ""]
    if body is None or not when:
        return lines + ["Not run yet.", ""]
    return lines + [intro + " (%s):" % when, "", "```", body, "```", ""]


def scale(out, parts):
    lines = ["### Item counts: load, growth, DRAM per item, restarts", ""]
    when = ran(parts, "scale")
    path = os.path.join(out, "scale.json")
    if not when or not os.path.exists(path):
        return lines + ["Not run yet.", ""]
    with open(path) as f:
        rows = json.load(f)
    lines += [
        "`bench/scale.py` (%s): every item in a memory file on /dev/shm,"
        " 32-byte values, loaded in steps; GET p99.9 of a probe while the"
        " table grows against while the same sets overwrite (medians of the"
        " steps); DRAM per item is RssAnon over the items; restarts are"
        " from exec to the first reply with every item back." % when, "",
        "| items | load rate | GET p99.9 growing / outside | DRAM per item"
        " (after SIGKILL restart) | clean restart | SIGKILL restart |",
        "| ---: | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        lines.append("| %s | %s/s | %.0f / %.0f us (%.2fx) | %.2f B (%.2f B)"
                     " | %.2f s | %.2f s |" % (
                         k(r["items"]), k(r["load_rate"]), r["grow_p999"],
                         r["outside_p999"], r["grow_vs_outside_p999"],
                         r["anon_b_per_item"],
                         r["anon_after_kill_b_per_item"],
                         r["clean_restart_s"], r["kill_restart_s"]))
    hi = rows[-1]
    for lo in rows[:-1]:
        lines.append("| %s / %s (%gx the items) | %.2fx | | | %.1fx | %.1fx |"
                     % (k(hi["items"]), k(lo["items"]),
                        hi["items"] / lo["items"],
                        hi["load_rate"] / lo["load_rate"],
                        hi["clean_restart_s"] / lo["clean_restart_s"],
                        hi["kill_restart_s"] / lo["kill_restart_s"]))
    return lines + ["", "![DRAM per item and restarts](perf/scale.png)", ""]


def durable_body(out):
    body = text(os.path.join(out, "durable.txt"))
    if body is None:
        return None
    keep, on = [], False
    for line in body.splitlines():
        if line.startswith("SET only"):
            keep.append(line)
        if line.startswith("median"):
            on = True
        if on:
            keep.append(line)
    return "\n".join(keep)


def report(out):
    parts = tsv(os.path.join(out, "parts.tsv"))
    lines = wires(out, parts)
    lines += files(out, parts)
    lines += fenced("Instructions per request (callgrind)",
                    text(os.path.join(out, "callgrind.txt")),
                    ran(parts, "callgrind"), "`bench/callgrind.sh`")
    lines += scale(out, parts)
    lines += fenced("Durable SETs per medium", durable_body(out),
                    ran(parts, "durable"),
                    "`bench/durable.sh`, medians of the rounds")
    lines += fenced("Large values held against memcached",
                    text(os.path.join(out, "large.txt")),
                    ran(parts, "large"), "`bench/large.py`")
    return lines


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: report.py OUT DOC")
    out, doc = sys.argv[1], sys.argv[2]
    with open(doc) as f:
        old = f.read().split("\n")
    try:
        a, b = old.index(BEGIN), old.index(END)
    except ValueError:
        sys.exit("report.py: %s lacks the lines %s and %s" % (doc, BEGIN, END))
    if b < a:
        sys.exit("report.py: the markers in %s are out of order" % doc)
    new = old[:a + 1] + [""] + report(out) + old[b:]
    with open(doc + ".new", "w") as f:
        f.write("\n".join(new))
    os.replace(doc + ".new", doc)


if __name__ == "__main__":
    main()
