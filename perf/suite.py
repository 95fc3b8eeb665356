#!/usr/bin/env python3
"""Prism's regression suite: merge benchmark JSON, print a table, compare against a
baseline, plot. Python 3 standard library only (plot needs matplotlib).

  suite.py merge --out=SUITE.json [--ranks=N --mode=M ...] PART=FILE.json ...
  suite.py table SUITE.json
  suite.py compare BASELINE.json CURRENT.json [--threshold=0.15] [--callgrind-threshold=0.02]
  suite.py plot --out=DIR SUITE.json ...
  suite.py callgrind --binary=PATH --out=DIR [--iterations=K] [--repeat=R] [--paths=a,b] [--cpu=N|auto|none]
  suite.py check SUITE.json          (is it a well-formed suite file? exit 0 or 2)
  suite.py degrade IN OUT --metric=NAME [--factor=2]   (for tests: one metric made worse)

compare exits 0 if no metric is worse than its threshold, 1 if one is, 2 if an input is
missing or malformed. See perf/README.md, "Regression suite". callgrind counts the
instructions of prism_hotpath_benchmark's paths, under valgrind pinned to one CPU: the
task and actor paths on every thread minus the instructions spent waiting for another
thread, the serialization paths on the calling thread (see "callgrind" below and
perf/README.md, "Instruction counts (callgrind)").
"""

import argparse
import datetime
import json
import math
import os
import re
import socket
import subprocess
import sys

# ---- What each metric is normalised by ---------------------------------------------------
#
# A metric's "slowdown" is how many times more it costs now than in the baseline: for a
# higher-is-better figure baseline / current, for a lower-is-better one current / baseline
# (> 1 means worse). The same run's reference figures say how much slower the machine is:
# the normalised slowdown is the metric's slowdown divided by its reference's. Rules are
# tried in order; the first whose pattern matches the name decides.
REFERENCES = {
    "memcpy": "reference_memcpy_gigabytes",
    "pingpong_latency": "reference_mpi_pingpong_latency",
    "pingpong_bandwidth": "reference_mpi_pingpong_gigabytes",
    "matmul": "reference_matmul_gflops",
    "hdf5_write": "hdf5_raw_write",
}
NORMALISATION_RULES = [
    # (name pattern, reference key or None for raw, why)
    (r"^reference_|^memcpy_gigabytes|^hdf5_raw_write$|^allreduce_raw_mpi/", "reference",
     "a reference figure: reported, never judged"),
    (r"^callgrind/", None, "instruction counts: raw, their own threshold"),
    (r"^allreduce_collective/", "pingpong_bandwidth", "collective bandwidth: MPI ping-pong 1 MiB bandwidth"),
    (r"^save_state_dict$", "hdf5_write", "checkpoint write: raw HDF5 write of the same bytes, same run"),
    (r"^train_", "matmul", "training samples/s: matrix-multiply GFLOP/s"),
    (r"^tune_search_optuna/", "reference", "a peer's figure (Optuna, same run): shown, never judged"),
    (r"^tune_bookkeeping_", None, "Tune bookkeeping overhead over sleeping trials: raw (the ideal is the sleep)"),
    (r"^data_ingest|^data_map_batches", "memcpy", "Data ingest GiB/s: memcpy GB/s (a spanning batch is one copy)"),
    (r"^mpi_alltoallv_raw$", "reference", "raw MPI_Alltoallv of the shuffle's bytes, same run: a reference figure"),
    (r"^data_random_shuffle$", None, "Data shuffle GiB/s: raw (its target is a ratio to mpi_alltoallv_raw, same run)"),
    (r"^rl_env_", "matmul", "raw RL environment steps/s on one core: matrix-multiply GFLOP/s (CPU-bound)"),
    (r"^rl_sampling_", "matmul", "PPO sampling steps/s with policy inference: matrix-multiply GFLOP/s (CPU-bound)"),
    (r"^data_udf_call$|^data_memory_", None, "Data UDF call time, memory and spilled bytes: raw, their own targets"),
    (r"^serve_http_alone_|^serve_actor_call_", "reference",
     "Serve's same-run references (the HTTP layer alone, plain actor calls): reported, never judged"),
    (r"^serve_", None, "Serve requests/s, latencies and autoscaling times: raw, their own targets"),
    (r"^head_|^scheduler_|^pg_create_|^actor_creation_|^heartbeat|^init_exchange_|^control_", None,
     "the head simulation (one process, simulated ranks): raw, their own targets"),
    (r"gigabytes|^broadcast/", "memcpy", "object bandwidth (put, get, broadcast): memcpy GB/s"),
    (r".", "pingpong_latency", "tasks, actors, objects, placement groups: MPI ping-pong 8 B latency"),
]

# Bytes (memory, traffic, spilled), batches and messages per second (control traffic) and a
# fraction of a core: less is better.
LOWER_IS_BETTER_UNITS = {"ns", "us", "ms", "s", "%", "instructions/op", "bytes", "bytes/s", "batches",
                         "messages/s", "fraction"}
PART_GROUPS = {
    "reference": "reference",
    "micro": None,  # decided per benchmark below
    "collective": "collective",
    "train": "training",
    "checkpoint": "checkpoint",
    "callgrind": "callgrind",
    "tune": "tune",
    "data_ingest": "data",
    "data_memory": "data",
    "data_shuffle": "data",
    "rl": "rl",
    "rl_sampling": "rl",
    "serve_http": "serve",
    "serve": "serve",
    "scale": "scale",
    "python": "python",
}


