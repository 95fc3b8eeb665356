"""Ray's own programs as the measure (issue 41): runs the programs beside this file
(NN_name.py, each a program from Ray's Python documentation with `import prism as ray` for
`import ray`, ending in asserts on its results), one after another in this one process, and
prints a table of what passed. Exits 1 if any program failed.

    python3 run_all.py [--timeout S] [NAME...]           # one rank
    mpirun -n 3 python3 run_all.py [--timeout S] [NAME...]   # three ranks, one launch for all

NAME picks programs by a part of their file name (e.g. `actor_pool` or `03`).

Sessions: the ray.init() below never returns on ranks 1..N-1: they serve every session from
there and exit when rank 0 does. Rank 0 ends that first session at once; then each program
starts its own (its ray.init(), or its first .remote(), as in Ray) and the runner ends it
with ray.shutdown(): on rank 0 an init after a shutdown starts a new session on every rank.
So only rank 0 runs the programs, and at any number of ranks.

A program runs as __main__ (so its functions and classes travel by value, as a script's do).
One still running after --timeout seconds is interrupted (SIGALRM: get and wait notice it
within 0.2 s) and counts as failed; one that does not notice (blocked where no signal handler
runs) ends the whole run 15 s later, with every thread's stack, rather than hang it.
"""

import argparse
import faulthandler
import gc
import glob
import os
import runpy
import signal
import sys
import time
import traceback

import prism as ray

HERE = os.path.dirname(os.path.abspath(__file__))


class ProgramTimeout(BaseException):
    """Raised in the program by the runner's alarm (a BaseException: `except Exception` in a
    program does not swallow it)."""


def select(names):
    paths = sorted(glob.glob(os.path.join(HERE, "[0-9][0-9]_*.py")))
    if not names:
        return paths
    chosen = [p for p in paths if any(n in os.path.basename(p) for n in names)]
    unknown = [n for n in names if not any(n in os.path.basename(p) for p in paths)]
    if unknown:
        sys.exit(f"run_all.py: no program matches {unknown}; there are "
                 f"{[os.path.basename(p) for p in paths]}")
    return chosen


def first_line(exc, path):
    """The error's type and first line (a task's error: its cause's, which says more than the
    header above the worker's traceback), and where in the program it was raised."""
    cause = getattr(exc, "cause", None)
    shown = cause if isinstance(cause, BaseException) else exc
    text = str(shown).strip().splitlines()
    line = f"{type(shown).__name__}: {text[0]}" if text else type(shown).__name__
    if shown is not exc:
        line = f"{type(exc).__name__} of {getattr(exc, 'task_name', '') or 'a task'}, {line}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    if frames:
        line += f" ({os.path.basename(path)}:{frames[-1].lineno})"
    return line


def run_one(path, timeout):
    """(error's first line or None, seconds) of one program, whose session is then ended."""

    def on_alarm(signum, frame):
        raise ProgramTimeout(f"still running after {timeout:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    faulthandler.dump_traceback_later(timeout + 15, exit=True)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    start = time.time()
    error = None
    try:
        runpy.run_path(path, run_name="__main__")
    except KeyboardInterrupt:
        raise
    except SystemExit as e:
        if e.code not in (None, 0):
            error = f"SystemExit: {e.code}"
    except BaseException as e:  # noqa: B036 - a program's failure is a row of the table
        traceback.print_exc()
        error = first_line(e, path)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    seconds = time.time() - start
    # The program's globals live on in reference cycles (its functions hold them): collected
    # now, its ObjectRefs and actor handles are dropped in its own session, as at its exit.
    gc.collect()
    ray.shutdown()  # a no-op if the program already shut down
    faulthandler.cancel_dump_traceback_later()
    sys.stdout.flush()
    return error, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=15.0,
                        help="seconds a program may run before it counts as failed (default 15)")
    parser.add_argument("names", nargs="*", help="run only the programs whose file name contains one")
    args = parser.parse_args()
    paths = select(args.names)

    ray.init()  # ranks 1..N-1 serve every session here and exit with rank 0
    world = ray.get_runtime_context().world_size
    ray.shutdown()

    rows = []
    total = time.time()
    for path in paths:
        name = os.path.basename(path)[:-3]
        print(f"=== {name}", flush=True)
        error, seconds = run_one(path, args.timeout)
        rows.append((name, error, seconds))
        print(f"=== {name}: {'passed' if error is None else 'FAILED'} in {seconds:.1f} s", flush=True)
    total = time.time() - total

    failed = [r for r in rows if r[1] is not None]
    width = max(len(r[0]) for r in rows)
    print(f"\nRay's documentation programs with `import prism as ray`, {world} rank(s):")
    print(f"{'program':<{width}}  result   seconds  error")
    for name, error, seconds in rows:
        print(f"{name:<{width}}  {'passed' if error is None else 'FAILED':<7}  {seconds:7.1f}  {error or ''}")
    print(f"{len(rows) - len(failed)} of {len(rows)} passed in {total:.1f} s")
    sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
