#!/usr/bin/env python3
"""Draws prism_serve_benchmark's autoscaling CSV: replicas (target and running) and the
ongoing requests over time, with the load step (wrk connections) shaded.

    python3 perf/plot_serve_autoscaling.py perf/plots/serve_autoscaling.csv perf/plots/serve_autoscaling.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = sys.argv[1], sys.argv[2]
    try:
        with open(src) as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print("plot_serve_autoscaling.py: cannot read %s (%s)" % (src, e), file=sys.stderr)
        return 1
    need = {"t_s", "connections", "target_replicas", "running_replicas", "ongoing_requests"}
    if not rows or not need <= set(rows[0]):
        print("plot_serve_autoscaling.py: %s has no rows with columns %s" % (src, sorted(need)), file=sys.stderr)
        return 1
    t = [float(r["t_s"]) for r in rows]
    col = lambda k: [float(r[k]) for r in rows]  # noqa: E731
    fig, ax = plt.subplots(figsize=(8, 4.6))
    ax.step(t, col("running_replicas"), where="post", label="running replicas", linewidth=2)
    ax.step(t, col("target_replicas"), where="post", label="target replicas", linestyle="--")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("replicas")
    ax.set_ylim(0, max(col("target_replicas") + col("running_replicas")) + 1)
    ax2 = ax.twinx()
    ax2.plot(t, col("ongoing_requests"), color="grey", alpha=0.6, linewidth=1, label="ongoing requests")
    ax2.plot(t, col("connections"), color="tab:red", alpha=0.5, linewidth=1, label="wrk connections")
    ax2.set_ylabel("requests / connections")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper center", bbox_to_anchor=(0.5, -0.14),
              ncol=4, fontsize=8, frameon=False)
    ax.set_title("Prism Serve autoscaling under a load step (1 -> 32 -> 1 connections)")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