class InputError(Exception):
    """A missing or malformed input file: compare exits 2."""


def normalisation(name):
    for pattern, ref, why in NORMALISATION_RULES:
        if re.search(pattern, name):
            return ref, why
    raise AssertionError("the last rule matches every name")


def micro_group(name):
    if "actor" in name:
        return "actors"
    if name.startswith(("cross_rank_get", "broadcast", "multi_client_put")):
        return "transfer"
    if name.startswith("memcpy"):
        return "reference"
    return "core"


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise InputError("%s: no such file" % path)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError("%s: not valid JSON (%s)" % (path, e))
    except OSError as e:
        raise InputError("%s: cannot read (%s)" % (path, e))


def number(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


# ---- merge -------------------------------------------------------------------------------

def convert_entry(part, b):
    """One benchmark entry of a part's JSON as a suite entry (Google Benchmark aggregate)."""
    name = b.get("name")
    if not isinstance(name, str):
        raise InputError("%s: a benchmark has no name" % part)
    unit = b.get("unit")
    value = number(b.get("median"))
    if value is None and part == "train":  # train_benchmark writes samples/s only
        value, unit = number(b.get("items_per_second")), "samples/s"
    if value is None or not unit:
        raise InputError("%s: benchmark %s has no median value and unit" % (part, name))
    group = PART_GROUPS.get(part) or micro_group(name)
    e = {
        "name": name,
        "run_name": name,
        "run_type": "aggregate",
        "aggregate_name": "median",
        "aggregate_unit": "time",
        "repetitions": b.get("repetitions", len(b.get("per_round", [])) or 1),
        "iterations": b.get("iterations", 1),
        "real_time": number(b.get("real_time")),
        "cpu_time": number(b.get("cpu_time", b.get("real_time"))),
        "time_unit": b.get("time_unit", "us"),
        "items_per_second": number(b.get("items_per_second")),
    }
    if number(b.get("bytes_per_second")) is not None:
        e["bytes_per_second"] = b["bytes_per_second"]
    ref, _ = normalisation(name)
    e.update({
        "unit": unit,
        "value": value,
        "min": number(b.get("min")),
        "max": number(b.get("max")),
        # "us (p50 round trip)": the unit is the first word
        "higher_is_better": unit.split(" ")[0] not in LOWER_IS_BETTER_UNITS,
        "group": group,
        "part": part,
        "normalised_by": ref,
    })
    for k in ("per_round", "bytes", "label"):
        if k in b:
            e[k] = b[k]
    # A row measured over several launches (perf/hot_path_runs.sh --micro-json): value is the
    # median of the launches' medians, min/max are across launches, not across rounds.
    if isinstance(b.get("per_launch"), list) and b.get("range") == "launches":
        e["range"] = "launches"
        e["launches"] = b.get("launches", len(b["per_launch"]))
        e["per_launch"] = b["per_launch"]
        for k in ("worst", "target", "target_met_runs", "per_round_by_launch"):
            if k in b:
                e[k] = b[k]
    return e


def git_commit(tree=None):
    """HEAD of the git tree holding `tree` (default: this script), "-dirty" if tracked files changed."""
    tree = tree or os.path.dirname(os.path.abspath(__file__))
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree,
                           capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=tree, capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            return r.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def cmd_merge(args):
    benchmarks, parts = [], {}
    for item in args.inputs:
        part, sep, path = item.partition("=")
        if not sep or part not in PART_GROUPS:
            raise InputError("input '%s' is not PART=FILE with PART one of %s" % (item, ", ".join(PART_GROUPS)))
        d = load_json(path)
        if not isinstance(d, dict) or not isinstance(d.get("benchmarks"), list):
            raise InputError("%s: no \"benchmarks\" list" % path)
        ctx = d.get("context", {})
        parts[part] = {"file": os.path.basename(path),
                       "prism_git_commit": ctx.get("prism_git_commit"),
                       "mpi_ranks": ctx.get("mpi_ranks"), "mode": ctx.get("mode"),
                       "load_avg_at_start": ctx.get("load_avg_at_start")}
        if ctx.get("callgrind_counting"):
            parts[part]["callgrind_counting"] = ctx["callgrind_counting"]
        if ctx.get("hot_path_launches"):
            parts[part]["hot_path_launches"] = ctx["hot_path_launches"]
        benchmarks += [convert_entry(part, b) for b in d["benchmarks"]]
    names = [b["name"] for b in benchmarks]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError("the same benchmark name comes from two parts: %s" % ", ".join(dup))
    first_ctx = {}  # the first value of each context field the parts report
    for item in args.inputs:
        for k, v in load_json(item.partition("=")[2]).get("context", {}).items():
            if v and k not in first_ctx:
                first_ctx[k] = v
    split = lambda s: [x for x in (s or "").split(",") if x]
    context = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": socket.gethostname(),
        "executable": "perf/run_suite.sh",
        "num_cpus": os.cpu_count(),
        "mhz_per_cpu": first_ctx.get("mhz_per_cpu", 0),
        "cpu_scaling_enabled": False,
        "caches": [],
        "load_avg": [float(x) for x in (args.load_end or "0 0 0").split()],
        "load_avg_at_start": [float(x) for x in (args.load_start or "0 0 0").split()],
        "library_build_type": "release",
        "prism_git_commit": git_commit(),
        "mpi_library_version": first_ctx.get("mpi_library_version", ""),
        "ranks": args.ranks,
        "mode": args.mode,
        "duration_s": args.duration,
        "build_dir": args.build_dir,
        "parts": parts,
        "failed_parts": split(args.failed),
        "skipped_parts": split(args.skipped),
        "statistic": "median across rounds (min/max across rounds alongside); entries with \"range\": "
                     "\"launches\" (the hot-path rows): the median of several launches' medians, min/max across "
                     "launches, every launch's in per_launch; callgrind: instructions per operation",
    }
    out = {"context": context, "benchmarks": benchmarks}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    print("merged %d benchmarks from %d parts into %s" % (len(benchmarks), len(parts), args.out))
    return 0


