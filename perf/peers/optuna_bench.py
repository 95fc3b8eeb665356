#!/usr/bin/env python3
"""Optuna's cost per trial on a cheap analytic objective: the peer of prism::tune's search
benchmark (perf/tune_benchmark.cc, part "search"), which runs this script itself.

The objective is the Branin function over x in [-5, 10], y in [0, 15] (global minimum
0.397887), two float parameters; `study.optimize(objective, n_trials=N)` in one process, one
trial at a time, in-memory storage, Optuna's logging at WARNING (per-trial INFO lines cost
time). Samplers: RandomSampler and TPESampler with Optuna's defaults (10 startup trials, 24
EI candidates, univariate), seeded per round (seed + round). Reported per sampler: wall time
of optimize / N in ms, and the best value found, per round.

    /usr/bin/python3 perf/peers/optuna_bench.py [--quick] [--trials=N] [--rounds=R]
        [--samplers=random,tpe] [--seed=S] [--json=PATH] [--values-out=PATH]

--values-out writes one line per sampler and round, "SAMPLER ROUND WALL_S BEST_VALUE", for
the C++ benchmark to read. Needs Debian's python3-optuna (use /usr/bin/python3: a pyenv
python3 first on PATH does not see Debian's packages); exits 3 ("skipped: ...") without it.
"""

import argparse
import math
import sys
import time

import peerlib

SCRIPT = "optuna_bench.py"
BRANIN_MIN = 0.397887


def branin(x, y):
    a, b, c = 1.0, 5.1 / (4 * math.pi ** 2), 5.0 / math.pi
    r, s, t = 6.0, 10.0, 1.0 / (8 * math.pi)
    return a * (y - b * x * x + c * x - r) ** 2 + s * (1 - t) * math.cos(x) + s


def objective(trial):
    return branin(trial.suggest_float("x", -5.0, 10.0), trial.suggest_float("y", 0.0, 15.0))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="100 trials, 1 round (a smoke run)")
    p.add_argument("--trials", type=int, default=None, help="trials per study (default 1000)")
    p.add_argument("--rounds", type=int, default=None, help="studies per sampler (default 3)")
    p.add_argument("--samplers", default="random,tpe", help="comma-separated: random, tpe")
    p.add_argument("--seed", type=int, default=1, help="round k uses seed + k")
    p.add_argument("--json", default="", help="write the peer JSON here (perf/peers/README.md)")
    p.add_argument("--values-out", default="", help="SAMPLER ROUND WALL_S BEST lines, for the C++ side")
    args = peerlib.fill_defaults(p.parse_args(argv), {"trials": 100, "rounds": 1},
                                 {"trials": 1000, "rounds": 3})
    if args.trials < 1 or args.rounds < 1:
        p.error("--trials and --rounds must be at least 1")
    samplers = [s for s in args.samplers.split(",") if s]
    bad = [s for s in samplers if s not in ("random", "tpe")]
    if bad or not samplers:
        p.error("--samplers takes random and/or tpe, got %r" % args.samplers)
    try:
        import optuna
    except ImportError as e:
        return peerlib.skipped(SCRIPT, "%s cannot import optuna (%s; Debian: python3-optuna)"
                               % (sys.executable, e))
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def make(kind, seed):
        if kind == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed)

    lines, metrics = [], []
    for kind in samplers:
        ms, best = [], []
        for r in range(args.rounds):
            study = optuna.create_study(direction="minimize", sampler=make(kind, args.seed + r))
            t0 = time.perf_counter()
            study.optimize(objective, n_trials=args.trials)
            wall = time.perf_counter() - t0
            if len(study.trials) != args.trials:
                raise RuntimeError("%s: the study ran %d trials, not %d" % (kind, len(study.trials), args.trials))
            ms.append(wall / args.trials * 1e3)
            best.append(study.best_value)
            lines.append("%s %d %.9f %.17g" % (kind, r, wall, study.best_value))
        note = ("Optuna %s, %sSampler, Branin, %d trials, study.optimize in one process"
                % (optuna.__version__, "Random" if kind == "random" else "TPE", args.trials))
        metrics.append(peerlib.metric("optuna_%s_ms_per_trial" % kind, "ms", False, ms, note))
        metrics.append(peerlib.metric("optuna_%s_best_value" % kind, "Branin value", False, best,
                                      note + "; optimum %.6f" % BRANIN_MIN))
    if args.values_out:
        with open(args.values_out, "w") as f:
            f.write("\n".join(lines) + "\n")
    peerlib.write_report(args.json, "optuna", {"mode": "quick" if args.quick else "full",
                                               "trials": args.trials, "rounds": args.rounds,
                                               "optuna": optuna.__version__}, metrics)
    peerlib.print_table("Optuna, Branin, %d trials, median [min, max] of %d round(s)"
                        % (args.trials, args.rounds), metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
