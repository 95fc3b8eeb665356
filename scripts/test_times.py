#!/usr/bin/env python3
"""Seconds of tests per label, from a ctest run (written by scripts/test.sh after every test).

    scripts/test_times.py <build-dir> [--junit FILE] [--wall SECONDS] [--out FILE] [--costs FILE]

Reads the run's JUnit file (<build-dir>/ctest-junit.xml, from ctest --output-junit) for each
test's time and result, and `ctest --show-only=json-v1` for its labels, and writes a
Markdown table: per label, the tests, their seconds summed and the slowest. A test with
several labels counts in each. Without --out it prints the table.

--costs writes each passed test's seconds (whole, at least 1) in the format of ctest's
CTestCostData.txt: scripts/test.sh gives it to a build that has none (a fresh clone, CI),
so that ctest -j starts the longest tests first there too, not in the order they are declared.
"""
import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def labels_of(build_dir):
    shown = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build_dir, check=True,
                           capture_output=True, text=True).stdout
    labels = {}
    for test in json.loads(shown)["tests"]:
        for prop in test.get("properties", []):
            if prop["name"] == "LABELS":
                labels[test["name"]] = prop["value"]
        labels.setdefault(test["name"], [])
    return labels


def results_of(junit):
    results = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        status = "skipped" if case.find("skipped") is not None else ("failed" if failed else "passed")
        results[case.get("name")] = (float(case.get("time", 0)), status)
    return results


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--junit")
    parser.add_argument("--wall", type=int, help="the run's wall-clock seconds")
    parser.add_argument("--out")
    parser.add_argument("--costs")
    args = parser.parse_args()
    junit = args.junit or os.path.join(args.build_dir, "ctest-junit.xml")
    if not os.path.exists(junit):
        sys.exit(f"{junit} not found: run ctest with --output-junit (scripts/test.sh does)")
    results = results_of(junit)
    labels = labels_of(args.build_dir)
    per_label = collections.defaultdict(list)
    for name, (seconds, status) in results.items():
        for label in labels.get(name) or ["(none)"]:
            per_label[label].append((seconds, name, status))
    counts = collections.Counter(status for _, status in results.values())
    lines = [
        "# Test time per label",
        "",
        "Written by `scripts/test_times.py` after `./scripts/test.sh` ran every test "
        f"(commit {git_commit()}, {datetime.date.today()}, {os.cpu_count()} cores). "
        f"{len(results)} tests: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['skipped']} skipped; {sum(s for s, _ in results.values()):.0f} s of tests"
        + (f" in {args.wall} s of wall clock (ctest -j)." if args.wall else "."),
        "A test with several labels counts under each.",
        "",
        "| label | tests | seconds | slowest test (s) |",
        "| --- | ---: | ---: | --- |",
    ]
    for label, tests in sorted(per_label.items(), key=lambda kv: -sum(t[0] for t in kv[1])):
        slowest = max(tests)
        lines.append(f"| {label} | {len(tests)} | {sum(t[0] for t in tests):.0f} | "
                     f"{slowest[1]} ({slowest[0]:.0f}) |")
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"test_times: wrote {args.out}")
    else:
        sys.stdout.write(text)
    if args.costs:
        with open(args.costs, "w") as f:
            for name, (seconds, status) in sorted(results.items()):
                if status == "passed":
                    f.write(f"{name} 1 {max(1, round(seconds))}\n")
            f.write("---\n")
        print(f"test_times: wrote {args.costs}")


if __name__ == "__main__":
    main()