# ---- table -------------------------------------------------------------------------------

def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return "{:,.0f}".format(v)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.3g" % v


GROUP_ORDER = ["reference", "core", "actors", "transfer", "collective", "training", "checkpoint", "tune",
               "data", "rl", "serve", "python", "callgrind"]


def check_suite(d, path):
    if not isinstance(d, dict) or not isinstance(d.get("benchmarks"), list):
        raise InputError("%s: not a suite file: no \"benchmarks\" list (make one with perf/run_suite.sh)" % path)
    for i, b in enumerate(d["benchmarks"]):
        if not isinstance(b, dict) or not isinstance(b.get("name"), str):
            raise InputError("%s: benchmark #%d has no name" % (path, i))
        if "value" not in b and number(b.get("median")) is not None and isinstance(b.get("unit"), str):
            # A part's own file (e.g. callgrind.json, microbenchmark.json): read its median.
            b["value"] = b["median"]
            b.setdefault("higher_is_better", b["unit"] not in LOWER_IS_BETTER_UNITS and not b.get("lower_is_better"))
        if number(b.get("value")) is None or not isinstance(b.get("unit"), str):
            raise InputError("%s: benchmark %s has no numeric \"value\" and \"unit\" (not a suite.py merge output?)"
                             % (path, b["name"]))
    return d


def cmd_table(args):
    d = check_suite(load_json(args.suite), args.suite)
    c = d.get("context", {})
    lines = ["Prism regression suite: %s ranks, %s mode, commit %s, %s, %s s; load average %s at start, %s at end."
             % (c.get("ranks"), c.get("mode"), c.get("prism_git_commit"), c.get("date"), c.get("duration_s"),
                " ".join("%.2f" % x for x in c.get("load_avg_at_start", [])),
                " ".join("%.2f" % x for x in c.get("load_avg", []))),
             "",
             "| group | benchmark | median [min, max] | unit |",
             "|---|---|---|---|"]
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    launches = set()
    for b in sorted(d["benchmarks"], key=lambda b: order.get(b.get("group"), 99)):
        rng = ""
        if b.get("min") is not None and b.get("max") is not None:
            rng = " [%s, %s]" % (fmt(b["min"]), fmt(b["max"]))
        if b.get("range") == "launches":
            rng += " over %s launches" % b.get("launches")
            launches.add(b.get("launches"))
        lines.append("| %s | %s | %s%s | %s |" % (b.get("group", ""), b["name"], fmt(b["value"]), rng, b["unit"]))
    if launches:
        lines += ["", "Rows \"over N launches\": each of N mpirun launches gives its median across rounds; the "
                      "table shows the median of those and [min, max] across the launches (perf/hot_path_runs.sh). "
                      "Other rows: one launch's median [min, max] across rounds."]
    if c.get("failed_parts"):
        lines += ["", "FAILED parts: " + ", ".join(c["failed_parts"])]
    if c.get("skipped_parts"):
        lines += ["", "Skipped parts (not built or no tool): " + ", ".join(c["skipped_parts"])]
    print("\n".join(lines))
    return 0


# ---- compare -----------------------------------------------------------------------------

def slowdown(b, cur):
    """How many times more `cur` costs than `b` (> 1 = worse); None if undefined."""
    bv, cv = b["value"], cur["value"]
    if bv <= 0 or cv <= 0:
        return None
    return cv / bv if not b.get("higher_is_better", True) else bv / cv


def reference_usable(slowdown_factor, max_shift):
    """A reference that moved by more than max_shift between two runs on the same kind of
    machine measures something else than the machine's speed (on this 2-core VM the MPI
    ping-pong flips between about 1.2 and 5.5 us with the placement of the ranks on the
    cores): its metrics are then compared raw instead of being scaled by it."""
    return 1 / max_shift <= slowdown_factor <= max_shift


def ranges_overlap(b, c):
    """Whether the [min, max] across rounds of the two runs overlap (both must have them)."""
    if None in (b.get("min"), b.get("max"), c.get("min"), c.get("max")):
        return False
    return b["min"] <= c["max"] and c["min"] <= b["max"]


def callgrind_counting(ctx):
    """How a file's callgrind/* figures were counted (a callgrind.json or a merged suite file)."""
    return (ctx.get("callgrind_counting") or ctx.get("parts", {}).get("callgrind", {}).get("callgrind_counting")
            or CALLGRIND_COUNTING_BEFORE)


