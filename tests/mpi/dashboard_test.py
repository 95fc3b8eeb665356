"""The dashboard of a real 3-rank job over HTTP (label mpi).

    dashboard_test.py <mpiexec> <prism_dashboard_app> <prism (the CLI)> [report]

Starts the job with --prism-dashboard=loopback, reads the endpoint file, checks the JSON
views and /metrics (parsed with python3-prometheus-client when installed) show the ranks,
tasks, actors, the placement group and KV keys, and that `prism status` prints them, then
ends the job and checks the report (and `prism status` of it). With "report": --prism-dashboard=report (no server) and a driver that returns 75 from main
without Shutdown, as a preempted job does: the report is written at exit all the same.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dashboard_job import DashboardJob  # noqa: E402


def wait_for(what, fetch, ok, timeout=10):
    deadline = time.time() + timeout
    while True:
        value = fetch()
        if ok(value):
            return value
        if time.time() > deadline:
            raise AssertionError("%s: not within %d s; last seen: %r" % (what, timeout, value))
        time.sleep(0.2)


def report_only(mpiexec, app):
    started = time.time()
    job = DashboardJob(mpiexec, app, setting="report", env={"DASHBOARD_APP_EXIT": "75"})
    try:
        assert job.url is None
        rc, report, output = job.stop()
        assert rc == 75, (rc, output)
        assert report and "prism: dashboard report " + report in output, output
        html = open(report).read()
        assert "window.PRISM_REPORT = " in html and "counter-2" in html and "fails on purpose" in html
        print("report-only dashboard, exit 75 without Shutdown: ok (%.1f s)" % (time.time() - started))
    finally:
        job.cleanup()


def prism_status(cli, where):
    out = subprocess.run([cli, "status", where], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, (out.returncode, out.stderr)
    return out.stdout


def main():
    mpiexec, app, cli = sys.argv[1], sys.argv[2], sys.argv[3]
    if sys.argv[4:] == ["report"]:
        return report_only(mpiexec, app)
    started = time.time()
    job = DashboardJob(mpiexec, app)
    try:
        assert job.url.startswith("http://127.0.0.1:") and "token" not in job.url, job.url
        status, ctype, page = job.get("/")
        assert status == 200 and "ranks-table" in page and ctype.startswith("text/html"), ctype

        # Every rank reports a sample once a second; the workers each run one Hold task.
        ranks = wait_for("a sample from every rank, a running task on each worker",
                         lambda: job.json("/api/ranks"),
                         lambda rs: len(rs) == 3 and all(r["proc"] for r in rs)
                         and all(r["running_tasks"] >= 1 for r in rs[1:]))
        assert [r["rank"] for r in ranks] == [0, 1, 2]
        assert ranks[0]["is_head"] and all(r["alive"] for r in ranks)
        for r in ranks:
            assert r["proc"]["host_mem_total_bytes"] > 0 and r["proc"]["process_rss_bytes"] > 0, r
            assert r["store"]["capacity_bytes"] > 0, r
            assert r["host"], r
        # A Counter on each worker rank, and Serve's 2 replicas somewhere.
        assert ranks[1]["num_actors"] >= 1 and ranks[2]["num_actors"] >= 1, ranks
        assert sum(r["num_actors"] for r in ranks) == 4, ranks

        tasks = job.json("/api/tasks")
        by_fn = {f["func_or_class_name"]: f["state_counts"] for f in tasks["by_function"]}
        square = [v for k, v in by_fn.items() if "Square" in k]
        assert square and square[0].get("FINISHED") == 20, by_fn
        assert tasks["by_state"].get("FAILED", 0) >= 1, tasks["by_state"]
        assert any("fails on purpose" in f["error_message"] for f in tasks["failures"]), tasks["failures"]

        sq_times = [v for k, v in tasks["times"].items() if "Square" in k]
        assert sq_times and sq_times[0]["count"] == 20 and sq_times[0]["p99_ms"] >= sq_times[0]["p50_ms"] > 0, tasks["times"]
        timeline = job.json("/api/timeline")
        square_index = [i for i, n in enumerate(timeline["names"]) if "Square" in n]
        square_spans = [sp for sp in timeline["spans"] if sp[1] in square_index]
        assert len(square_spans) == 20 and all(0 <= sp[2] <= sp[3] for sp in square_spans), timeline
        assert any(sp[4] == 1 for sp in timeline["spans"]), "the failed task is on the timeline"

        # Serve's panel comes every 2 s: the first one may still show the replicas starting.
        panels = wait_for("Data's, Serve's and Tune's panels", lambda: job.json("/api/panels"),
                          lambda ps: [p["name"] for p in ps] == ["data", "serve", "tune/dashboard-tune"]
                          and ps[1]["rows"] and ps[1]["rows"][0][3] == "2/2")
        data = panels[0]
        assert data["title"] == "Data: the latest execution (done)", data
        assert any("Map(" in r[0] and r[1] == "4/4" and r[2] == "1000" for r in data["rows"]), data
        serve = panels[1]
        assert serve["rows"][0][:3] == ["dash-greeter", "dash", "HEALTHY"], serve
        assert sorted(serve["rows"][0][4].split(",")) != [], serve
        tune = panels[2]
        assert tune["title"] == "Tune: dashboard-tune (final)" and len(tune["rows"]) == 3, tune
        assert all(r[1] == "TERMINATED" for r in tune["rows"]) and tune["columns"][-1] == "score", tune
        assert any(line.startswith("Best trial: ") and "score=33" in line for line in tune["lines"]), tune

        actors = job.json("/api/actors")
        alive = sorted((a["name"], a["rank"]) for a in actors if a["state"] == "ALIVE" and "Counter" in a["class_name"])
        assert alive == [("counter-1", 1), ("counter-2", 2)], actors
        groups = job.json("/api/placement_groups")
        assert [g["name"] for g in groups] == ["dashboard-pg"], groups
        keys = job.json("/api/kv")["keys"]
        assert "dashboard/a" in keys and "dashboard/b" in keys and "prism.dashboard/panel/tune/dashboard-tune" in keys, keys
        # One host: rank 0 reads every rank's files (here rank 1's captured stdout).
        log = wait_for("rank 1's output in its log", lambda: job.json("/api/logs?rank=1"),
                       lambda l: "rank 1 holds" in l["text"])
        assert log["reachable"], log

        status, ctype, metrics = job.get("/metrics")
        assert ctype.startswith("text/plain; version=0.0.4"), ctype
        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError:
            print("python3-prometheus-client missing: /metrics checked as text only")
            assert 'ray_actors{Name=' in metrics and 'State="ALIVE"} 2' in metrics, metrics
        else:
            fams = {f.name: f for f in text_string_to_metric_families(metrics)}
            finished = sum(s.value for s in fams["ray_tasks"].samples
                           if s.labels["State"] == "FINISHED" and "Square" in s.labels["Name"])
            assert finished == 20, fams["ray_tasks"].samples
            alive_actors = sum(s.value for s in fams["ray_actors"].samples
                               if s.labels["State"] == "ALIVE" and "Counter" in s.labels["Name"])
            assert alive_actors == 2, fams["ray_actors"].samples
            assert {s.labels["rank"] for s in fams["ray_node_mem_used"].samples} == {"0", "1", "2"}
            assert len(fams["ray_object_store_memory"].samples) == 6

        text = prism_status(cli, job.endpoint_file)
        for expected in ("3 ranks", "(live: " + job.url, "0 (head)", "Square", "Actors: ALIVE 4",
                         "Placement groups: 1", "fails on purpose", "Tune: dashboard-tune (final)",
                         "dash-greeter"):
            assert expected in text, (expected, text)

        rc, report, output = job.stop()
        assert rc == 0, output
        assert not os.path.exists(job.endpoint_file), "the endpoint file outlived the job"
        assert report, "no report in %s:\n%s" % (job.results, output)
        assert "prism: dashboard report " + report in output, output
        html = open(report).read()
        assert "window.PRISM_REPORT = " in html and "counter-1" in html and "fails on purpose" in html
        text = prism_status(cli, report)
        assert "(report: " + report in text and "Square" in text and "ran 0 min" in text, text
        gone = subprocess.run([cli, "status", job.url], capture_output=True, text=True, timeout=30)
        assert gone.returncode == 1 and "the job may have ended" in gone.stderr, (gone.returncode, gone.stderr)
        print("dashboard over HTTP: ok (%.1f s; report %d KiB)" % (time.time() - started, len(html) >> 10))
    finally:
        job.cleanup()


if __name__ == "__main__":
    main()
