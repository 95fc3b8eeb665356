#!/usr/bin/env python3
"""Learning curves of prism::rl runs: the smoothed episode return against env steps, one line
per seed, one panel per algorithm and environment, from the CSV files that
`apps/rl_cartpole --curve=PATH` and `perf/rl_dqn_cartpole --curve=PATH` write (columns seed,
env_steps, episode_return_mean, wall_s at least; rows of several seeds may share a file).

    /usr/bin/python3 perf/plot_rl_curves.py --out=apps/rl_cartpole/learning_curves.png \\
        --panel="PPO, CartPole-v1" --target=450 apps/rl_cartpole/curves/ppo_cartpole_s*.csv \\
        --panel="DQN, CartPole-v1" --target=450 apps/rl_cartpole/curves/dqn_cartpole.csv

Each --panel starts a panel; --target draws its dashed line; the files after them are its
runs. Prints, per panel and seed, the first env steps (and wall seconds) at which the return
reached the target. Needs matplotlib (Debian: python3-matplotlib).
"""
import csv
import math
import sys


def usage(message):
    sys.stderr.write("plot_rl_curves.py: %s\n%s" % (message, __doc__))
    sys.exit(2)


def parse(argv):
    out, panels = None, []
    for arg in argv:
        if arg.startswith("--out="):
            out = arg[len("--out="):]
        elif arg.startswith("--panel="):
            panels.append({"title": arg[len("--panel="):], "target": None, "files": []})
        elif arg.startswith("--target="):
            if not panels:
                usage("--target before any --panel")
            panels[-1]["target"] = float(arg[len("--target="):])
        elif arg in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        elif arg.startswith("--"):
            usage("unknown flag %s" % arg)
        else:
            if not panels:
                usage("file %s before any --panel" % arg)
            panels[-1]["files"].append(arg)
    if out is None or not panels:
        usage("need --out and at least one --panel")
    for p in panels:
        if not p["files"]:
            usage("panel '%s' has no CSV files" % p["title"])
    return out, panels


def read_runs(files):
    """{seed: [(env_steps, return_mean, wall_s)]} over every file, rows without a return left out."""
    runs = {}
    for path in files:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                ret = float(row["episode_return_mean"])
                if math.isnan(ret):
                    continue  # no episode has ended yet
                runs.setdefault(int(row["seed"]), []).append(
                    (int(row["env_steps"]), ret, float(row.get("wall_s") or "nan")))
    for seed in runs:
        runs[seed].sort()
    return runs


def main():
    out, panels = parse(sys.argv[1:])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.2), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        runs = read_runs(panel["files"])
        target = panel["target"]
        print(panel["title"])
        for seed in sorted(runs):
            rows = runs[seed]
            ax.plot([r[0] / 1000 for r in rows], [r[1] for r in rows], linewidth=1.2, label="seed %d" % seed)
            if target is not None:
                hit = next((r for r in rows if r[1] >= target), None)
                if hit:
                    print("  seed %d: %.0f at %d env steps, %.1f s" % (seed, target, hit[0], hit[2]))
                else:
                    print("  seed %d: %.0f not reached (best %.1f in %d env steps)"
                          % (seed, target, max(r[1] for r in rows), rows[-1][0]))
        if target is not None:
            ax.axhline(target, color="grey", linestyle="--", linewidth=0.8)
        ax.set_title(panel["title"], fontsize=10)
        ax.set_xlabel("env steps (thousands)", fontsize=9)
        ax.set_ylabel("mean return, last 100 episodes", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    print("wrote", out)


if __name__ == "__main__":
    main()