def cmd_compare(args):
    base = check_suite(load_json(args.baseline), args.baseline)
    cur = check_suite(load_json(args.current), args.current)
    bmap = {b["name"]: b for b in base["benchmarks"]}
    cmap = {b["name"]: b for b in cur["benchmarks"]}
    bc, cc = base.get("context", {}), cur.get("context", {})

    ref_slowdown = {}
    for key, name in REFERENCES.items():
        if name in bmap and name in cmap:
            ref_slowdown[key] = slowdown(bmap[name], cmap[name])

    print("baseline: %s (%s ranks, %s mode, commit %s, load %s)" % (
        args.baseline, bc.get("ranks"), bc.get("mode"), bc.get("prism_git_commit"), bc.get("load_avg_at_start")))
    print("current:  %s (%s ranks, %s mode, commit %s, load %s)" % (
        args.current, cc.get("ranks"), cc.get("mode"), cc.get("prism_git_commit"), cc.get("load_avg_at_start")))
    for k in ("ranks", "mode"):
        if bc.get(k) != cc.get(k):
            print("WARNING: %s differ (%s vs %s): the figures are not comparable" % (k, bc.get(k), cc.get(k)))
    if any(n.startswith("callgrind/") and n in cmap for n in bmap):
        bm, cm = callgrind_counting(bc), callgrind_counting(cc)
        if bm != cm:
            print("WARNING: the instruction counts were counted differently (baseline: %s; current: %s): "
                  "re-baseline (perf/README.md)" % (bm, cm))
    print("threshold: a metric regresses if its normalised slowdown exceeds %.2f (%.0f%% worse); "
          "instruction counts (callgrind/*) are not normalised and regress beyond %.2f (%.0f%%)"
          % (1 + args.threshold, 100 * args.threshold, 1 + args.callgrind_threshold, 100 * args.callgrind_threshold))
    print("slowdown = baseline/current for higher-is-better, current/baseline for lower-is-better (> 1 = worse);")
    print("normalised = slowdown / the reference's slowdown in the same runs; a reference that moved more than "
          "%.1fx is not used (--max-reference-shift). References:" % args.max_reference_shift)
    for key, name in REFERENCES.items():
        s = ref_slowdown.get(key)
        state = "n/a (missing in one file): raw"
        if s:
            state = "%.3f" % s
            if not reference_usable(s, args.max_reference_shift):
                state += "  UNUSABLE (moved more than %.1fx): its metrics are compared raw" % args.max_reference_shift
        print("  %-18s %-34s machine slowdown %s" % (key, name, state))
    print("Normalisation by name (first match):")
    for pattern, ref, why in NORMALISATION_RULES:
        print("  %-55s -> %s" % (pattern, why))
    print()

    hdr = "%-40s %14s %14s %-12s %7s %8s %8s  %s" % ("metric", "baseline", "current", "unit", "raw x", "slowdown",
                                                     "normal.", "verdict")
    print(hdr)
    print("-" * len(hdr))
    worse, missing = [], []
    for name, b in bmap.items():
        c = cmap.get(name)
        if c is None:
            missing.append(name)
            continue
        ref, _ = normalisation(name)
        s = slowdown(b, c)
        raw = c["value"] / b["value"] if b["value"] else float("nan")
        if s is None:
            norm, verdict = None, "no ratio (zero value)"
        elif ref == "reference":
            norm, verdict = None, "reference"
        else:
            threshold = args.callgrind_threshold if name.startswith("callgrind/") else args.threshold
            rs = ref_slowdown.get(ref) if ref else 1.0
            note = ""
            if ref and not rs:
                rs, note = 1.0, " (no reference: raw)"
            elif ref and not reference_usable(rs, args.max_reference_shift):
                rs, note = 1.0, " (reference moved %.2fx: raw)" % ref_slowdown[ref]
            norm = s / rs
            if norm > 1 + threshold:
                verdict = "WORSE" + note
                if ranges_overlap(b, c):
                    verdict += " (%s ranges overlap: maybe noise)" % (
                        "launch" if c.get("range") == "launches" else "round")
                worse.append(name)
            elif norm < 1 - threshold:
                verdict = "better" + note
            else:
                verdict = "ok" + note
        print("%-40s %14s %14s %-12s %7s %8s %8s  %s" % (
            name, fmt(b["value"]), fmt(c["value"]), b["unit"][:12], "%.3f" % raw,
            "%.3f" % s if s else "-", "%.3f" % norm if norm else "-", verdict))
    new = [n for n in cmap if n not in bmap]
    print()
    if missing:
        print("not in the current run (not judged): " + ", ".join(missing))
    if new:
        print("new in the current run (no baseline): " + ", ".join(new))
    if cc.get("failed_parts"):
        print("current run had FAILED parts: " + ", ".join(cc["failed_parts"]))
    judged = len(bmap) - len(missing)
    if worse:
        print("REGRESSION: %d of %d metrics worse than the threshold: %s" % (len(worse), judged, ", ".join(worse)))
        return 1
    print("OK: no metric worse than the threshold (%d compared)" % judged)
    return 0


# ---- plot --------------------------------------------------------------------------------

THROUGHPUT_VS_RANKS = ["single_client_tasks_async", "multi_client_tasks_async", "multi_client_tasks_async_threads",
                       "1_n_actor_calls_async", "n_n_actor_calls_async", "1_1_actor_calls_async"]


def size_mib(b):
    m = re.search(r"/(\d+)(MiB|KiB|GiB)$", b["name"])
    if m:
        return int(m.group(1)) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[m.group(2)]
    if number(b.get("bytes")):
        return b["bytes"] / 2 ** 20
    return None


