#!/usr/bin/env python3
"""Where a build's time went, from Ninja's log (<build>/.ninja_log).

    scripts/build_profile.py [build-dir] [--top N]

Prints the build's span (first start to last end), the seconds of every step summed, the
seconds per target (compiles and the target's link or archive step) and the N slowest
steps. Ninja appends to its log on every build; for each output the last entry counts, so
run it after a clean build to see a whole build.
"""
import argparse
import collections
import os
import re
import sys


def read_log(path):
    """Returns {output: (start_ms, end_ms)}, the last entry of each output."""
    steps = {}
    with open(path) as f:
        header = f.readline()
        if not header.startswith("# ninja log"):
            sys.exit(f"{path}: not a Ninja log (header {header.strip()!r})")
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                continue
            start, end, _, output = fields[:4]
            steps[output] = (int(start), int(end))
    return steps


def target_of(output):
    """The CMake target an output belongs to: 'x.dir' in an object's path, else the file."""
    match = re.search(r"CMakeFiles/([^/]+)\.dir/", output)
    if match:
        return match.group(1)
    name = os.path.basename(output)
    name = re.sub(r"^lib(.*)\.(a|so)$", r"\1", name)
    return re.sub(r"\.(so|cpython.*)$", "", name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", nargs="?", default="build")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    log = os.path.join(args.build_dir, ".ninja_log")
    if not os.path.exists(log):
        sys.exit(f"{log} not found: build with Ninja (scripts/build.sh does) and run this again")
    steps = read_log(log)
    if not steps:
        sys.exit(f"{log} holds no steps")
    span = (max(e for _, e in steps.values()) - min(s for s, _ in steps.values())) / 1000
    total = sum(e - s for s, e in steps.values()) / 1000
    per_target = collections.defaultdict(lambda: [0.0, 0, 0.0])  # compile s, TUs, link s
    for output, (s, e) in steps.items():
        seconds = (e - s) / 1000
        entry = per_target[target_of(output)]
        if output.endswith((".o", ".gch")):
            entry[0] += seconds
            entry[1] += 1
        else:
            entry[2] += seconds
    print(f"build span {span:.0f} s, {len(steps)} steps, {total:.0f} s of steps summed "
          f"({total / span:.2f} at a time)")
    print(f"\n{'target':44} {'compile s':>9} {'TUs':>4} {'link s':>7}")
    rows = sorted(per_target.items(), key=lambda kv: -(kv[1][0] + kv[1][2]))
    for name, (compile_s, tus, link_s) in rows[: args.top]:
        print(f"{name:44} {compile_s:9.1f} {tus:4d} {link_s:7.1f}")
    print(f"\nthe {args.top} slowest steps:")
    for output, (s, e) in sorted(steps.items(), key=lambda kv: kv[1][0] - kv[1][1])[: args.top]:
        print(f"{(e - s) / 1000:7.1f} s  {output}")


if __name__ == "__main__":
    main()
