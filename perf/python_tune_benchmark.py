#!/usr/bin/env python3
"""prism.tune's bookkeeping overhead and result throughput for a Python function trainable,
at 1 rank and at 3 ranks, beside Optuna's study.optimize doing the same work, in one run,
alternating the three repetition by repetition:

    /usr/bin/python3 perf/python_tune_benchmark.py --build=build --reps=5 [--json=out.json]

Each side is a child process of its own, started fresh every repetition (prism_tune_benchmark's
method, perf/README.md "Tune", with Python trials):

  prism 1 rank   python3 <this> --child=prism
  prism 3 ranks  mpirun --oversubscribe -n 3 python3 <this> --child=prism
  optuna         python3 <this> --child=optuna (Debian's python3-optuna; one process)

Timed is what the user calls: Tuner(...) and its fit() (prism.init() before, apart: its time
is reported as init_s); Optuna's create_study and optimize.

  overhead    M trials (--trials, 240), each R times (--reports, 40): sleep W (--work-ms, 5
              ms), then report; C at a time (--concurrency, 8: max_concurrent_trials, and
              Optuna's n_jobs, threads). Ideal = M x R x W / C (6 s); overhead = wall / ideal
              - 1 (target <= 3 %), split as prism_tune_benchmark splits it, from what each
              trial measured itself: sleep (time.sleep's own overshoot beyond W: the OS, not
              the tuner), report (time inside the report calls) and idle (trial slots empty:
              launching trials, the driver's bookkeeping between a trial's end and the
              next one's start, the ramp up and down); "without the sleep's overshoot" is
              the overhead less the sleep part: what the tuner can change (with W = 5 ms
              time.sleep overshoots by 2.5-3 % of W on this VM, on either side).
              results/s = M x R / wall.
  throughput  T trials (--tp-trials, 8), all at once, each reporting --tp-reports (1000)
              times with no work in between: results/s = T x reports / wall.

Prism gets ceil(C / ranks) CPUs on each rank (prism.init(num_cpus=...)), so the C trials
spread over the ranks (the scheduler fills rank 0 first). Trials run with verbose=0 on the
Prism side and Optuna's logging at WARNING.
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from python_benchmark import run_child  # noqa: E402  (child process + its JSON, shared)

TARGET_PCT = 3.0
SIDES = ("prism_1rank", "prism_3ranks", "optuna")


# ---- the work, the same on both sides --------------------------------------------------

def work_loop(x, reports, work_s, report):
    """R x (sleep work_s, report); returns what the trial measured: start (wall clock), time
    slept, time inside the reports, end of the last report (wall clock)."""
    t_start = time.time()
    slept = in_report = 0.0
    for i in range(reports):
        if work_s > 0:
            a = time.perf_counter()
            time.sleep(work_s)
            slept += time.perf_counter() - a
        b = time.perf_counter()
        report(x * i, i, t_start, slept, in_report)
        in_report += time.perf_counter() - b
    return t_start, slept, in_report, time.time()


def split(wall, ideal, trials, c, m, r, work_s):
    """prism_tune_benchmark's overhead and its parts, in % of the ideal. trials: one
    (t_start, slept, in_report, t_end) per trial."""
    busy = sum(t[3] - t[0] for t in trials)
    slept = sum(t[1] for t in trials)
    in_report = sum(t[2] for t in trials)
    sleep_pct = (slept - m * r * work_s) / c / ideal * 100
    return {"wall_s": wall, "ideal_s": ideal, "overhead_pct": (wall / ideal - 1) * 100,
            "sleep_pct": sleep_pct, "bookkeeping_pct": (wall / ideal - 1) * 100 - sleep_pct,
            "report_pct": in_report / c / ideal * 100,
            "in_trial_other_pct": (busy - slept - in_report) / c / ideal * 100,
            "idle_pct": (c * wall - busy) / c / ideal * 100,
            "idle_ms_per_trial": (c * wall - busy) / m * 1e3,
            "report_us": in_report / (m * r) * 1e6,
            "results_per_s": m * r / wall}


def edges(fit_start, fit_end, trials):
    return {"startup_s": min(t[0] for t in trials) - fit_start, "tail_s": fit_end - max(t[3] for t in trials)}


# ---- Prism ---------------------------------------------------------------------------

def prism_trial(config):
    from prism import tune

    def report(score, i, t_start, slept, in_report):
        tune.report({"score": score, "t_start": t_start, "slept_s": slept, "report_s": in_report,
                     "t_end": time.time()})
    work_loop(config["x"], config["reports"], config["work_s"], report)


def child_prism(a):
    from prism import tune  # every rank, at the top
    import prism
    ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
    t = time.perf_counter()
    prism.init(num_cpus=math.ceil(a.concurrency / ranks))  # ranks > 0 serve here, then exit
    init_s = time.perf_counter() - t
    storage = tempfile.mkdtemp(prefix="prism-py-tune-bench-")

    def fit(name, trials, concurrency, reports, work_s):
        w0 = time.time()
        t0 = time.perf_counter()
        grid = tune.Tuner(prism_trial, param_space={"x": tune.uniform(0, 1), "reports": reports, "work_s": work_s},
                          tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=trials,
                                                      max_concurrent_trials=concurrency),
                          run_config=tune.RunConfig(name=name, storage_path=storage, verbose=0)).fit()
        wall = time.perf_counter() - t0
        w1 = time.time()
        rows = []
        for res in grid:
            mt = res.metrics
            if res.error is not None or mt.get("training_iteration") != reports:
                raise RuntimeError("trial %s: %s after %s reports" % (res.trial_id, res.error, mt.get("training_iteration")))
            # The last report carries the times up to its call: its own time is counted as
            # the mean of the others' (Optuna's side measures it).
            extra = mt["report_s"] / (reports - 1) if reports > 1 else 0.0
            rows.append((mt["t_start"], mt["slept_s"], mt["report_s"] + extra, mt["t_end"] + extra))
        if len(rows) != trials:
            raise RuntimeError("%s: %d results for %d trials" % (name, len(rows), trials))
        return wall, rows, w0, w1

    import shutil
    out = {"ranks": prism.get_runtime_context().world_size, "init_s": init_s}
    try:
        wall, rows, w0, w1 = fit("overhead", a.trials, a.concurrency, a.reports, a.work_ms / 1e3)
        out["overhead"] = split(wall, a.trials * a.reports * a.work_ms / 1e3 / a.concurrency, rows,
                                a.concurrency, a.trials, a.reports, a.work_ms / 1e3)
        out["overhead"].update(edges(w0, w1, rows))
        wall, rows, w0, w1 = fit("throughput", a.tp_trials, a.tp_trials, a.tp_reports, 0.0)
        out["throughput"] = {"wall_s": wall, "results_per_s": a.tp_trials * a.tp_reports / wall,
                             "report_us": sum(r[2] for r in rows) / (a.tp_trials * a.tp_reports) * 1e6}
        out["throughput"].update(edges(w0, w1, rows))
    finally:
        shutil.rmtree(storage, ignore_errors=True)
    prism.shutdown()
    return out


# ---- Optuna --------------------------------------------------------------------------

def child_optuna(a):
    import threading
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def run(trials, concurrency, reports, work_s, seed):
        rows, lock = [], threading.Lock()

        def objective(trial):
            x = trial.suggest_float("x", 0.0, 1.0)

            def report(score, i, t_start, slept, in_report):
                trial.report(score, i)
            row = work_loop(x, reports, work_s, report)
            with lock:
                rows.append(row)
            return x * (reports - 1)
        w0 = time.time()
        t0 = time.perf_counter()
        study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=seed))
        study.optimize(objective, n_trials=trials, n_jobs=concurrency)
        wall = time.perf_counter() - t0
        w1 = time.time()
        if len(study.trials) != trials or len(rows) != trials:
            raise RuntimeError("optuna ran %d trials, not %d" % (len(study.trials), trials))
        return wall, rows, w0, w1

    out = {"optuna": optuna.__version__}
    wall, rows, w0, w1 = run(a.trials, a.concurrency, a.reports, a.work_ms / 1e3, a.seed)
    out["overhead"] = split(wall, a.trials * a.reports * a.work_ms / 1e3 / a.concurrency, rows, a.concurrency,
                            a.trials, a.reports, a.work_ms / 1e3)
    out["overhead"].update(edges(w0, w1, rows))
    wall, rows, w0, w1 = run(a.tp_trials, a.tp_trials, a.tp_reports, 0.0, a.seed)
    out["throughput"] = {"wall_s": wall, "results_per_s": a.tp_trials * a.tp_reports / wall,
                         "report_us": sum(r[2] for r in rows) / (a.tp_trials * a.tp_reports) * 1e6}
    out["throughput"].update(edges(w0, w1, rows))
    return out


# ---- the driver ----------------------------------------------------------------------

FIGURES = (  # (part, key, label, format, worst)
    ("overhead", "overhead_pct", "overhead, %", "%.2f", max),
    ("overhead", "bookkeeping_pct", "overhead without the sleep's overshoot, %", "%.2f", max),
    ("overhead", "wall_s", "fit / optimize wall, s", "%.3f", max),
    ("overhead", "sleep_pct", "  of it: sleep overshoot, %", "%.2f", max),
    ("overhead", "report_pct", "  of it: inside report, %", "%.2f", max),
    ("overhead", "in_trial_other_pct", "  of it: rest of the trial, %", "%.2f", max),
    ("overhead", "idle_pct", "  of it: slots idle, %", "%.2f", max),
    ("overhead", "idle_ms_per_trial", "slots idle per trial, ms", "%.2f", max),
    ("overhead", "startup_s", "first trial started after, s", "%.3f", max),
    ("overhead", "tail_s", "returned after the last report, s", "%.3f", max),
    ("overhead", "report_us", "report call, us", "%.1f", max),
    ("overhead", "results_per_s", "results/s (overhead run)", "%.0f", min),
    ("throughput", "results_per_s", "results/s, no work", "%.0f", min),
    ("throughput", "report_us", "report call, no work, us", "%.1f", max),
    ("throughput", "tail_s", "returned after the last report, s", "%.3f", max),
)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--reps", type=int, default=None, help="launches of each side (default 5; quick 1)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 1 repetition: a smoke run")
    ap.add_argument("--trials", type=int, default=None, help="M (240; quick 16)")
    ap.add_argument("--reports", type=int, default=None, help="R per trial (40; quick 5)")
    ap.add_argument("--work-ms", type=float, default=5.0, help="W: sleep before each report")
    ap.add_argument("--concurrency", type=int, default=None, help="C trials at a time (8; quick 4)")
    ap.add_argument("--tp-trials", type=int, default=None, help="throughput: trials, all at once (8; quick 4)")
    ap.add_argument("--tp-reports", type=int, default=None, help="throughput: reports each (1000; quick 50)")
    ap.add_argument("--ranks", type=int, default=3, help="ranks of the multi-rank Prism side")
    ap.add_argument("--sides", default=",".join(SIDES), help="which, in order (rotated every repetition)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--child", choices=("prism", "optuna"), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    q = a.quick
    a.reps = a.reps or (1 if q else 5)
    a.trials = a.trials or (16 if q else 240)
    a.reports = a.reports or (5 if q else 40)
    a.concurrency = a.concurrency or (4 if q else 8)
    a.tp_trials = a.tp_trials or (4 if q else 8)
    a.tp_reports = a.tp_reports or (50 if q else 1000)
    if a.child:
        out = child_prism(a) if a.child == "prism" else child_optuna(a)
        if a.out:  # rank 0 only: the other Prism ranks leave in init
            with open(a.out, "w") as f:
                json.dump(out, f)
        return 0

    sides = a.sides.split(",")
    if "optuna" in sides:
        try:
            import optuna  # noqa: F401
        except ImportError as e:
            print("python_tune_benchmark: skipped: %s cannot import optuna (%s; Debian: python3-optuna)"
                  % (sys.executable, e), file=sys.stderr)
            return 3
    me = os.path.abspath(__file__)
    flags = ["--trials=%d" % a.trials, "--reports=%d" % a.reports, "--work-ms=%g" % a.work_ms,
             "--concurrency=%d" % a.concurrency, "--tp-trials=%d" % a.tp_trials, "--tp-reports=%d" % a.tp_reports,
             "--seed=%d" % a.seed]
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(a.build), "python"), PYTHONDONTWRITEBYTECODE="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    mpirun = [os.environ.get("MPIRUN", "mpirun"), "--allow-run-as-root", "--oversubscribe", "-n", str(a.ranks)]
    py = sys.executable
    cmds = {"prism_1rank": [py, me, "--child=prism"] + flags,
            "prism_3ranks": mpirun + [py, me, "--child=prism"] + flags,
            "optuna": [py, me, "--child=optuna"] + flags}
    ideal = a.trials * a.reports * a.work_ms / 1e3 / a.concurrency
    print("python_tune_benchmark: %d repetitions; overhead: %d trials x %d x (sleep %g ms, report), %d at a time, "
          "ideal %.3f s; throughput: %d trials x %d reports; load average %s"
          % (a.reps, a.trials, a.reports, a.work_ms, a.concurrency, ideal, a.tp_trials, a.tp_reports,
             " ".join("%.2f" % v for v in os.getloadavg())), flush=True)
    runs = {s: [] for s in sides}
    failed = False
    for rep in range(a.reps):
        k = rep % len(sides)
        for side in sides[k:] + sides[:k]:
            r = run_child(side, cmds[side], env, 900)
            if r is None:
                failed = True
                continue
            r["load_avg"] = os.getloadavg()[0]
            runs[side].append(r)
            o, t = r["overhead"], r["throughput"]
            print("rep %d %-12s overhead %5.2f %% (wall %.3f s: sleep %.2f, report %.2f, rest %.2f, idle %.2f %%)  "
                  "%6.0f results/s no work  load %.2f"
                  % (rep + 1, side, o["overhead_pct"], o["wall_s"], o["sleep_pct"], o["report_pct"],
                     o["in_trial_other_pct"], o["idle_pct"], t["results_per_s"], r["load_avg"]), flush=True)
    summary = {}
    for side, rs in runs.items():
        if rs:
            summary[side] = {"%s/%s" % (part, key): {"median": statistics.median(r[part][key] for r in rs),
                                                     "worst": worst(r[part][key] for r in rs),
                                                     "all": [r[part][key] for r in rs]}
                             for part, key, _, _, worst in FIGURES}
    shown = [s for s in sides if s in summary]
    print("\nmedian (worst) of %d launches each; ideal %.3f s:" % (a.reps, ideal))
    print("| figure | " + " | ".join(shown) + " |")
    print("| --- |" + " --- |" * len(shown))
    for part, key, label, fmt, _ in FIGURES:
        cells = [("%s (%s)" % (fmt, fmt)) % (summary[s]["%s/%s" % (part, key)]["median"],
                                             summary[s]["%s/%s" % (part, key)]["worst"]) for s in shown]
        print("| %s | %s |" % (label, " | ".join(cells)))
    for side in shown:
        if side.startswith("prism"):
            med = summary[side]["overhead/overhead_pct"]["median"]
            book = summary[side]["overhead/bookkeeping_pct"]["median"]
            print("%s: overhead %.2f %% (median; target <= %.0f %%: %s); without the sleep's overshoot %.2f %% (%s)"
                  % (side, med, TARGET_PCT, "met" if med <= TARGET_PCT else "NOT met", book,
                     "met" if book <= TARGET_PCT else "NOT met"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"context": {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "reps": a.reps, "trials": a.trials,
                                   "reports": a.reports, "work_ms": a.work_ms, "concurrency": a.concurrency,
                                   "ideal_s": ideal, "tp_trials": a.tp_trials, "tp_reports": a.tp_reports,
                                   "ranks": a.ranks, "build": a.build, "load_avg_at_end": list(os.getloadavg())},
                       "runs": runs, "summary": summary}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
