"""The dashboard in a real browser (labels mpi and browser): headless Chromium, driven by
Selenium through chromium-driver, loads the live page of a 3-rank job and sees its ranks
table filled (3 ranks, each with a sample), the failed task's error in the Tasks view, both
actors with counter-1's 3 pending calls, the timeline's bars, Tune's trials in the Libraries
view, the plots (tasks/s and memory per rank from the history, Tune's curves) as SVG lines, a
log search's result, and no console errors; then, after the job, the saved report shows the
same ranks, timeline and plots offline, and searches the logs it holds.
Screenshots go to <build>/tests/mpi/dashboard_browser/.

    dashboard_browser_test.py <mpiexec> <prism_dashboard_app> <screenshot dir>

Exits 77 (ctest: skipped) with a message when Chromium, chromium-driver or Selenium is
missing (apt-get install chromium chromium-driver python3-selenium).
"""
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dashboard_job import DashboardJob  # noqa: E402

SKIP = 77


def find_browser():
    """(chromium, chromedriver), or exit 77 saying what is missing."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("SKIP: python3-selenium is not installed (apt-get install python3-selenium)")
        sys.exit(SKIP)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        print("SKIP: chromium and chromium-driver are needed (apt-get install chromium chromium-driver)")
        sys.exit(SKIP)
    return chromium, driver


def start_browser(chromium, driver):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def wait_until(what, check, timeout=10):
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError("%s: not within %d s" % (what, timeout))
        time.sleep(0.2)


def rank_rows(driver):
    """The ranks table's cells, read in one script (the page replaces rows as it refreshes)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#ranks-table tbody tr')]"
        ".map(r => [...r.cells].map(c => c.textContent));")


def text_of(driver, element_id):
    return driver.execute_script("return document.getElementById(arguments[0]).textContent;", element_id)


def check_plots(driver, by):
    """The Plots view: the job's three plots and Tune's curves, each line an SVG polyline."""
    driver.find_element(by.ID, "tab-plots").click()
    wait_until("the job's plots and Tune's 3 curves", lambda: driver.execute_script(
        "const n = s => document.querySelectorAll(s).length;"
        "return n('#plots-job .plot svg') === 3 && n('#plots-job svg polyline') >= 4"
        "    && n('#plots-libraries svg polyline') === 3;"))


def check_log_search(driver, by, text):
    """A search in the Logs view finds `text` (typed in another case) in rank 1's log."""
    driver.find_element(by.ID, "tab-logs").click()
    box = driver.find_element(by.ID, "log-search")
    box.clear()
    box.send_keys(text.upper())
    driver.find_element(by.ID, "log-search-go").click()
    wait_until("the search's result", lambda: driver.execute_script(
        "return [...document.querySelectorAll('#log-search-table tbody tr')]"
        "  .some(r => r.cells.length === 4 && r.cells[0].textContent === '1' && r.cells[3].textContent.includes(arguments[0]));",
        text))


def main():
    mpiexec, app, shots = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(shots, exist_ok=True)
    started = time.time()
    chromium, chromedriver = find_browser()
    # The job and the browser start side by side (Chromium takes seconds on a busy machine).
    job = DashboardJob(mpiexec, app, wait=False)
    driver = None
    try:
        driver = start_browser(chromium, chromedriver)
        phases = {"browser up": time.time() - started}
        from selenium.webdriver.common.by import By
        driver.get(job.wait_until_ready())
        phases["page loaded"] = time.time() - started
        # Live: the ranks table fills, and every rank's CPU column gets a sample (the page
        # polls every 2 s; the worker ranks report once a second).
        rows = wait_until("3 ranks, each with a sample",
                          lambda: (lambda rs: rs if len(rs) == 3 and all(r[4] for r in rs) else None)(rank_rows(driver)))
        assert [r[0] for r in rows] == ["0 (head)", "1", "2"], rows
        assert all(r[3] == "ALIVE" for r in rows), rows
        phases["ranks shown"] = time.time() - started
        driver.save_screenshot(os.path.join(shots, "live_ranks.png"))
        driver.find_element(By.ID, "tab-tasks").click()
        wait_until("the failed task's error in the Tasks view",
                   lambda: "fails on purpose" in text_of(driver, "failures-table"))
        driver.save_screenshot(os.path.join(shots, "live_tasks.png"))
        driver.find_element(By.ID, "tab-actors").click()
        wait_until("both actors", lambda: text_of(driver, "actors-table").count("Counter") == 2)
        wait_until("counter-1's 3 pending calls", lambda: driver.execute_script(
            "const h = [...document.querySelectorAll('#actors-table thead th')].map(c => c.textContent);"
            "const r = [...document.querySelectorAll('#actors-table tbody tr')]"
            "  .find(r => [...r.cells].some(c => c.textContent === 'counter-1'));"
            "return r ? r.cells[h.indexOf('pending calls')].textContent : null;") == "3")
        driver.find_element(By.ID, "tab-timeline").click()
        wait_until("the timeline's bars", lambda: driver.execute_script(
            "return document.querySelectorAll('#timeline-chart rect').length;") >= 20)
        driver.save_screenshot(os.path.join(shots, "live_timeline.png"))
        driver.find_element(By.ID, "tab-libraries").click()
        wait_until("Tune's trials in the Libraries view", lambda: driver.execute_script(
            "return document.querySelectorAll('table[data-panel=\"tune/dashboard-tune\"] tbody tr').length;") == 3)
        driver.save_screenshot(os.path.join(shots, "live_libraries.png"))
        check_plots(driver, By)
        driver.save_screenshot(os.path.join(shots, "live_plots.png"))
        check_log_search(driver, By, "rank 1 holds")
        driver.save_screenshot(os.path.join(shots, "live_logs.png"))
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        phases["live views checked"] = time.time() - started
        driver.get("about:blank")  # no poll of the live page may fail once the job ends
        driver.get_log("browser")  # (reading the log empties it)
        rc, report, output = job.stop()
        assert rc == 0 and report, output
        phases["job ended"] = time.time() - started
        # After the job: the report, from the file alone.
        driver.get("file://" + report)
        rows = wait_until("3 ranks in the report", lambda: (lambda rs: rs if len(rs) == 3 else None)(rank_rows(driver)))
        assert rows[0][0] == "0 (head)", rows
        assert "report written" in text_of(driver, "status")
        driver.find_element(By.ID, "tab-timeline").click()
        wait_until("the report's timeline", lambda: driver.execute_script(
            "return document.querySelectorAll('#timeline-chart rect').length;") >= 20)
        driver.save_screenshot(os.path.join(shots, "report_ranks.png"))
        check_plots(driver, By)
        driver.save_screenshot(os.path.join(shots, "report_plots.png"))
        check_log_search(driver, By, "rank 1 holds")
        driver.save_screenshot(os.path.join(shots, "report_logs.png"))
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        phases["report checked"] = time.time() - started
        print("dashboard in Chromium: ok (%s; screenshots in %s)"
              % (", ".join("%s %.1f s" % p for p in phases.items()), shots))
    finally:
        if driver:
            driver.quit()
        job.cleanup()


if __name__ == "__main__":
    main()
