"""prism.init(dashboard="loopback") from Python (label python, python_dashboard_1rank): the
endpoint file appears in the session directory, the JSON views show the script's tasks,
and shutdown writes the report. Runs without a launcher, in a temporary directory."""
import glob
import json
import os
import shutil
import tempfile
import urllib.request

work = tempfile.mkdtemp(prefix="prism-py-dashboard-")
os.environ["TMPDIR"] = work  # the session directory, read at init
os.environ["PRISM_STORAGE_PATH"] = work  # the report
import prism  # noqa: E402


@prism.remote
def double(x):
    return 2 * x


try:
    prism.init(dashboard="loopback")
    assert prism.get([double.remote(i) for i in range(5)]) == [0, 2, 4, 6, 8]
    url = open(glob.glob(os.path.join(work, "prism-*", "dashboard.url"))[0]).read().strip()
    tasks = json.load(urllib.request.urlopen(url + "api/tasks", timeout=10))
    assert tasks["by_state"].get("FINISHED") == 5, tasks
    ranks = json.load(urllib.request.urlopen(url + "api/ranks", timeout=10))
    assert len(ranks) == 1 and ranks[0]["is_head"] and ranks[0]["proc"], ranks
    prism.shutdown()
    reports = glob.glob(os.path.join(work, "prism-dashboard-*.html"))
    assert len(reports) == 1 and "window.PRISM_REPORT = " in open(reports[0]).read(), reports
    print("prism.init(dashboard='loopback'): ok")
finally:
    shutil.rmtree(work, ignore_errors=True)