def cmd_plot(args):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        # Debian's python3-matplotlib belongs to /usr/bin/python3; another python3 first on
        # PATH (pyenv, a venv) may lack it: run this command again with the system's.
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system):
            print("suite.py plot: no matplotlib in %s; running again with %s" % (sys.executable, system))
            sys.stdout.flush()
            os.execv(system, [system, os.path.abspath(__file__)] + sys.argv[1:])
        raise InputError("matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
    suites = [check_suite(load_json(p), p) for p in args.suites]
    os.makedirs(args.out, exist_ok=True)
    written = []

    # Throughput against ranks, one line per benchmark, from every suite file given.
    by_ranks = {}
    for d in suites:
        r = d.get("context", {}).get("ranks")
        for b in d["benchmarks"]:
            if b["name"] in THROUGHPUT_VS_RANKS:
                by_ranks.setdefault(b["name"], {})[r] = b
    if by_ranks:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name in THROUGHPUT_VS_RANKS:
            pts = sorted(by_ranks.get(name, {}).items())
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1]["value"] / 1e3 for p in pts]
            lo = [(p[1]["value"] - (p[1].get("min") or p[1]["value"])) / 1e3 for p in pts]
            hi = [((p[1].get("max") or p[1]["value"]) - p[1]["value"]) / 1e3 for p in pts]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=name)
        ax.set_xlabel("MPI ranks (2 cores)")
        ax.set_ylabel("thousand tasks or calls / s (median, bars: min-max)")
        ax.set_title("Prism throughput against ranks")
        ax.set_xticks(sorted({r for v in by_ranks.values() for r in v}))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(args.out, "throughput_vs_ranks.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

    # Bandwidth against object size, from the suite file with the most bandwidth figures
    # (a file from a run whose transfer benchmarks failed has fewer), then the most ranks.
    d = max(suites, key=lambda d: (sum(b["unit"].startswith("GB/s") for b in d["benchmarks"]),
                                   d.get("context", {}).get("ranks") or 0))
    series = {}
    for b in d["benchmarks"]:
        if (b["unit"].startswith("GB/s") and b.get("group") != "checkpoint"
                and not b["name"].startswith(("reference_mpi", "memcpy_gigabytes_first_touch"))):
            s = size_mib(b)
            if s is None and b["name"] in ("single_client_put_gigabytes", "memcpy_gigabytes"):
                s = 256  # both copy 256 MiB (perf/README.md)
            if s is None and b["name"] == "reference_memcpy_gigabytes":
                s = 64
            if s is None:
                continue
            family = b["name"].split("/")[0]
            series.setdefault(family, []).append((s, b))
    if series:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for family, pts in sorted(series.items()):
            pts.sort(key=lambda p: p[0])
            ax.plot([p[0] for p in pts], [p[1]["value"] for p in pts],
                    marker="o", linestyle="-" if len(pts) > 1 else "none", label=family)
        ax.set_xscale("log", base=2)
        ticks = sorted({p[0] for pts in series.values() for p in pts})
        ax.set_xticks(ticks)
        ax.set_xticklabels(["%g" % t for t in ticks])
        ax.set_xlabel("object / message size (MiB)")
        ax.set_ylabel("GB/s (median)")
        ax.set_title("Prism bandwidth against size (%s ranks)" % d.get("context", {}).get("ranks"))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        path = os.path.join(args.out, "bandwidth_vs_size.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    if not written:
        raise InputError("nothing to plot: the suite files hold none of the plotted benchmarks")
    for p in written:
        print("wrote", p)
    return 0


# ---- check and degrade (used by the ctest smoke tests) -------------------------------------

CONTEXT_KEYS = ["date", "host_name", "num_cpus", "prism_git_commit", "ranks", "mode", "load_avg",
                "load_avg_at_start"]
ENTRY_KEYS = {"name": str, "run_name": str, "run_type": str, "aggregate_name": str, "time_unit": str,
              "unit": str, "higher_is_better": bool}


def cmd_check(args):
    d = check_suite(load_json(args.suite), args.suite)
    ctx = d.get("context")
    if not isinstance(ctx, dict):
        raise InputError("%s: no \"context\" object" % args.suite)
    missing = [k for k in CONTEXT_KEYS if k not in ctx]
    if missing:
        raise InputError("%s: context lacks %s" % (args.suite, ", ".join(missing)))
    if not d["benchmarks"]:
        raise InputError("%s: no benchmarks" % args.suite)
    for b in d["benchmarks"]:
        for k, t in ENTRY_KEYS.items():
            if not isinstance(b.get(k), t):
                raise InputError("%s: benchmark %s: \"%s\" missing or not a %s" % (args.suite, b["name"], k, t.__name__))
        if b["run_type"] != "aggregate" or b["aggregate_name"] != "median":
            raise InputError("%s: benchmark %s is not a median aggregate" % (args.suite, b["name"]))
        for k in ("real_time", "cpu_time"):
            if b.get(k) is not None and number(b[k]) is None:
                raise InputError("%s: benchmark %s: %s is not a number" % (args.suite, b["name"], k))
    groups = sorted({b.get("group", "?") for b in d["benchmarks"]})
    print("ok: %s: %d benchmarks (%s), %s ranks, %s mode%s" % (
        args.suite, len(d["benchmarks"]), ", ".join(groups), ctx["ranks"], ctx["mode"],
        "; FAILED parts: " + ", ".join(ctx["failed_parts"]) if ctx.get("failed_parts") else ""))
    if args.require:
        want = [g for g in args.require.split(",") if g]
        absent = [g for g in want if g not in groups]
        if absent:
            raise InputError("%s: no benchmarks of group(s) %s" % (args.suite, ", ".join(absent)))
    return 0


def cmd_degrade(args):
    d = check_suite(load_json(args.input), args.input)
    hit = [b for b in d["benchmarks"] if b["name"] == args.metric]
    if not hit:
        raise InputError("%s: no metric named %s" % (args.input, args.metric))
    b = hit[0]
    b["value"] = b["value"] * args.factor if not b.get("higher_is_better", True) else b["value"] / args.factor
    with open(args.output, "w") as f:
        json.dump(d, f, indent=2)
    print("%s: %s made %gx worse -> %s" % (args.input, args.metric, args.factor, args.output))
    return 0


# ---- callgrind ---------------------------------------------------------------------------
#
# What a count holds (perf/README.md, "Instruction counts (callgrind)"): the instructions
# that every thread executes between the benchmark's start and stop, minus those spent
# waiting for another thread. How long a thread spins, and whether it sleeps and must be
# woken, depends on how the threads happened to interleave, not on what the operation
# costs. Two measures keep the count to the operation:
#   1. --separate-callers names each function by its call chain. Chains that pass through a
#      function that waits or wakes (WAIT_C_FUNCTIONS, WAIT_CXX_FUNCTIONS) are excluded, and
#      so are the lines of Prism's spin helpers (SPIN_FILES, inlined into their callers) with
#      the calls they make (steady_clock::now, which never waits).
#   2. valgrind runs on one CPU. It runs one guest thread at a time anyway; on one core the
#      thread that wakes another keeps running instead of racing the woken thread for
#      valgrind's lock. That race decides which thread runs the head's handlers; the two
#      outcomes differed by up to 3.8 % in all instructions, and still by up to 0.9 % with
#      the waiting excluded.

CALLGRIND_PATHS = ["task_roundtrip", "actor_call", "serialize_1kib", "deserialize_1kib", "serialize_1kib_pod"]
# Paths that run on the calling thread alone: counted only inside the benchmark's HotPath*
# functions, so that the runtime's background threads (which may run during the window)
# add nothing. The task and actor paths span several threads and are counted over all.
SINGLE_THREAD_PATHS = {"serialize_1kib", "deserialize_1kib", "serialize_1kib_pod"}
# Recorded in the JSON context; compare warns when two files were counted differently.
CALLGRIND_COUNTING = "every thread minus waiting, on one CPU (since issue 13)"
CALLGRIND_COUNTING_BEFORE = "every thread, waiting included (before issue 13)"
CALLER_DEPTH = 64  # --separate-callers: far deeper than any chain of these paths (about 30)
# Blocking, sleeping, yielding and waking (glibc; "@@GLIBC_x" versions are stripped).
WAIT_C_FUNCTIONS = re.compile(
    r"(pthread_cond_(timed|clock)?wait|__pthread_cond_wait_common|__futex_abstimed_wait\w*|futex_wait\w*"
    r"|__lll_lock_wait\w*|sched_yield|_*nanosleep|_*clock_nanosleep\w*|usleep"
    r"|pthread_cond_signal|pthread_cond_broadcast|__lll_lock_wake\w*|futex_wake\w*)")
# The same in C++ (libstdc++'s condition variables and sleep, Prism's spin helpers when they
# are not inlined); a name may start with its return type.
WAIT_CXX_FUNCTIONS = re.compile(
    r"(^|\s)(std::(_V2::)?condition_variable(_any)?::(wait|wait_for|wait_until|__wait_until_impl|notify_one"
    r"|notify_all)|std::this_thread::__sleep_for|prism::(internal::SpinWhile|platform::PollPause))\b")
# Prism's spin helpers (src/common/spin_wait.h): the bounded busy-waits before a sleep.
SPIN_FILES = ("spin_wait.h", "poll.h")


def waits(context):
    """Whether a callgrind function context (name'caller'caller's caller...) is inside a
    waiting function."""
    for frame in context.split("'"):
        if WAIT_C_FUNCTIONS.fullmatch(frame.split("@")[0]) or WAIT_CXX_FUNCTIONS.search(frame):
            return True
    return False


def read_callgrind_dump(path):
    """Instructions (Ir) of one callgrind dump: total, waiting (chains through a waiting
    function), spinning (lines of SPIN_FILES and what they call) and the deepest chain."""
    ids = {"fl": {}, "fn": {}, "ob": {}}
    space = {"fl": "fl", "fi": "fl", "fe": "fl", "cfl": "fl", "cfi": "fl", "fn": "fn", "cfn": "fn",
             "ob": "ob", "cob": "ob"}
    spec = re.compile(r"(fl|fi|fe|fn|cfn|cfl|cfi|ob|cob)=(?:\((\d+)\))?\s*(.*)")
    fn = fl = file = callee = ""
    n_pos, ir = 1, 0
    waiting = spinning = self_sum = depth = 0
    in_call, totals = False, None
    wait_cache = {"": False}
    with open(path) as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                cols = line.split()
                cost = int(cols[n_pos + ir]) if len(cols) > n_pos + ir else 0
                fn_waits = wait_cache[fn]
                if in_call:  # the inclusive cost of the call on the line before
                    in_call = False
                    if file.endswith(SPIN_FILES) and not fn_waits:
                        if callee not in wait_cache:
                            wait_cache[callee] = waits(callee)
                        spinning += 0 if wait_cache[callee] else cost  # a waiting callee is in `waiting`
                    continue
                self_sum += cost
                if fn_waits:
                    waiting += cost
                elif file.endswith(SPIN_FILES):
                    spinning += cost
                continue
            m = spec.fullmatch(line.rstrip("\n"))
            if m:
                key, ident, name = m.groups()
                if ident is not None:
                    table = ids[space[key]]
                    name = table.setdefault(ident, name) if name else table.get(ident, "")
                if key == "fn":
                    fn, file = name, fl
                    if fn not in wait_cache:
                        wait_cache[fn] = waits(fn)
                        depth = max(depth, fn.count("'"))
                elif key == "fl":
                    fl = file = name
                elif key in ("fi", "fe"):
                    file = name
                elif key == "cfn":
                    callee = name
            elif line.startswith("calls="):
                in_call = True
            elif line.startswith("positions:"):
                n_pos = len(line.split()) - 1
            elif line.startswith("events:"):
                events = line.split()[1:]
                if "Ir" not in events:
                    raise InputError("%s: no Ir event" % path)
                ir = events.index("Ir")
            elif line.startswith("totals:"):
                totals = int(line.split()[1 + ir])
    if totals is None or totals != self_sum:
        raise InputError("%s: the costs (%d) do not add up to the totals line (%s): unknown format"
                         % (path, self_sum, totals))
    return {"total": totals, "waiting": waiting, "spinning": spinning, "depth": depth}


def pinned_cpu(choice):
    """The CPU valgrind runs on: --cpu=N, the highest one this process may use (auto), or
    None (--cpu=none: not pinned)."""
    if choice == "none":
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if choice == "auto":
        return allowed[-1]
    if not choice.isdigit() or int(choice) not in allowed:
        raise InputError("--cpu=%s: not one of the CPUs this process may use (%s)" % (choice, allowed))
    return int(choice)


def callgrind_once(binary, path, iterations, out_dir, rep, timeout_s, cpu):
    """Instructions per operation of one path in one valgrind run: counted (every thread,
    inside the benchmark's start/stop window, waiting excluded), all, and excluded."""
    out = os.path.join(out_dir, "%s.%d.out" % (path, rep))
    for f in (out, out + ".1"):
        if os.path.exists(f):
            os.remove(f)
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-callers=%d" % CALLER_DEPTH,
           "--callgrind-out-file=" + out]
    if path in SINGLE_THREAD_PATHS:
        cmd.append("--toggle-collect=*HotPath*")
    cmd += [binary, "--iterations=%d" % iterations, "--only=" + path]
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, preexec_fn=pin)
    except subprocess.TimeoutExpired:
        raise InputError("%s: valgrind did not finish within %d s: %s" % (path, timeout_s, " ".join(cmd)))
    with open(os.path.join(out_dir, "%s.%d.log" % (path, rep)), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise InputError("%s: %s exited %d; last output:\n%s" % (path, " ".join(cmd), r.returncode,
                                                                  "\n".join((r.stdout + r.stderr).splitlines()[-15:])))
    dump = out + ".1"  # the benchmark's CALLGRIND_DUMP_STATS_AT: the window only
    if not os.path.exists(dump):
        raise InputError("%s: callgrind wrote no dump %s" % (path, dump))
    d = read_callgrind_dump(dump)
    if d["total"] <= 0:
        raise InputError("%s: no instruction total in %s" % (path, dump))
    if d["depth"] >= CALLER_DEPTH:
        raise InputError("%s: a call chain in %s is %d deep, as deep as --separate-callers=%d: a waiting "
                         "function further up would be missed; raise CALLER_DEPTH" % (path, dump, d["depth"],
                                                                                      CALLER_DEPTH))
    excluded = d["waiting"] + d["spinning"]
    return {"counted": (d["total"] - excluded) / iterations, "all": d["total"] / iterations,
            "excluded": excluded / iterations}


def median(v):
    s = sorted(v)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def source_commit(binary):
    """The commit of the source tree `binary` was built from (its build directory's
    CMakeCache.txt names the tree), else this script's."""
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(binary))), "CMakeCache.txt")
    try:
        with open(cache) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    return git_commit(line.split("=", 1)[1].strip())
    except OSError:
        pass
    return git_commit()


