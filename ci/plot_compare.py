#!/usr/bin/env python3
"""Plot busbw vs message size of uniccl and NCCL from ci/compare.sh's results.csv.

    ci/plot_compare.py results.csv busbw.png

One panel per collective; solid lines uniccl, dashed NCCL; eager and graph
mode in two colours. Without matplotlib it says so and writes nothing (exit 0),
so compare.sh runs everywhere.
"""
import csv
import sys
from collections import defaultdict


def load(path):
    """{collective: {(library, mode): [(size, busbw), ...]}} from results.csv."""
    data = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                size, busbw = int(row["size"]), float(row["busbw"])
            except (KeyError, ValueError):
                continue  # N/A or a malformed line of a failed run
            if size > 0:
                data[row["collective"]][(row["library"], row["mode"])].append((size, busbw))
    return data


def human(size):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= div:
            return f"{size // div}{unit}"
    return str(size)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    data = load(argv[1])
    if not data:
        print(f"plot_compare.py: no rows in {argv[1]}: nothing to plot")
        return 0
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_compare.py: matplotlib is not installed: plot skipped (pip install matplotlib)")
        return 0

    colls = sorted(data)
    cols = min(3, len(colls))
    rows = (len(colls) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.2 * rows), squeeze=False)
    colours = {"eager": "tab:blue", "graph": "tab:orange"}
    styles = {"uniccl": "-", "nccl": "--"}
    for ax, coll in zip(axes.flat, colls):
        for (lib, mode), points in sorted(data[coll].items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points],
                    styles.get(lib, ":"), color=colours.get(mode, "tab:gray"),
                    marker="o", markersize=2.5, label=f"{lib} {mode}")
        ax.set_xscale("log", base=2)
        ax.set_title(coll)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        sizes = sorted({p[0] for series in data[coll].values() for p in series})
        ticks = sizes[::max(1, len(sizes) // 8)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([human(t) for t in ticks], rotation=45)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(colls):]:
        ax.axis("off")
    fig.suptitle("uniccl vs NCCL: bus bandwidth (out-of-place, NCCL_NVLS_ENABLE=0)")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=120)
    print(f"plot_compare.py: wrote {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
