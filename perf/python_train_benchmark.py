#!/usr/bin/env python3
"""prism.train.torch.TorchTrainer (Python, the C++ Train engine underneath) against torchrun
DDP, running one training loop, in one run, alternating the two repetition by repetition:

    /usr/bin/python3 perf/python_train_benchmark.py --build=build --reps=5 [--json=out.json]

  prism     mpirun --oversubscribe -n 3 python3 <this> --child=prism: rank 0 is the driver
            (TorchTrainer(loop, ScalingConfig(num_workers=2)).fit()); the engine places the
            two workers on two ranks (here ranks 0 and 1: a worker may share the driver's
            process) and prepare_model sets up gloo for them.
  torchrun  python3 -m torch.distributed.run --standalone --nproc_per_node=2 <this>
            --child=torchrun (with perf/script_trainer_benchmark.py's one-line fix for
            Debian's torch 1.13 on Python 3.11): two processes that call
            init_process_group("gloo") and the same loop.

The loop (loop() below) is the same function on both sides: apps/train_fashion_mnist_py's
SmallCnn on Fashion-MNIST (Debian's dataset-fashion-mnist; the first --train-samples
images, 20,000), Adam, batch 128 per worker through a DataLoader with a DistributedSampler
(prism.train.torch.prepare_data_loader builds it on the Prism side, the loop by hand on
torchrun's; drop_last, so every step is a full batch), DDP (prepare_model / by hand),
--epochs epochs (1), one report per epoch (prism.train.report on the Prism side: what a Ray
Train loop calls; nothing on torchrun's; --report-every=N reports every N steps instead).
Both sides run with OMP_NUM_THREADS=1 (torchrun's default for several processes; Prism
gives each worker one torch thread too).

Figures, per launch, from world rank 0 (the median and the worst over --reps launches):
  samples/s        all workers' samples over the steps after --warmup steps (reports and
                   epoch boundaries included), to the end of the last epoch's report
  start-up         the launcher's start to the end of the first training step; of it, the
                   time to the loop's start (process launch, imports, Prism's init, placing
                   the workers, the process group; the rest is the loop's data loading and
                   first step)
  wall             the launcher's whole run
and, from a detail file world rank 0 writes: the median step time, the time in
prepare_model and the data loader's set-up, and the mean time of a report call.

--env=NAME=VALUE sets a variable on both sides; --env=tuned-malloc sets MALLOC_TUNED (below):
glibc's malloc then keeps the memory a step frees instead of handing it back to the system
and faulting it in again at the next step, which is most of a step's time on this VM with
either launcher (perf/README.md, "Python Train and Tune against their peers").
"""
import argparse
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import script_trainer_benchmark as stb  # noqa: E402  (run, TORCHRUN, PY, ROOT: shared with the ScriptTrainer figure)

START = time.time()
# glibc's malloc keeping freed memory instead of returning it to the system at every step
# (perf/README.md: page faults are most of a step's time on this VM, on both sides). One
# arena: the Prism worker's loop runs on an executor thread, whose own arena would still
# unmap whole 64 MiB heaps as they empty, whatever the thresholds.
MALLOC_TUNED = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
FASHION = os.path.join(stb.ROOT, "apps", "train_fashion_mnist_py", "train.py")


def fashion():
    """apps/train_fashion_mnist_py/train.py as a module (its SmallCnn and load_idx). On the
    Prism side import prism first: without prism_train on the path, train.py puts the source
    tree's python/ first on sys.path."""
    mod = sys.modules.get("fashion_mnist_train")
    if mod is None:
        spec = importlib.util.spec_from_file_location("fashion_mnist_train", FASHION)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["fashion_mnist_train"] = mod
        spec.loader.exec_module(mod)
    return mod


