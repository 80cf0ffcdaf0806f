"""plot.py RESULTS OUTDIR [SCALE_JSON]: bench/perf.sh's plots.

RESULTS holds one tab-separated line per workload, as bench/compare.sh
writes them: label, then name, median ops/s, p99 us and cpu ns/req of
side A, the same of side B, then p99.9 us of A and of B.  throughput.png,
cpu.png, p99.png and p999.png put the two sides of every workload side by
side, with the ratio A/B written above each pair.  With SCALE_JSON (the
rows of bench/scale.py --json), scale.png draws DRAM per item and the
restart times against the item count.
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) != 11:
                continue
            rows.append({"label": p[0],
                         "a": (p[1], float(p[2]), float(p[3]), float(p[4]),
                               float(p[9])),
                         "b": (p[5], float(p[6]), float(p[7]), float(p[8]),
                               float(p[10]))})
    return rows


def bars(rows, index, ylabel, title, path):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.38
    for i, r in enumerate(rows):
        a, b = r["a"], r["b"]
        ax.bar(i - width / 2, a[index], width, color="#2b6cb0",
               label="A: memcached-pm (or prefetch on)" if i == 0 else None)
        ax.bar(i + width / 2, b[index], width, color="#a0aec0",
               label="B: memcached (or prefetch off)" if i == 0 else None)
        top = max(a[index], b[index])
        ax.text(i, top * 1.02, "%.2fx" % (a[index] / b[index]),
                ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["label"] for r in rows], rotation=30, ha="right",
                       fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(0, max(max(r["a"][index], r["b"][index])
                       for r in rows) * 1.15)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    results, out = sys.argv[1], sys.argv[2]
    rows = read(results) if os.path.exists(results) else []
    if rows:
        wires(rows, out)
    elif len(sys.argv) < 4:
        sys.exit("plot.py: no results in %s" % results)
    if len(sys.argv) > 3:
        scale(sys.argv[3], os.path.join(out, "scale.png"))


def wires(rows, out):
    bars(rows, 1, "ops/s (median of the rounds)",
         "Throughput, A/B above each pair",
         os.path.join(out, "throughput.png"))
    bars(rows, 2, "p99 latency, us (median of the rounds)",
         "p99, A/B above each pair", os.path.join(out, "p99.png"))
    bars(rows, 3, "server CPU ns per request (median of the rounds)",
         "CPU per request, A/B above each pair", os.path.join(out, "cpu.png"))
    bars(rows, 4, "p99.9 latency, us (median of the rounds)",
         "p99.9, A/B above each pair", os.path.join(out, "p999.png"))


def scale(path, png):
    with open(path) as f:
        rows = json.load(f)
    n = [r["items"] / 1e6 for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4))
    left.plot(n, [r["anon_b_per_item"] for r in rows], "o-",
              label="after the load")
    left.plot(n, [r["anon_after_kill_b_per_item"] for r in rows], "s--",
              label="after a SIGKILL restart")
    left.axhline(4, color="#c53030", lw=1, label="goal: 4 bytes")
    left.set_xscale("log")
    left.set_xlabel("items (millions)")
    left.set_ylabel("DRAM bytes per item (RssAnon / items)")
    left.set_ylim(0, max([5] + [r["anon_b_per_item"] * 1.1 for r in rows]))
    left.legend(fontsize=8)
    right.plot(n, [r["clean_restart_s"] for r in rows], "o-",
               label="clean restart")
    right.plot(n, [r["kill_restart_s"] for r in rows], "s--",
               label="SIGKILL restart")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("items (millions)")
    right.set_ylabel("seconds to the first reply, all items back")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
