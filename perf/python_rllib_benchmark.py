#!/usr/bin/env python3
"""PPO on CartPole-v1 from Python (prism.rllib) against the same engine from C++
(apps/rl_cartpole), in one run, alternating side by side repetition by repetition:

    /usr/bin/python3 perf/python_rllib_benchmark.py --build=build --reps=5 [--json=out.json]
    /usr/bin/python3 perf/python_rllib_benchmark.py --build=build --reps=3 --envs-per-runner=8

Each side is a fresh 3-rank job per repetition (2 env runners on ranks 1-2 with
--envs-per-runner env copies each, 1 by default; the learner on the driver), RLlib's tuned
CartPole settings (lr 3e-4, num_epochs 6, vf_loss_coeff 0.01, train batch 4000, minibatch 128),
seed = the repetition's index, trained until the mean return of the last 100 episodes reaches
450 (at most 100 iterations):

  cpp         mpirun -n 3 <build>/apps/rl_cartpole --seed=N --curve=<csv> --eval-episodes=0
  python      mpirun -n 3 python3 <this> --child=python --seed=N    (PPOConfig().environment("CartPole-v1"))
  python_env  mpirun -n 3 python3 <this> --child=python_env --seed=N  (a Python CartPole class,
              gymnasium's reset/step, stepped inside the C++ env runners)

Figures per side, median and worst of the repetitions:
  steps_to_450     env steps sampled when the mean return first reached 450 (the C++ and the
                   prism.rllib side run the same engine with the same seed: equal steps show
                   that the Python front end changes nothing the engine does)
  seconds_to_450   wall time of the train() loop until then (build and init excluded)
  env_steps_per_s  env steps / loop time: sampling and learning, what a user sees
  sample_steps_per_s  env steps / the iterations' sampling time (TrainResult::sample_s,
                   timers/env_runner_sampling_timer): the env runners' rate, with the round trip

Measured 2026-12-03 09:24-09:29 and 09:48-09:52 UTC, 2 cores shared with other builds (load
average 2.6-8.6, 31 at one point), median (worst):
  1 copy per runner, 5 seeds:   cpp 104,000 (160,000) steps to 450, 12.3 (14.0) s, 8.9k (7.6k)
      env steps/s, sampling 21.4k (20.0k); python the same steps in 5 of 5 seeds, 10.7 (16.4) s,
      10.5k (8.2k), sampling 34.4k (23.5k); python_env 104,000 (128,000), 11.2 (23.3) s,
      7.8k (4.9k), sampling 20.1k (11.2k). The front end costs nothing measurable: the gaps
      either way are the load's.
  8 copies per runner, 3 seeds: cpp 136,258 (140,240), 8.6 (10.0) s, 14.0k (12.1k), sampling
      141k (136k); python the same steps in 3 of 3, 10.1 (15.1) s, 13.5k (9.3k), sampling 157k
      (121k); python_env 152,266 (164,262), 11.2 (13.0) s, 12.7k (12.6k), sampling 89.5k (85.4k):
      a Python env step (the user's step, the adapter's checks, the GIL) costs about 8 us more
      than the C++ CartPole's inside a runner.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIDES = ("cpp", "python", "python_env")
TUNED = dict(lr=3e-4, num_epochs=6, vf_loss_coeff=0.01)


# ---- the Python children (under mpirun; every rank runs this) ----------------------------

def child(kind, seed, stop, max_iterations, envs, out):
    import prism
    from prism.rllib.algorithms.ppo import PPOConfig  # every rank, before init
    sys.path.insert(0, os.path.join(ROOT, "apps", "python_rllib"))
    from cartpole_env import CartPole

    prism.init()
    t0 = time.monotonic()
    algo = (PPOConfig().environment(CartPole if kind == "python_env" else "CartPole-v1")
            .env_runners(num_env_runners=2, num_envs_per_env_runner=envs).training(**TUNED).debugging(seed=seed).build_algo())
    build_s = time.monotonic() - t0
    start = time.monotonic()
    sampled = sample_s = 0.0
    reached = False
    for _ in range(max_iterations):
        r = algo.train()
        sampled += r["env_runners"]["num_env_steps_sampled"]
        sample_s += r["timers"]["env_runner_sampling_timer"]
        if r["env_runners"]["episode_return_mean"] >= stop:
            reached = True
            break
    loop_s = time.monotonic() - start
    steps = r["num_env_steps_sampled_lifetime"]
    algo.stop()
    with open(out, "w") as f:
        json.dump({"reached": reached, "steps_to_450": steps, "seconds_to_450": loop_s,
                   "env_steps_per_s": steps / loop_s, "sample_steps_per_s": sampled / sample_s,
                   "iterations": r["training_iteration"], "build_s": build_s}, f)
    prism.shutdown()


# ---- the parent ------------------------------------------------------------------------

def mpirun(ranks):
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(ranks)]


def run_cpp(build, seed, stop, max_iterations, envs, timeout):
    with tempfile.NamedTemporaryFile(suffix=".csv", delete=False) as f:
        curve = f.name
    cmd = mpirun(3) + [os.path.join(build, "apps", "rl_cartpole"), f"--seed={seed}", f"--stop-return={stop}",
                       f"--max-iterations={max_iterations}", f"--envs-per-runner={envs}", "--eval-episodes=0",
                       f"--curve={curve}",
                       f"--checkpoint-dir={tempfile.mkdtemp(prefix='prism_rl_bench_')}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 3):
        sys.stderr.write(f"cpp: failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}\n")
        return None
    with open(curve) as f:
        rows = list(csv.DictReader(f))
    os.unlink(curve)
    last = rows[-1]
    steps = int(last["env_steps"])
    loop_s = float(last["wall_s"])
    sample_s = sum(float(r["sample_s"]) for r in rows)
    return {"reached": float(last["episode_return_mean"]) >= stop, "steps_to_450": steps, "seconds_to_450": loop_s,
            "env_steps_per_s": steps / loop_s, "sample_steps_per_s": steps / sample_s,
            "iterations": int(last["iteration"])}


def run_python(kind, build, seed, stop, max_iterations, envs, timeout):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    cmd = mpirun(3) + ["-x", "PYTHONPATH", sys.executable, os.path.abspath(__file__), f"--child={kind}",
                       f"--seed={seed}", f"--stop-return={stop}", f"--max-iterations={max_iterations}",
                       f"--envs-per-runner={envs}", f"--out={out}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0 or os.path.getsize(out) == 0:
        sys.stderr.write(f"{kind}: failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}\n")
        return None
    with open(out) as f:
        result = json.load(f)
    os.unlink(out)
    return result


def summarize(runs, key, worst):
    values = [r[key] for r in runs]
    return statistics.median(values), worst(values), values


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--stop-return", type=float, default=450.0)
    ap.add_argument("--max-iterations", type=int, default=100)
    ap.add_argument("--envs-per-runner", type=int, default=1, help="env copies per runner, both sides")
    ap.add_argument("--only", default=",".join(SIDES))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json")
    ap.add_argument("--child")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run (the peers run's --quick): 1 rep of 3 iterations, figures not comparable")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.max_iterations = 1, 3
    if args.child:
        child(args.child, args.seed, args.stop_return, args.max_iterations, args.envs_per_runner, args.out)
        return 0

    sides = [s for s in args.only.split(",") if s]
    runs = {s: [] for s in sides}
    for rep in range(args.reps):
        for side in sides:
            t = time.monotonic()
            if side == "cpp":
                r = run_cpp(args.build, rep, args.stop_return, args.max_iterations, args.envs_per_runner, args.timeout)
            else:
                r = run_python(side, args.build, rep, args.stop_return, args.max_iterations, args.envs_per_runner,
                               args.timeout)
            if r is None:
                return 1
            r["seed"] = rep
            runs[side].append(r)
            print(f"rep {rep} {side:10s}: {'reached' if r['reached'] else 'NOT reached'} {args.stop_return:g} after "
                  f"{r['steps_to_450']} env steps, {r['seconds_to_450']:.1f} s, {r['env_steps_per_s']:.0f} env steps/s, "
                  f"sampling {r['sample_steps_per_s']:.0f} steps/s ({time.monotonic() - t:.0f} s with start-up)",
                  flush=True)

    print(f"\nmedian (worst) of {args.reps}, seeds 0-{args.reps - 1}:")
    print(f"{'side':12s} {'env steps to 450':>22s} {'seconds to 450':>18s} {'env steps/s':>18s} "
          f"{'sampling steps/s':>20s}")
    report = {}
    for side in sides:
        s_med, s_worst, _ = summarize(runs[side], "steps_to_450", max)
        t_med, t_worst, _ = summarize(runs[side], "seconds_to_450", max)
        e_med, e_worst, _ = summarize(runs[side], "env_steps_per_s", min)
        p_med, p_worst, _ = summarize(runs[side], "sample_steps_per_s", min)
        print(f"{side:12s} {s_med:>12.0f} ({s_worst:>7.0f}) {t_med:>10.1f} ({t_worst:>5.1f}) {e_med:>10.0f} "
              f"({e_worst:>5.0f}) {p_med:>12.0f} ({p_worst:>6.0f})")
        report[side] = {"runs": runs[side], "steps_to_450": [s_med, s_worst], "seconds_to_450": [t_med, t_worst],
                        "env_steps_per_s": [e_med, e_worst], "sample_steps_per_s": [p_med, p_worst]}
    if "cpp" in report and "python" in report:
        same = [a["steps_to_450"] == b["steps_to_450"] for a, b in zip(runs["cpp"], runs["python"])]
        print(f"python vs cpp: the same env steps to 450 in {sum(same)} of {len(same)} seeds; env steps/s "
              f"{report['python']['env_steps_per_s'][0] / report['cpp']['env_steps_per_s'][0] * 100:.0f} % of C++'s "
              "(medians)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
