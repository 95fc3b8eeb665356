#!/usr/bin/env python3
"""Unit tests of perf/suite.py's merge and table with the hot-path rows over several launches
(perf/hot_path_runs.py), and of perf/peers/report.py's reading of them. No MPI, no build:

    python3 perf/test_suite.py      (or: python3 -m pytest perf/test_suite.py)
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "peers"))
import hot_path_runs  # noqa: E402
import report  # noqa: E402
import suite  # noqa: E402


def launch(sync_us, async_tps, mode="full", extra=()):
    """One prism_microbenchmark launch's JSON (the fields the tools read)."""
    def row(name, unit, med, rounds, **kw):
        b = {"name": name, "run_type": "aggregate", "aggregate_name": "median", "unit": unit,
             "median": med, "min": min(rounds), "max": max(rounds), "per_round": rounds,
             "real_time": med if unit == "us" else 1e6 / med, "time_unit": "us",
             "items_per_second": 1e6 / med if unit == "us" else med, "target_verdict_valid": mode == "full"}
        b.update(kw)
        return b
    benchmarks = [
        row("single_client_tasks_sync", "us", sync_us, [sync_us, sync_us * 0.9, sync_us * 1.1],
            ops_per_second_min=1.0, ops_per_second_max=2.0, p90=2 * sync_us),
        row("single_client_tasks_async", "tasks/s", async_tps, [async_tps, async_tps * 0.8, async_tps * 1.2]),
    ] + [row(n, "GB/s", v, [v, v]) for n, v in extra]
    return {"context": {"mode": mode, "mpi_ranks": 3, "load_avg_at_start": [1.0, 1.0, 1.0],
                        "load_avg": [1.0, 1.0, 1.0], "prism_git_commit": "abc"},
            "benchmarks": benchmarks}


class HotPathRuns(unittest.TestCase):
    def setUp(self):
        # Three launches: a fast, a slow and a middle one.
        self.docs = [launch(3.3, 700000.0, extra=[("single_client_put_gigabytes", 10.0)]),
                     launch(12.0, 380000.0), launch(3.4, 690000.0)]

    def test_summary_min_median_max_and_met(self):
        rows = {r["name"]: r for r in hot_path_runs.summarize(self.docs)}
        s = rows["single_client_tasks_sync"]
        self.assertEqual(s["runs"], [3.3, 12.0, 3.4])
        self.assertEqual((s["min"], s["median"], s["max"], s["worst"]), (3.3, 3.4, 12.0, 12.0))
        self.assertEqual(s["met"], 2)  # <= 10 us: the slow launch misses
        a = rows["single_client_tasks_async"]
        self.assertEqual((a["min"], a["median"], a["max"], a["worst"]), (380000.0, 690000.0, 700000.0, 380000.0))
        self.assertEqual(a["met"], 2)  # >= 500,000: the slow launch misses
        self.assertEqual(rows["idle_rank_cpu"]["measured"], 0)
        self.assertIsNone(rows["idle_rank_cpu"]["median"])

    def test_combined_micro_json(self):
        d = hot_path_runs.combined_micro(self.docs, hot_path_runs.summarize(self.docs))
        b = {x["name"]: x for x in d["benchmarks"]}
        self.assertEqual(list(b), ["single_client_tasks_sync", "single_client_tasks_async",
                                   "single_client_put_gigabytes"])
        s = b["single_client_tasks_sync"]
        self.assertEqual((s["median"], s["min"], s["max"], s["worst"]), (3.4, 3.3, 12.0, 12.0))
        self.assertEqual(s["per_launch"], [3.3, 12.0, 3.4])
        self.assertEqual((s["launches"], s["range"], s["fields_from_launch"]), (3, "launches", 3))
        self.assertNotIn("per_round", s)
        self.assertTrue(s["target_met"])
        self.assertEqual(b["single_client_put_gigabytes"]["median"], 10.0)  # the first launch's own
        self.assertEqual(d["context"]["hot_path_launches"], 3)


class SuiteMerge(unittest.TestCase):
    def test_merge_table_compare(self):
        docs = [launch(3.3, 700000.0), launch(12.0, 380000.0), launch(3.4, 690000.0)]
        with tempfile.TemporaryDirectory() as tmp:
            micro = os.path.join(tmp, "microbenchmark.json")
            with open(micro, "w") as f:
                json.dump(hot_path_runs.combined_micro(docs, hot_path_runs.summarize(docs)), f)
            merged = os.path.join(tmp, "suite.json")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(suite.main(["merge", "--out=" + merged, "--ranks=3", "--mode=full",
                                             "micro=" + micro]), 0)
            with open(merged) as f:
                d = json.load(f)
            e = {b["name"]: b for b in d["benchmarks"]}["single_client_tasks_async"]
            self.assertEqual((e["value"], e["min"], e["max"]), (690000.0, 380000.0, 700000.0))
            self.assertEqual((e["launches"], e["range"], e["worst"]), (3, "launches", 380000.0))
            self.assertEqual(e["per_launch"], [700000.0, 380000.0, 690000.0])
            self.assertEqual(d["context"]["parts"]["micro"]["hot_path_launches"], 3)

            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(suite.main(["table", merged]), 0)
            self.assertIn("| core | single_client_tasks_async | 690,000 [380,000, 700,000] over 3 launches | tasks/s |",
                          out.getvalue())

            # A baseline of the old format (no launch fields, ranges across rounds) still loads,
            # and compare judges the median.
            old = {"context": {"ranks": 3, "mode": "full"}, "benchmarks": [
                {"name": "single_client_tasks_async", "value": 700000.0, "min": 650000.0, "max": 720000.0,
                 "unit": "tasks/s", "higher_is_better": True},
                {"name": "single_client_tasks_sync", "value": 3.3, "min": 3.2, "max": 3.5, "unit": "us",
                 "higher_is_better": False}]}
            base = os.path.join(tmp, "old_baseline.json")
            with open(base, "w") as f:
                json.dump(old, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(suite.main(["compare", base, merged]), 0)  # 690k vs 700k, 3.4 vs 3.3: ok
            slow = os.path.join(tmp, "slow.json")
            with contextlib.redirect_stdout(io.StringIO()):
                suite.main(["degrade", merged, slow, "--metric=single_client_tasks_async", "--factor=2"])
                self.assertEqual(suite.main(["compare", base, slow]), 1)


class Report(unittest.TestCase):
    def test_prism_micro_reads_launches(self):
        docs = [launch(3.3, 700000.0), launch(12.0, 380000.0), launch(3.4, 690000.0)]
        d = hot_path_runs.combined_micro(docs, hot_path_runs.summarize(docs))
        f = report.prism_micro(d, "single_client_tasks_async")
        self.assertEqual((f["median"], f["min"], f["max"], f["launches"], f["worst"]),
                         (690000.0, 380000.0, 700000.0, 3, 380000.0))
        ops = report.prism_micro(d, "single_client_tasks_sync", "ops")
        self.assertAlmostEqual(ops["worst"], 1e6 / 12.0)
        self.assertAlmostEqual(ops["median"], 1e6 / 3.4)
        # A single launch's file (no launch fields) reads as before.
        one = report.prism_micro(launch(3.3, 700000.0), "single_client_tasks_async")
        self.assertNotIn("launches", one)
        self.assertEqual((one["min"], one["max"]), (560000.0, 840000.0))


if __name__ == "__main__":
    unittest.main()
