"""The dashboard of a real 3-rank job over HTTP (label mpi).

    dashboard_test.py <mpiexec> <prism_dashboard_app> <prism (the CLI)> [report]

Starts the job with --prism-dashboard=loopback, reads the endpoint file, checks the JSON
views and /metrics (parsed with python3-prometheus-client when installed) show the ranks,
tasks, actors (with counter-1's 3 pending calls), the placement group and KV keys, Serve's
requests (4 sent here over HTTP) and Tune's trials under their metric names, the history
the plots draw, Tune's curves, a log search, and that `prism status` prints them, then
ends the job and checks the report (and `prism status` of it). With "report": --prism-dashboard=report (no server) and a driver that returns 75 from main
without Shutdown, as a preempted job does: the report is written at exit all the same.
With "signal": a real SIGTERM to rank 0, once while the app holds a PreemptionGuard (as a
training run does: it returns 75, and the report says it was preempted) and once without
one (SIGTERM ends rank 0: the report is written first, and says so).
"""
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

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


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric_families(text):
    from prometheus_client.parser import text_string_to_metric_families
    return {f.name: f for f in text_string_to_metric_families(text)}


def check_library_metrics(job):
    """Serve's requests (3 answered, 1 not found) and Tune's trials on /metrics."""
    with open(os.path.join(job.dir, "serve.url")) as f:
        serve = f.read().strip()
    for i in range(3):
        status, body = http_status(serve + "/greet/x%d" % i)
        assert status == 200 and "/greet/x%d" % i in body, (status, body)
    assert http_status(serve + "/nope")[0] == 404
    # The controller publishes Serve's metrics with its panel, every 2 s.
    text = wait_for("Serve's 4 HTTP requests on /metrics", lambda: job.get("/metrics")[2],
                    lambda t: 'ray_serve_num_http_requests_total{route="/greet",method="GET",application="dash",'
                              'status_code="200"} 3' in t and 'status_code="404"} 1' in t)
    serve_row = [p for p in job.json("/api/panels") if p["name"] == "serve"][0]["rows"][0]
    assert serve_row[7] == "4" and serve_row[9].endswith(" ms"), serve_row  # calls (rank 0), mean latency
    try:
        fams = metric_families(text)
    except ImportError:
        assert 'prism_tune_trials{experiment="dashboard-tune",state="TERMINATED"} 3' in text, text
        return
    latency = fams["ray_serve_http_request_latency_ms"]
    assert latency.type == "histogram", latency.type
    counts = [s.value for s in latency.samples if s.name.endswith("_count") and s.labels["route"] == "/greet"]
    assert counts == [3], latency.samples
    inf = [s.value for s in latency.samples if s.name.endswith("_bucket") and s.labels["le"] == "+Inf"
           and s.labels["route"] == "/greet"]
    assert inf == [3], latency.samples
    assert [s.value for s in fams["ray_serve_num_ongoing_http_requests"].samples] == [0]
    calls = sum(s.value for s in fams["ray_serve_deployment_request_counter"].samples
                if s.labels["deployment"] == "dash-greeter" and s.labels["application"] == "dash")
    assert calls == 4, fams["ray_serve_deployment_request_counter"].samples  # 1 handle call + 3 HTTP
    processing = [s for s in fams["ray_serve_deployment_processing_latency_ms"].samples if s.name.endswith("_count")]
    assert sum(s.value for s in processing) == 4, processing
    healthy = fams["ray_serve_deployment_replica_healthy"].samples
    assert len(healthy) == 2 and all(s.value == 1 for s in healthy), healthy
    trials = {s.labels["state"]: s.value for s in fams["prism_tune_trials"].samples
              if s.labels["experiment"] == "dashboard-tune"}
    assert trials["TERMINATED"] == 3 and trials["RUNNING"] == 0, trials
    results = [s.value for s in fams["prism_tune_results"].samples]
    assert results == [9], results  # 3 trials x 3 reports
    pending = {s.labels["actor_name"]: s.value for s in fams["prism_actor_pending_calls"].samples}
    assert pending.get("counter-1") == 3, pending