def cmd_callgrind(args):
    os.makedirs(args.out, exist_ok=True)
    paths = args.paths.split(",") if args.paths else CALLGRIND_PATHS
    unknown = [p for p in paths if p not in CALLGRIND_PATHS]
    if unknown:
        raise InputError("unknown path(s) %s (known: %s)" % (", ".join(unknown), ", ".join(CALLGRIND_PATHS)))
    cpu = pinned_cpu(args.cpu)
    load_start = list(os.getloadavg())
    benchmarks = []
    print("callgrind: %d iterations per path, %d run(s) each, %s; instructions per operation (task and actor "
          "paths: every thread, waiting excluded; serialization: the calling thread inside the loop)"
          % (args.iterations, args.repeat, "on CPU %d" % cpu if cpu is not None else "not pinned"))
    for path in paths:
        runs = [callgrind_once(args.binary, path, args.iterations, args.out, rep, args.timeout, cpu)
                for rep in range(args.repeat)]
        per_run = [r["counted"] for r in runs]
        med = median(per_run)
        spread = (max(per_run) - min(per_run)) / med if med else 0
        print("  %-22s %12.1f instructions/op  runs %s  spread %.2f%%  (all instructions %.1f, waiting %.1f)"
              % (path, med, ", ".join("%.1f" % v for v in per_run), 100 * spread,
                 median([r["all"] for r in runs]), median([r["excluded"] for r in runs])))
        threads = "calling thread, inside HotPath*" if path in SINGLE_THREAD_PATHS else "every thread, waiting excluded"
        benchmarks.append({
            "name": "callgrind/" + path, "run_name": "callgrind/" + path, "run_type": "aggregate",
            "repetitions": len(per_run), "aggregate_name": "median", "aggregate_unit": "time",
            "iterations": args.iterations, "real_time": med, "cpu_time": med, "time_unit": "ns",
            "items_per_second": None, "unit": "instructions/op", "median": med,
            "min": min(per_run), "max": max(per_run), "per_round": per_run, "spread": spread,
            "all_instructions_per_round": [r["all"] for r in runs],
            "waiting_per_round": [r["excluded"] for r in runs],
            "threads": threads,
            "label": "valgrind --tool=callgrind, Ir between start/stop (%s), divided by iterations" % threads})
    try:
        version = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        version = "unknown"
    doc = {"context": {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": socket.gethostname(), "executable": args.binary, "num_cpus": os.cpu_count(),
        "load_avg_at_start": load_start, "load_avg": list(os.getloadavg()),
        "prism_git_commit": source_commit(args.binary), "valgrind_version": version,
        "iterations": args.iterations, "repeat": args.repeat,
        "callgrind_counting": CALLGRIND_COUNTING,
        "counted": "Ir of every thread between CALLGRIND_START/STOP_INSTRUMENTATION minus the excluded waiting "
                   "(serialization paths: the calling thread inside HotPath*), divided by iterations; valgrind "
                   "pinned to CPU `cpu`",
        "excluded": "per op in waiting_per_round (all_instructions_per_round = counted + waiting): call chains "
                    "through a function that waits or wakes (glibc's condition-variable waits and signals, "
                    "futex and lock waits and wakes, sched_yield, nanosleep; libstdc++'s condition_variable "
                    "wait/notify, this_thread::sleep_for; Prism's SpinWhile, PollPause), and the lines of %s "
                    "with the calls they make" % ", ".join(SPIN_FILES),
        "cpu": cpu, "separate_callers": CALLER_DEPTH,
        "statistic": "instructions per operation (Ir), median over runs; real_time/cpu_time hold the same"},
        "benchmarks": benchmarks}
    path = os.path.join(args.out, "callgrind.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print("JSON:", path)
    return 0


# ---- command line ------------------------------------------------------------------------

def main(argv):
    p = argparse.ArgumentParser(prog="suite.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="merge the parts' JSON into one suite file")
    m.add_argument("--out", required=True)
    m.add_argument("--ranks", type=int)
    m.add_argument("--mode")
    m.add_argument("--duration", type=int)
    m.add_argument("--load-start")
    m.add_argument("--load-end")
    m.add_argument("--failed", default="")
    m.add_argument("--skipped", default="")
    m.add_argument("--build-dir", default="")
    m.add_argument("inputs", nargs="+", metavar="PART=FILE")
    t = sub.add_parser("table", help="print a suite file as a Markdown table")
    t.add_argument("suite")
    c = sub.add_parser("compare", help="compare a suite file against a baseline; exit 1 on a regression")
    c.add_argument("baseline")
    c.add_argument("current")
    c.add_argument("--threshold", type=float, default=0.15,
                   help="largest allowed normalised slowdown - 1 (default 0.15)")
    c.add_argument("--callgrind-threshold", type=float, default=0.02,
                   help="largest allowed instruction-count increase for callgrind/* (default 0.02)")
    c.add_argument("--max-reference-shift", type=float, default=2.0,
                   help="a reference that moved more than this factor is not used to normalise (default 2)")
    pl = sub.add_parser("plot", help="PNG plots from suite files (e.g. runs at 2, 3 and 4 ranks)")
    pl.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "plots"))
    pl.add_argument("suites", nargs="+")
    cg = sub.add_parser("callgrind", help="instruction counts of prism_hotpath_benchmark under callgrind")
    cg.add_argument("--binary", required=True)
    cg.add_argument("--out", required=True)
    cg.add_argument("--iterations", type=int, default=1000)
    cg.add_argument("--repeat", type=int, default=5)
    cg.add_argument("--paths", default="", help="comma-separated (default: all)")
    cg.add_argument("--cpu", default="auto",
                    help="CPU to run valgrind on: a number, auto (the highest this process may use) or none")
    cg.add_argument("--timeout", type=int, default=300, help="seconds per valgrind run (default 300)")
    ck = sub.add_parser("check", help="check that a suite file is well formed (exit 2 if not)")
    ck.add_argument("suite")
    ck.add_argument("--require", default="", help="comma-separated groups that must be present")
    dg = sub.add_parser("degrade", help="for tests: copy a suite file with one metric made worse")
    dg.add_argument("input")
    dg.add_argument("output")
    dg.add_argument("--metric", required=True)
    dg.add_argument("--factor", type=float, default=2.0)
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    if args.cmd == "compare" and (args.threshold < 0 or args.callgrind_threshold < 0 or args.max_reference_shift < 1):
        print("suite.py: thresholds must be >= 0 and --max-reference-shift >= 1", file=sys.stderr)
        return 2
    try:
        return {"merge": cmd_merge, "table": cmd_table, "compare": cmd_compare, "plot": cmd_plot,
                "callgrind": cmd_callgrind, "check": cmd_check, "degrade": cmd_degrade}[args.cmd](args)
    except InputError as e:
        print("suite.py %s: %s" % (args.cmd, e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
