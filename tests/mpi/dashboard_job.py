"""A 3-rank job with the dashboard on, for dashboard_test.py and dashboard_browser_test.py.

DashboardJob starts tests/mpi/dashboard_app.cc under mpiexec with --prism-dashboard=loopback
(and TMPDIR and PRISM_STORAGE_PATH in a fresh directory), waits (at once, or later with
wait=False) until the app says it is ready and the endpoint file exists, and on stop() lets
the job end and returns the report.
"""
import glob
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request


class DashboardJob:
    def __init__(self, mpiexec, app, ranks=3, setting="loopback", wait=True, env=None):
        self.setting = setting
        self.dir = tempfile.mkdtemp(prefix="prism-dashboard-test-")
        self.tmp = os.path.join(self.dir, "tmp")
        self.results = os.path.join(self.dir, "results")
        os.makedirs(self.tmp)
        env = dict(os.environ, TMPDIR=self.tmp, PRISM_STORAGE_PATH=self.results,
                   OMPI_MCA_rmaps_base_oversubscribe="1", **(env or {}))
        self.log = open(os.path.join(self.dir, "job.log"), "w+")
        self.proc = subprocess.Popen(
            [mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", str(ranks), app, self.dir,
             "--prism-dashboard=" + setting, "--prism-num-cpus=2"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = self.wait_until_ready() if wait else None

    def wait_until_ready(self, timeout=30):
        """The dashboard's URL, once the app is ready and the endpoint file written (None
        with the setting "report": no server, no endpoint file)."""
        self.url = self._wait_for_endpoint(timeout)
        return self.url

    def _output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def _wait_for_endpoint(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("the job ended early (%s):\n%s" % (self.proc.returncode, self._output()))
            files = glob.glob(os.path.join(self.tmp, "prism-*", "dashboard.url"))
            ready = os.path.exists(os.path.join(self.dir, "ready"))
            if ready and self.setting == "report":
                assert not files, files
                return None
            if files and ready:
                with open(files[0]) as f:
                    self.endpoint_file = files[0]
                    return f.read().strip()
            time.sleep(0.05)
        self.proc.kill()
        raise AssertionError("no endpoint file within %d s:\n%s" % (timeout, self._output()))

    def get(self, path):
        """GET url + path; returns (status, content type, body as text)."""
        base = self.url.split("?")[0].rstrip("/")
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()

    def json(self, path):
        status, ctype, body = self.get(path)
        assert status == 200 and ctype.startswith("application/json"), (status, ctype)
        return json.loads(body)

    def stop(self, timeout=30):
        """Lets the job end; returns (exit status, the report's path or None, output)."""
        open(os.path.join(self.dir, "stop"), "w").close()
        return self.wait(timeout)

    def wait(self, timeout=30):
        """Waits for the job to end (without asking it to); returns what stop() returns."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the job did not end within %d s:\n%s" % (timeout, self._output()))
        reports = glob.glob(os.path.join(self.results, "prism-dashboard-*.html"))
        return rc, (reports[0] if reports else None), self._output()

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