def check_new_views(job):
    """Pending calls, log search (and its 400s), the history the plots draw, Tune's curves."""
    actors = wait_for("counter-1's 3 waiting calls", lambda: job.json("/api/actors"),
                      lambda a: any(x["name"] == "counter-1" and x["pending_calls"] == 3 for x in a))
    assert all(x["pending_calls"] == 0 for x in actors if x["name"] == "counter-2"), actors
    found = job.json("/api/logs/search?q=RANK%201%20HOLDS&rank=all")
    assert found["matches"] and all(m["rank"] == 1 and "rank 1 holds" in m["text"] for m in found["matches"]), found
    # Rank 0 writes no log file unless told to (its output is the terminal's).
    assert not found["truncated"] and found["unreadable_ranks"] in ([], [0]), found
    assert job.json("/api/logs/search?q=no%20such%20text%20anywhere")["matches"] == []
    base = job.url.split("?")[0].rstrip("/")
    for bad in ("", "q=", "q=x&rank=minus", "q=x&limit=0", "q=%zz"):
        status, body = http_status(base + "/api/logs/search?" + bad)
        assert status == 400 and "/api/logs/search" in body, (bad, status, body)
    history = wait_for("2 points of history", lambda: job.json("/api/history"), lambda h: len(h["t_ms"]) >= 2)
    assert sorted(history["ranks"]) == ["0", "1", "2"], history
    assert all(v and v > 0 for v in history["ranks"]["1"]["rss"][-1:]), history
    assert history["tasks_ended"][-1] >= 20, history
    tune = [p for p in job.json("/api/panels") if p["name"] == "tune/dashboard-tune"][0]
    curves = {c["name"]: c for c in tune["series"]}
    assert len(curves) == 3 and all(c["plot"] == "score by training_iteration" for c in curves.values()), curves
    assert sorted(tuple(map(tuple, c["points"])) for c in curves.values())[0] == ((1, 11), (2, 12), (3, 13)), curves


def preempted(mpiexec, app, cli):
    for mode, ended_by in (("guarded", "SIGTERM received during the job (preemption or time limit)"),
                           ("unguarded", "SIGTERM outside a run that stops cleanly: the job was ended")):
        started = time.time()
        job = DashboardJob(mpiexec, app, setting="report", env={"DASHBOARD_APP_SIGNAL": mode})
        try:
            with open(os.path.join(job.dir, "pid")) as f:
                os.kill(int(f.read()), signal.SIGTERM)
            rc, report, output = job.wait()
            if mode == "guarded":
                assert rc == 75, (rc, output)
            else:
                assert rc != 0 and "received SIGTERM outside a run that stops cleanly" in output, (rc, output)
            assert report and "prism: dashboard report " + report in output, output
            html = open(report).read()
            assert '"ended_by":"%s"' % ended_by in html and "counter-2" in html, ended_by
            assert "  Stopped: " + ended_by in prism_status(cli, report)
            print("SIGTERM to rank 0 (%s): report written, rc %d (%.1f s)" % (mode, rc, time.time() - started))
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
    if sys.argv[4:] == ["signal"]:
        return preempted(mpiexec, app, cli)
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

        check_library_metrics(job)
        check_new_views(job)

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
        assert '"history":{"ranks":{"0":' in html and '"pending_calls"' in html, "history and pending calls in the report"
        text = prism_status(cli, report)
        assert "(report: " + report in text and "Square" in text and "ran 0 min" in text, text
        gone = subprocess.run([cli, "status", job.url], capture_output=True, text=True, timeout=30)
        assert gone.returncode == 1 and "the job may have ended" in gone.stderr, (gone.returncode, gone.stderr)
        print("dashboard over HTTP: ok (%.1f s; report %d KiB)" % (time.time() - started, len(html) >> 10))
    finally:
        job.cleanup()


if __name__ == "__main__":
    main()