def loop(config):
    """The training loop both launchers run (train_loop_per_worker on the Prism side)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    prism_side = config["launcher"] == "prism"
    if prism_side:
        from prism import train
        from prism.train.torch import prepare_data_loader, prepare_model
        report = train.report
    else:
        def prepare_model(m):
            return torch.nn.parallel.DistributedDataParallel(m)

        def prepare_data_loader(loader):
            return DataLoader(loader.dataset, batch_size=loader.batch_size, drop_last=loader.drop_last,
                              sampler=DistributedSampler(loader.dataset, num_replicas=dist.get_world_size(),
                                                         rank=dist.get_rank(), shuffle=True))

        def report(metrics):
            pass
    rank, world = dist.get_rank(), dist.get_world_size()
    chief = rank == 0
    t_loop = time.time()
    mod = fashion()
    torch.manual_seed(0)
    t = time.perf_counter()
    model = prepare_model(mod.SmallCnn())
    prepare_model_s = time.perf_counter() - t
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = mod.load_idx(config["data_dir"], "train", config["train_samples"])
    t = time.perf_counter()
    loader = prepare_data_loader(DataLoader(TensorDataset(x, y), batch_size=config["batch_size"],
                                            shuffle=True, drop_last=True))
    prepare_loader_s = time.perf_counter() - t
    warmup, every = config["warmup"], config["report_every"]
    steps, step_s, report_s = 0, [], []
    t0 = first_step_at = None
    for epoch in range(1, config["epochs"] + 1):
        loader.sampler.set_epoch(epoch)
        model.train()
        loss_sum, n = 0.0, 0
        for xb, yb in loader:
            a = time.perf_counter()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
            n += 1
            steps += 1
            step_s.append(time.perf_counter() - a)
            if steps == 1:
                first_step_at = time.time()
            if steps == 1 and chief:
                print("first step done at %.6f (%.2f s after the script started)" % (time.time(), time.time() - START),
                      flush=True)
            if steps == warmup:
                t0 = time.perf_counter()
            if every and steps % every == 0:
                a = time.perf_counter()
                report({"loss": loss.item(), "step": steps})
                report_s.append(time.perf_counter() - a)
        if not every:
            a = time.perf_counter()
            report({"loss": loss_sum / max(n, 1), "epoch": epoch})
            report_s.append(time.perf_counter() - a)
    t1 = time.perf_counter()
    if t0 is None:
        raise RuntimeError("--warmup %d is not below the %d steps of the run" % (warmup, steps))
    timed = steps - warmup
    samples_per_s = timed * config["batch_size"] * world / (t1 - t0)
    if chief:
        print("epoch %d: %d timed steps after %d warm-up, %d workers, %.1f samples/s"
              % (config["epochs"], timed, warmup, world, samples_per_s), flush=True)
        if config.get("detail"):
            with open(config["detail"], "w") as f:
                json.dump({"samples_per_s": samples_per_s, "steps": steps, "timed_steps": timed,
                           "loop_start": t_loop, "first_step_at": first_step_at, "prepare_model_s": prepare_model_s,
                           "prepare_loader_s": prepare_loader_s,
                           "step_ms_median": statistics.median(step_s[warmup:]) * 1e3,
                           "step_ms_p90": sorted(step_s[warmup:])[int(0.9 * (len(step_s) - warmup))] * 1e3,
                           "reports": len(report_s), "report_ms_mean": statistics.mean(report_s) * 1e3,
                           "torch_threads": torch.get_num_threads(),
                           "interop_threads": torch.get_num_interop_threads(), "pid": os.getpid(),
                           "cpus": sorted(os.sched_getaffinity(0))}, f)


def child_prism(config, name, storage):
    import prism
    import prism.train.torch  # noqa: F401  (every rank, before init: registers the engine's loop)
    from prism.train import RunConfig, ScalingConfig
    from prism.train.torch import TorchTrainer
    fashion()  # after prism (see fashion()); every rank, so the loop's model class resolves
    prism.init()  # ranks other than 0 serve here and exit at the driver's shutdown
    TorchTrainer(loop, train_loop_config=config, scaling_config=ScalingConfig(num_workers=2),
                 run_config=RunConfig(name=name, storage_path=storage, verbose=0)).fit()
    prism.shutdown()


def child_torchrun(config):
    import torch.distributed as dist
    dist.init_process_group("gloo")
    loop(config)
    dist.barrier()
    dist.destroy_process_group()


def summarize(name, rs):
    """Median and worst of each figure (worst: the lowest rate, the longest time)."""
    out = {}
    for key, worst in (("samples_per_s", min), ("startup_s", max), ("to_loop_s", max), ("wall_s", max)):
        vals = [r[key] for r in rs]
        out[key] = {"median": statistics.median(vals), "worst": worst(vals), "all": vals}
    for key in ("step_ms_median", "prepare_model_s", "prepare_loader_s", "report_ms_mean"):
        vals = [r["detail"][key] for r in rs if r.get("detail")]
        if vals:
            out[key] = statistics.median(vals)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(stb.ROOT, "build"))
    ap.add_argument("--reps", type=int, default=None, help="launches of each side (default 5; quick 1)")
    ap.add_argument("--quick", action="store_true", help="1 repetition of 1 small epoch: a smoke run")
    ap.add_argument("--train-samples", type=int, default=None, help="images (default 20000; quick 2048)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=128, help="per worker")
    ap.add_argument("--warmup", type=int, default=5, help="untimed first steps")
    ap.add_argument("--report-every", type=int, default=0, help="report every N steps (0: once per epoch)")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--launchers", default="prism,torchrun", help="which, in order (reversed every other repetition)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="set in both sides' environment (repeatable); --env=tuned-malloc sets the three "
                         "variables of MALLOC_TUNED (see perf/README.md)")
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--child", choices=("prism", "torchrun"), help=argparse.SUPPRESS)
    ap.add_argument("--detail", help=argparse.SUPPRESS)
    ap.add_argument("--name", help=argparse.SUPPRESS)
    ap.add_argument("--storage", help=argparse.SUPPRESS)
    args = ap.parse_args()
    reps = args.reps or (1 if args.quick else 5)
    samples = args.train_samples or (2048 if args.quick else 20000)
    epochs = args.epochs
    config = {"train_samples": samples, "epochs": epochs, "batch_size": args.batch_size, "warmup": args.warmup,
              "report_every": args.report_every, "data_dir": args.data_dir, "detail": args.detail}
    if args.child == "prism":
        return child_prism(dict(config, launcher="prism"), args.name, args.storage)
    if args.child == "torchrun":
        return child_torchrun(dict(config, launcher="torchrun"))

    try:
        import torch  # noqa: F401
    except ImportError as e:
        print("python_train_benchmark: skipped: %s cannot import torch (%s; Debian: python3-torch)"
              % (sys.executable, e), file=sys.stderr)
        return 3
    if not os.path.exists(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")):
        print("python_train_benchmark: skipped: no Fashion-MNIST in %s (Debian: dataset-fashion-mnist)"
              % args.data_dir, file=sys.stderr)
        return 3
    pypath = os.path.join(os.path.abspath(args.build), "python")
    work = tempfile.mkdtemp(prefix="prism-py-train-bench-")
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=pypath, PYTHONDONTWRITEBYTECODE="1")
    extra_env = {}
    for item in args.env:
        if item == "tuned-malloc":
            extra_env.update(MALLOC_TUNED)
        elif "=" in item:
            extra_env[item.split("=", 1)[0]] = item.split("=", 1)[1]
        else:
            ap.error("--env takes NAME=VALUE or tuned-malloc, not %r" % item)
    env.update(extra_env)
    me = os.path.abspath(__file__)
    flags = ["--train-samples=%d" % samples, "--epochs=%d" % epochs, "--batch-size=%d" % args.batch_size,
             "--warmup=%d" % args.warmup, "--report-every=%d" % args.report_every, "--data-dir=" + args.data_dir]
    mpirun = os.environ.get("MPIRUN", "mpirun")
    launchers = {
        "prism": lambda rep, detail: [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "3", stb.PY, me,
                                      "--child=prism", "--name=run%d" % rep, "--storage=" + work,
                                      "--detail=" + detail] + flags,
        "torchrun": lambda rep, detail: [stb.PY, "-c", stb.TORCHRUN, "--standalone", "--nproc_per_node=2", me,
                                         "--child=torchrun", "--detail=" + detail] + flags,
    }
    names = args.launchers.split(",")
    results = {name: [] for name in names}
    print("python_train_benchmark: %d repetitions, %d images x %d epochs, batch %d per worker, 2 workers%s; "
          "load average %s" % (reps, samples, epochs, args.batch_size,
                               "".join(", %s=%s" % kv for kv in sorted(extra_env.items())),
                               " ".join("%.2f" % v for v in os.getloadavg())), flush=True)
    try:
        for rep in range(reps):
            for name in (names if rep % 2 == 0 else names[::-1]):
                detail = os.path.join(work, "detail_%s_%d.json" % (name, rep))
                r = stb.run(launchers[name](rep, detail), env, 900)
                with open(detail) as f:
                    r["detail"] = json.load(f)
                # Start-up = launch to the loop's start (processes, imports, init, placement, the
                # process group) + the loop's own set-up to the end of its first step.
                r["to_loop_s"] = r["startup_s"] - (r["detail"]["first_step_at"] - r["detail"]["loop_start"])
                r["load_avg"] = os.getloadavg()[0]
                results[name].append(r)
                d = r["detail"]
                print("rep %d %-8s samples/s %7.1f  start-up to first step %5.2f s (loop entered at %5.2f s)  "
                      "wall %5.1f s  step %.1f ms  report %.2f ms  prepare_model %.3f s  load %.2f"
                      % (rep + 1, name, r["samples_per_s"], r["startup_s"], r["to_loop_s"], r["wall_s"],
                         d["step_ms_median"], d["report_ms_mean"], d["prepare_model_s"], r["load_avg"]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {name: summarize(name, rs) for name, rs in results.items()}
    print("\n%d launches of each, alternating; median (worst) over launches:" % reps)
    print("| launcher | samples/s | start-up to first step, s | of it, to the loop's start, s | wall, s | step, ms "
          "| report, ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        s = summary[name]
        print("| %s | %.1f (%.1f) | %.2f (%.2f) | %.2f (%.2f) | %.1f (%.1f) | %.1f | %.2f |"
              % (name, s["samples_per_s"]["median"], s["samples_per_s"]["worst"], s["startup_s"]["median"],
                 s["startup_s"]["worst"], s["to_loop_s"]["median"], s["to_loop_s"]["worst"], s["wall_s"]["median"],
                 s["wall_s"]["worst"], s.get("step_ms_median", float("nan")), s.get("report_ms_mean", float("nan"))))
    doc = {"context": {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "reps": reps, "train_samples": samples,
                       "epochs": epochs, "batch_size": args.batch_size, "warmup": args.warmup,
                       "report_every": args.report_every, "build": args.build, "env": extra_env,
                       "load_avg_at_end": list(os.getloadavg())},
           "runs": results, "summary": summary}
    if "prism" in summary and "torchrun" in summary:
        p, t = summary["prism"]["samples_per_s"], summary["torchrun"]["samples_per_s"]
        paired = statistics.median(a["samples_per_s"] / b["samples_per_s"]
                                   for a, b in zip(results["prism"], results["torchrun"]))
        ratio = p["median"] / t["median"]
        doc["ratio_of_medians"], doc["paired_ratio_median"] = ratio, paired
        print("prism / torchrun samples/s: %.3f of the medians, %.3f median of the per-repetition ratios "
              "(target >= 1.0: %s); start-up %+.2f s" % (ratio, paired, "met" if ratio >= 1.0 else "NOT met",
                                                          summary["prism"]["startup_s"]["median"]
                                                          - summary["torchrun"]["startup_s"]["median"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
