"""plot.py RESULTS OUTDIR: throughput.png and p99.png from bench/perf.sh.

RESULTS holds one tab-separated line per workload, as bench/compare.sh
writes them: label, then name, median ops/s, p99 us and cpu ns/req of
side A, the same of side B.  Each plot puts the two sides of every
workload side by side, with the ratio A/B written above each pair.
"""

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
            if len(p) != 9:
                continue
            rows.append({"label": p[0],
                         "a": (p[1], float(p[2]), float(p[3])),
                         "b": (p[5], float(p[6]), float(p[7]))})
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
    ax.set_xticklabels([r["label"] for r in rows])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(0, max(max(r["a"][index], r["b"][index])
                       for r in rows) * 1.15)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    rows = read(sys.argv[1])
    if not rows:
        sys.exit("plot.py: no results in %s" % sys.argv[1])
    out = sys.argv[2]
    bars(rows, 1, "ops/s (median of the rounds)", "Throughput, A/B above each pair",
         os.path.join(out, "throughput.png"))
    bars(rows, 2, "p99 latency, us (median of the rounds)", "p99, A/B above each pair",
         os.path.join(out, "p99.png"))


if __name__ == "__main__":
    main()
