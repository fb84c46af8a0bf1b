"""End to end: `streamlit run app.py` on a free port, driven by Playwright in a real Chromium: Playwright's own
build when `python -m playwright install chromium` has put it there, else Debian's /usr/bin/chromium
(scripts/install.sh --dev installs one of them). With neither, these tests are skipped and say why, except under CI
(CI or KERNELBEAM_REQUIRE_SANDBOX set), where they fail.

Opens every page (the first request is a shared compare URL, which must work on a fresh server), follows a
compare URL from the regressions of a family, starts a CPU smoke run from the Benchmark page, reloads the page
while it runs, sees it finish and appear on Experiments. Screenshots go to $KERNELBEAM_SCREENSHOTS_DIR, else a
folder in the temp folder (never into the checkout).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import free_port
from tracker.capture import jobs
from tracker.store import Store

ROOT = Path(__file__).resolve().parent.parent
SHOTS = Path(os.environ.get("KERNELBEAM_SCREENSHOTS_DIR") or Path(tempfile.gettempdir()) / "kernelbeam-screenshots")
UNDER_CI = bool(os.environ.get("CI") or os.environ.get("KERNELBEAM_REQUIRE_SANDBOX"))  # there: fail, not skip
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip

if UNDER_CI:
    import playwright.sync_api as playwright_api  # missing under CI: the module fails to import, loudly
else:
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)"
    )
expect = playwright_api.expect


def find_chromium() -> str | None:
    """Playwright's bundled Chromium if it is installed, else the system's; None when there is neither."""
    try:
        with playwright_api.sync_playwright() as p:
            bundled = p.chromium.executable_path
    except Exception:  # no driver or no browser registry: fall back to the system browser
        bundled = None
    for candidate in (bundled, "/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


CHROMIUM = find_chromium()
NO_CHROMIUM = (
    "no Chromium for the browser tests: run `python -m playwright install chromium` "
    "(or apt-get install chromium); scripts/install.sh --dev tries both"
)
# One worker takes the whole module, so the tests of `shared_server` share its one server, as it means them to.
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None and not UNDER_CI, reason=NO_CHROMIUM),
    pytest.mark.xdist_group("browser"),
]


LOCAL_URLS = ("http://127.0.0.1:", "ws://127.0.0.1:", "data:", "blob:", "about:")


def _serve(path: Path, tmp_path: Path):
    """`streamlit run app.py` on `path` (its own store), on a free port; yields the base URL."""
    port = free_port()
    samples = tmp_path / "no-samples"
    samples.mkdir(exist_ok=True)
    env = dict(
        os.environ, KERNELBEAM_STORE=str(path), KERNELBEAM_OWN_STORE=str(path), KERNELBEAM_NO_GPU="1",
        KERNELBEAM_SAMPLES_DIR=str(samples), PYTHONPATH=str(ROOT),
    )  # fmt: skip
    env.pop("KERNELBEAM_KERNELS_DIR", None)
    log = open(tmp_path / "streamlit.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.headless", "true", "--server.address", "127.0.0.1"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError((tmp_path / "streamlit.log").read_text())
        time.sleep(0.2)
    try:
        yield base
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)
        log.close()
        for job in jobs.list_jobs(path):  # nothing left running
            if jobs.is_active(job):
                jobs.cancel(path, job.job_id)
                jobs.wait(job, timeout=30)


@pytest.fixture
def server(demo_store, tmp_path):
    path, ids = demo_store
    for base in _serve(path, tmp_path):
        yield base, path, ids


@pytest.fixture
def page(server):
    yield from _browse()


@pytest.fixture(scope="module")
def shared_server(demo_store_master, tmp_path_factory):
    """One server for the tests that need no fresh one and bear each other's runs (a fresh server per test costs
    its start-up): the Benchmark run, then the leaderboard, lineage and since pages."""
    master, ids = demo_store_master
    folder = tmp_path_factory.mktemp("shared-server")
    path = folder / "store.duckdb"
    shutil.copy(master, path)
    for base in _serve(path, folder):
        yield base, path, ids


@pytest.fixture
def shared_page(shared_server):
    yield from _browse()


def _browse():
    assert CHROMIUM is not None, NO_CHROMIUM  # under CI a missing browser fails the test
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pg = browser.new_context(viewport={"width": 1440, "height": 1800}).new_page()  # a context that takes more
        pg.set_default_timeout(60_000)
        errors: list[str] = []
        pg.on("pageerror", lambda exc: errors.append(str(exc)))
        # A chart whose marks get no coordinates says so only here ("<line> attribute y2: Expected length, NaN"):
        # the Compare page's bars were blank that way, on a log axis from zero.
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" and "NaN" in m.text else None)
        # Vega-Lite's own warnings ("WARN Infinite extent for field y", "zero is dropped ... log scale"): a layer
        # left empty by its filter, a scale setting it ignores; each one a chart drawn from a guess
        pg.on(
            "console", lambda m: errors.append(m.text) if m.type == "warning" and m.text.startswith("WARN ") else None
        )
        # Nothing may leave the machine (issue 21: the favicon came from fonts.gstatic.com): only the dashboard's
        # own server, and data: or blob: URLs the page makes itself.
        away: list[str] = []
        pg.context.on("request", lambda r: None if r.url.startswith(LOCAL_URLS) else away.append(r.url))
        yield pg
        browser.close()
        assert not errors, errors
        assert not away, away


def settle(pg) -> None:
    """Wait until the script run triggered by the last action is over."""
    pg.wait_for_timeout(300)
    pg.wait_for_selector("[data-test-script-state='notRunning']", state="attached")
    pg.wait_for_timeout(300)


def goto(pg, url: str) -> None:
    pg.goto(url)
    pg.wait_for_selector("[data-testid='stApp']")
    # The navigation is drawn by the page's first script run: before it, the app can read "notRunning" while
    # its first run has not started yet (seen under load), and settle() would return on an empty page.
    pg.wait_for_selector("[data-testid='stSidebarNav']", state="attached")
    settle(pg)


def shot(pg, name: str) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its main block, so grow the window to fit."""
    size = pg.viewport_size
    height = pg.evaluate(
        "() => Math.max(...[...document.querySelectorAll('[data-testid=stMain], [data-testid=stMainBlockContainer]')]"
        ".map(e => e.scrollHeight), 0)"
    )
    if height > size["height"]:
        pg.set_viewport_size({"width": size["width"], "height": min(height + 60, 8000)})
        pg.wait_for_timeout(700)
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    if height > size["height"]:
        pg.set_viewport_size(size)


VEGA = "[data-testid='stVegaLiteChart']"
VEGA_DRAWN = """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")].every(c => {
    if (c.getClientRects().length === 0) return true;  // in a tab not shown
    const m = c.querySelector('canvas, svg.marks');
    return m !== null && m.getBoundingClientRect().width > 0 && m.getBoundingClientRect().height > 0;
})"""


def vega_descriptions(pg, count: int = 1) -> list[str]:
    """The page's Vega-Lite charts, once drawn, by their descriptions: a chart drawn on a canvas has no text to
    read, and Vega gives it the spec's description as its aria-label (what a screen reader says), which names what
    it draws (the progress chart's families, the timelines' cases, the compare charts' cases)."""
    expect(pg.locator(VEGA)).to_have_count(count)
    pg.wait_for_function(VEGA_DRAWN)
    charts = pg.locator(f"{VEGA}[aria-roledescription='visualization']")  # Vega marks its container so
    expect(charts).to_have_count(count)
    return [charts.nth(k).get_attribute("aria-label") or "" for k in range(count)]


def no_exception(pg) -> None:
    assert pg.locator("[data-testid='stException']").count() == 0, pg.locator(
        "[data-testid='stException']"
    ).inner_text()


def test_every_page_and_a_shared_compare_url(server, page):
    base, path, ids = server
    # The very first request of a fresh server is a shared link: it must open with the app's navigation.
    goto(page, f"{base}/compare?a={ids['before_regression']}&b={ids['regressed']}")
    no_exception(page)
    nav = page.get_by_test_id("stSidebarNav")
    assert nav.get_by_text("Experiments").is_visible() and nav.get_by_text("Benchmark").is_visible()
    assert nav.get_by_text("common").count() == 0  # not the legacy pages/ listing
    main = page.get_by_test_id("stMain")
    assert "householder_v4" in main.inner_text() and "householder_v5" in main.inner_text()
    assert page.get_by_test_id("stMetricValue").first.inner_text().startswith("1.03")
    bars, speedup = vega_descriptions(page, 2)
    assert "640x512 c2 dense" in bars and "640x512 c2 dense" in speedup
    page.get_by_test_id("stExpander").filter(has_text="Source diff of").locator("summary").click()  # folded
    settle(page)
    assert "+BLOCK = 48" in page.get_by_test_id("stCode").first.inner_text()
    shot(page, "compare")
    page.get_by_role("tab", name="Side by side").click()
    settle(page)
    assert page.locator("table.kb-diff").is_visible()
    page.locator("table.kb-diff").scroll_into_view_if_needed()
    shot(page, "compare-side-by-side")

    goto(page, base)
    no_exception(page)
    assert page.get_by_role("heading", name="Experiments").is_visible()
    # Under load the page's first script run can start after settle() saw the idle state: wait for its table.
    page.get_by_test_id("stDataFrame").first.wait_for(state="visible")
    assert page.get_by_test_id("stDataFrame").count() == 1
    # the chart opens on the busiest context: the newest (the demo's CPU run, the other pages' context) has one run
    chart_of = page.get_by_test_id("stSelectbox").filter(has_text="Progress chart of").locator("input")
    assert chart_of.input_value() == "qr_v2 · NVIDIA H200 (11 runs)"
    (legend,) = vega_descriptions(page)  # the progress chart, with its families
    assert "householder" in legend and "wy" in legend
    shot(page, "experiments")
    search = page.get_by_role("textbox", name="Search")
    search.fill("'; DROP TABLE runs; --")
    search.press("Enter")
    settle(page)
    no_exception(page)
    assert "No runs match" in page.get_by_test_id("stMain").inner_text()
    assert "q=" in page.url  # the search is part of the shareable URL
    shot(page, "experiments-search-sql")

    goto(page, f"{base}/run?id={ids['profiled']}")
    no_exception(page)
    text = page.get_by_test_id("stMain").inner_text()
    assert "householder_v4" in text and "Rates use the work per call" in text
    shot(page, "run")
    page.get_by_role("tab", name="Samples").click()
    settle(page)
    (boxes,) = vega_descriptions(page)
    assert "640x512 c2 dense" in boxes
    shot(page, "run-samples")
    page.get_by_role("tab", name="Profile").click()
    settle(page)
    shot(page, "run-profile")
    # Choosing another run is a history entry: Back shows the run before, with its id in the box.
    run_box, heading = page.get_by_role("textbox", name="Run id"), page.get_by_test_id("stMain").locator("h3").first
    run_box.fill(ids["wy"][1])
    run_box.press("Enter")
    settle(page)
    assert f"id={ids['wy'][1]}" in page.url and "wy_v1" in heading.inner_text()
    page.go_back()
    settle(page)
    assert f"id={ids['profiled']}" in page.url and run_box.input_value() == ids["profiled"]
    assert "householder_v4" in heading.inner_text()

    goto(page, f"{base}/run?id=no-such-run")
    no_exception(page)
    assert "No run matches" in page.get_by_test_id("stAlert").first.inner_text()
    shot(page, "run-unknown-id")

    goto(page, f"{base}/regressions?family=householder")
    no_exception(page)
    assert page.get_by_test_id("stMetricValue").nth(1).inner_text() == "1"  # one regression
    (timelines,) = vega_descriptions(page)  # one chart: a timeline per case
    assert "640x512 c2 dense" in timelines
    shot(page, "regressions")

    # follow the compare link of that regression (the table is a canvas: take the link the page was given)
    from tracker.analysis import series as analysis

    hist = Store(path).case_history(family="householder", suite="qr_v2", gpu="NVIDIA H200")
    points = analysis.history_points(hist)
    link = analysis.regression_table(analysis.detect_all(points), points, hist["runs"]).iloc[0]["compare"]
    goto(page, f"{base}/{link}")
    no_exception(page)
    assert f"b={ids['regressed']}" in page.url
    assert "1 slower, 11 same" in page.get_by_test_id("stMain").inner_text()

    goto(page, f"{base}/benchmark")
    no_exception(page)
    assert "No GPU here" in page.get_by_test_id("stMain").inner_text()
    shot(page, "benchmark")


def _choose(pg, widget, option: str) -> None:
    """Open a select widget's list and click an option (retried: a rerun may close the list under us)."""
    for attempt in range(3):
        widget.locator("input").click()
        try:
            pg.get_by_role("option", name=option, exact=True).click(timeout=10_000)
            break
        except playwright_api.TimeoutError:
            if attempt == 2:
                raise
            pg.keyboard.press("Escape")
            settle(pg)
    settle(pg)


def _select(pg, label: str, option: str) -> None:
    _choose(pg, pg.get_by_test_id("stSelectbox").filter(has_text=label), option)


def test_start_a_cpu_smoke_run_from_the_browser(shared_server, shared_page):
    base, path, ids = shared_server
    page = shared_page
    goto(page, f"{base}/benchmark")
    kernel = page.get_by_test_id("stSelectbox").filter(has_text="Kernel file").locator("input")
    _select(page, "Kernel file", "blocked_wy_torch.py")
    _select(page, "Problem (GPU Mode", "vectoradd")  # another problem: its own kernel, not the qr_v2 file chosen before
    assert kernel.input_value() == "vectoradd/submission.py (the problem's own)"
    _select(page, "Problem (GPU Mode", "qr_v2 (built in)")
    _select(page, "Kernel file", "geqrf_reference.py")
    page.get_by_test_id("stExpander").get_by_text("Options", exact=True).click()
    # No case subset: only a whole-suite run scores a geomean, and the progress chart below needs one.
    page.get_by_test_id("stMultiSelect").filter(has_text="Only these cases").wait_for()
    page.get_by_role("textbox", name="Family").fill("reference")
    page.get_by_role("textbox", name="Family").press("Enter")
    settle(page)
    page.get_by_role("button", name="Start run").click()
    settle(page)
    no_exception(page)
    main = page.get_by_test_id("stMain")
    assert "Started job" in main.inner_text()
    page.reload()  # the job lives on disk, not in the page
    page.wait_for_selector("[data-testid='stApp']")
    settle(page)
    assert "geqrf_reference.py" in main.inner_text()
    page.get_by_text(re.compile(r"case [1-4] of 4")).wait_for()  # live progress, polled by the fragment
    shot(page, "benchmark-running")
    # The run's own length depends on the machine's load (a whole CPU suite under three test workers took over
    # 120 s once), so wait on the job's state on disk; the page must then catch up within its polling period.
    (job,) = jobs.list_jobs(path)
    assert jobs.wait(job, timeout=600)["state"] == "finished"
    try:
        page.get_by_text("finished: passed").wait_for(timeout=30_000)
    except playwright_api.TimeoutError:  # what the page showed instead, for the next diagnosis
        shot(page, "benchmark-not-finished")
        raise AssertionError(f"the page did not show the job's end: {main.inner_text()[-1500:]}") from None
    settle(page)
    no_exception(page)
    shot(page, "benchmark-finished")
    run_id = jobs.status(job)["run_id"]
    assert Store(path).get_run(run_id)["status"] == "passed"
    page.get_by_text(f"open run {run_id}").first.click()
    settle(page)
    assert f"id={run_id}" in page.url and "geqrf_reference" in page.get_by_test_id("stMain").inner_text()
    shot(page, "run-from-ui")

    goto(page, base)
    assert page.get_by_test_id("stMetricValue").first.inner_text() == "15"  # one variant more
    # the demo's CPU run and this one: two runs of the newest context, which the chart now opens on
    chart_of = page.get_by_test_id("stSelectbox").filter(has_text="Progress chart of").locator("input")
    assert chart_of.input_value() == "smoke · CPU (2 runs)"
    (legend,) = vega_descriptions(page)
    assert "reference" in legend
    page.get_by_role("textbox", name="Search").fill("geqrf")
    page.get_by_role("textbox", name="Search").press("Enter")
    settle(page)
    assert page.get_by_test_id("stMetricValue").first.inner_text() == "2"  # the demo's and the real source
    shot(page, "experiments-after-ui-run")


def test_leaderboard_lineage_and_since_pages(shared_server, shared_page):
    base, path, ids = shared_server
    page = shared_page
    # the default page by the names a user types: no "Page not found". (`/home` as the very first request a server
    # gets still says it: Streamlit knows only the files in pages/ before the app's first run declares its pages.)
    for name in ("experiments", "home"):
        goto(page, f"{base}/{name}?q=wy")
        # the forward to the default page is a second script run, which under load can start after goto() settled
        expect(page.get_by_role("heading", name="Experiments")).to_be_visible(timeout=30_000)
        no_exception(page)
        assert page.get_by_text("Page not found").count() == 0
        # the heading can show before the forwarded run has filled the box from the URL (read empty once under load)
        expect(page.get_by_role("textbox", name="Search")).to_have_value("wy", timeout=30_000)
    goto(page, f"{base}/leaderboard?suite=qr_v2&gpu=NVIDIA%20H200")
    no_exception(page)
    main = page.get_by_test_id("stMain")
    assert page.get_by_role("heading", name="Leaderboard").is_visible()
    assert re.search(r"\d+ variants · 12 cases · qr_v2 · benchmark · NVIDIA H200", main.inner_text())
    assert page.get_by_test_id("stDataFrame").count() == 2  # the board, and where one variant's time goes
    # At 1440 px the board drew six of its twelve case columns, headed "640x512 c2 dense (µs)", the sixth cut to
    # "8x20": now the columns the grid draws (its accessible headers) are those of at least eleven cases, by shape.
    columns = page.get_by_test_id("stDataFrame").first.locator("th[role=columnheader]")
    expect(columns.first).to_be_attached(timeout=30_000)  # the grid draws after the script run (read empty once)
    headers = columns.all_inner_texts()
    assert headers[:2] == ["variant", "geomean"] and len(headers) >= 13, headers
    assert headers[2:5] == ["20×32", "40×176", "40×352"] and not any("(µs)" in h for h in headers), headers
    shot(page, "leaderboard")

    goto(page, f"{base}/lineage?family=householder&suite=qr_v2&gpu=NVIDIA%20H200")
    no_exception(page)
    assert page.get_by_role("heading", name="Lineage").is_visible()
    assert re.search(
        r"\d+ variants, 1 root · geomeans on qr_v2", page.get_by_test_id("stMain").inner_text()
    )  # not "1 roots"
    shot(page, "lineage")

    goto(page, f"{base}/since")  # no ?since=: the last 24 hours on a first visit, and the visit is kept
    assert page.get_by_role("textbox", name="Since").input_value() == "24h"
    assert not page.locator("iframe").count()  # an iframe's load lost or doubled history entries (Back/Forward)
    later = page.context.new_page()  # a new session of the same browser: it opens on the last visit
    goto(later, f"{base}/since")
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", later.get_by_role("textbox", name="Since").input_value()
    )
    later.close()
    goto(page, f"{base}/since?since=2026-01-01T00:00:00")
    no_exception(page)
    assert page.get_by_role("heading", name="Since").is_visible()
    labels = page.get_by_test_id("stMetricLabel").all_inner_texts()
    values = page.get_by_test_id("stMetricValue").all_inner_texts()
    metrics = dict(zip(labels, values, strict=True))
    assert int(metrics["Runs"]) >= 10 and int(metrics["Failures"]) >= 1
    # a run's new best geomean and a case's new best mean are two tables, never one column
    assert page.get_by_role("heading", name="New best geomeans").is_visible()
    assert page.get_by_role("heading", name="New best case means").is_visible()
    shot(page, "since")


# The main area's select and text boxes, label -> value shown; a count in an option's label ("(3 runs)") is left out:
# Chromium may show the count of the page before until the box is redrawn.
FILTERS_JS = """() => Object.fromEntries([...document.querySelectorAll(
    "[data-testid=stMain] [data-testid=stSelectbox] input, [data-testid=stMain] [data-testid=stTextInput] input")]
    .map(i => [i.getAttribute('aria-label'), i.value.replace(/ \\(\\d+ runs\\)$/, '')]))"""


def test_back_and_forward_across_pages(server, page):
    """Issue 21: every page keeps its filters (and the sidebar its GPU) in the URL; a page switch and a changed
    filter are one history entry each, so each Back returns to the state before (page, URL and the filters shown),
    and Forward returns. (A server of its own: a run finishing in the store meanwhile would change what a page
    shows.)"""
    base, _, ids = server
    pg = page
    nav, main = pg.get_by_test_id("stSidebarNav"), pg.get_by_test_id("stMain")
    sidebar_gpu = pg.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has_text="GPU")
    seen: list[tuple[str, dict[str, str]]] = []  # (URL, filters shown) after each step

    def state() -> tuple[str, dict[str, str]]:
        shown = pg.evaluate(FILTERS_JS)
        shown["sidebar GPU"] = sidebar_gpu.locator("input").input_value()
        if "since=" not in pg.url:  # Since without ?since= opens on the last visit, which moves on each visit
            shown.pop("Since", None)
        return pg.url, shown

    def step(action) -> None:
        before = pg.evaluate("history.length")
        action()
        settle(pg)
        try:
            pg.wait_for_function("n => history.length > n", arg=before, timeout=15_000)  # the entry may come late
        except playwright_api.TimeoutError as exc:  # seen in full suites only: name the step, keep the page
            shot(pg, f"back-forward-step-{len(seen)}")
            raise AssertionError(
                f"no new history entry at step {len(seen)} (after {seen[-1][0]}): now at {pg.url}, history.length "
                f"{pg.evaluate('history.length')} (was {before}); screenshot in {SHOTS}"
            ) from exc
        settle(pg)
        no_exception(pg)
        assert pg.evaluate("history.length") == before + 1, f"one history entry per step, at {pg.url}"
        seen.append(state())

    def switch_to(label: str):
        return lambda: nav.get_by_role("link", name=label, exact=True).click()

    def choose(label: str, option: str | None = None):
        """Pick `option` in the main area's select box `label` (None: any option but the one shown)."""

        def pick() -> None:
            box = main.get_by_test_id("stSelectbox").filter(has_text=label)
            if option is None:
                box.locator("input").click()
                shown = box.locator("input").input_value()
                names = [n for n in pg.get_by_role("option").all_inner_texts() if n.strip() != shown]
                pg.keyboard.press("Escape")
                settle(pg)
                _choose(pg, box, names[0].strip())
            else:
                _choose(pg, box, option)

        return pick

    def type_in(label: str, text: str):
        def fill() -> None:
            box = pg.get_by_role("textbox", name=label)
            box.fill(text)
            box.press("Enter")

        return fill

    goto(pg, f"{base}/?family=householder&sort=name")
    seen.append(state())
    assert seen[0][1]["Family"] == "householder" and seen[0][1]["Sort by"] == "name"
    step(switch_to("Leaderboard"))
    assert pg.url == f"{base}/leaderboard" and seen[-1][1]["Family"] == "any"  # nothing of the page before
    step(choose("Sort by"))
    step(switch_to("Lineage"))
    step(choose("Family", "householder"))
    step(switch_to("Since"))
    step(type_in("Since", "2h"))
    step(switch_to("Run"))
    step(type_in("Run id", ids["profiled"]))
    step(switch_to("Compare"))
    step(type_in("Run A (baseline)", ids["wy"][1]))
    step(switch_to("Regressions"))
    step(choose("Family"))
    step(switch_to("Experiments"))
    step(choose("Status", "passed"))
    step(lambda: _choose(pg, sidebar_gpu, "CPU"))  # the sidebar's GPU is in the URL too
    assert seen[-1][0] == f"{base}/?status=passed&gpu=CPU" and seen[-1][1]["sidebar GPU"] == "CPU"
    queries_seen = [url.removeprefix(base) for url, _ in seen]
    assert queries_seen[3] == "/lineage" and queries_seen[4] == "/lineage?family=householder", queries_seen
    assert "/since?since=2h" in queries_seen and f"/run?id={ids['profiled']}" in queries_seen, queries_seen

    for url, shown in reversed(seen[:-1]):  # Back, one press per step
        pg.go_back()
        settle(pg)
        assert state() == (url, shown)
    assert not pg.get_by_text("Page not found").count()
    for url, shown in seen[1:4]:  # and Forward
        pg.go_forward()
        settle(pg)
        assert state() == (url, shown)
    no_exception(pg)


@pytest.fixture
def fresh_server(tmp_path, monkeypatch):
    """A newcomer's store: seeded from samples/ (the H200 runs), then one real CPU run through the CLI, newer
    than every sample."""
    from tracker.store.transfer import seed_from_samples

    path = tmp_path / "experiments.duckdb"
    if not seed_from_samples(path, ROOT / "samples"):
        pytest.skip("no run exports in samples/")
    env = dict(os.environ, KERNELBEAM_NO_GPU="1")
    ran = subprocess.run([sys.executable, "-m", "tracker", "run", "kernels/geqrf_reference.py", "--suite", "smoke",
                          "--cases", "0", "--family", "mine", "--store", str(path), "--json"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    for base in _serve(path, tmp_path):
        yield base, path


@pytest.fixture
def fresh_page(fresh_server):
    yield from _browse()


def test_a_new_cpu_run_leaves_every_page_with_data(fresh_server, fresh_page):
    """Issue 21: after a CPU run beside the shipped H200 runs, every page opens on runs it can show; a filter set
    on Experiments goes into the URL under the name every page uses, and `lineage?family=` is honoured (Back and
    Forward across pages: test_back_and_forward_across_pages)."""
    base, _ = fresh_server
    pg = fresh_page
    for name, heading in (("leaderboard", "Leaderboard"), ("lineage", "Lineage"), ("regressions", "Regressions")):
        goto(pg, f"{base}/{name}")
        no_exception(pg)
        data = pg.locator(f"{VEGA} canvas" if name == "regressions" else "[data-testid='stDataFrame']")  # drawn
        try:  # the table or chart draws after the page's text: wait for it rather than count too early
            data.first.wait_for(state="visible", timeout=30_000)
        except playwright_api.TimeoutError:
            pass
        main = pg.get_by_test_id("stMain").inner_text()
        shown = data.count()
        assert pg.get_by_role("heading", name=heading, level=1).is_visible() and shown, main[:500]
        assert not any(e in main for e in ("No benchmark", "No runs match", "No variants")), main[:500]
    goto(pg, base)
    pg.get_by_test_id("stSelectbox").filter(has_text="Family").click()
    pg.get_by_role("option", name="mine", exact=True).click()
    settle(pg)
    assert "family=mine" in pg.url and pg.get_by_test_id("stMetricValue").first.inner_text() == "1"
    goto(pg, f"{base}/lineage?family=mine")
    assert "1 variant, 1 root" in pg.get_by_test_id("stMain").inner_text()


FITS = """() => {
    const main = document.querySelector("[data-testid='stMainBlockContainer']").getBoundingClientRect();
    const shown = [...document.querySelectorAll("[data-testid='stVegaLiteChart'] canvas, "
                                             + "[data-testid='stVegaLiteChart'] svg.marks")]
        .filter(m => m.getClientRects().length > 0);
    return shown.length > 0 && shown.every(m => m.getBoundingClientRect().right <= main.right + 1);
}"""
# The page's content does not scroll sideways (a chart wider than it ran past the window's edge, out of sight).
NO_SIDEWAYS = """() => {
    const block = document.querySelector("[data-testid='stMainBlockContainer']");
    return block.scrollWidth <= block.clientWidth + 1;
}"""
# A filter's short value cut to a letter or two ("an", "b"): in five or six equal columns on an 800 px page. (A
# long choice, as Run's "Open a run", may end in an ellipsis.)
CUT_FILTERS = """() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stSelectbox'] input")]
    .filter(i => i.value && i.value.length <= 16 && i.scrollWidth > i.clientWidth + 1)
    .map(i => i.getAttribute('aria-label') + ': ' + i.value)"""
CUT_METRICS = """() => [...document.querySelectorAll(
        "[data-testid='stMetricValue'] div, [data-testid='stMetricLabel'] p")]
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"""


def test_run_page_fits_its_page_and_stays_on_the_verdict_tab(server, page):
    """At 1440 px the sixth column of box plots was cut off; at 800 px the metrics read "2,72…" and "7e1…", and the
    box plots and the Regressions timeline ran past the window; recording a verdict showed the Cases tab again."""
    base, path, ids = server
    run = ids["householder"][9]
    goto(page, f"{base}/run?id={run}")
    page.get_by_role("tab", name="Samples").click()
    vega_descriptions(page)
    assert page.evaluate(FITS), "the box plots reach past the page's content"
    page.get_by_role("tab", name="Verdict").click()
    page.get_by_test_id("stRadio").filter(has_text="Verdict on this variant").get_by_text("rejected").click()
    page.get_by_label("Reason").fill("slower on 640x512 dense")
    page.get_by_role("button", name="Record verdict").click()
    settle(page)
    no_exception(page)
    expect(page.get_by_text("Recorded: rejected")).to_be_visible()
    expect(page.get_by_role("tab", name="Verdict")).to_have_attribute("aria-selected", "true")
    assert Store(path).run_bundle(run)["verdicts"].iloc[0]["verdict"] == "rejected"
    # A bare URL in stored text (here a note): escaped Markdown still became a live link in Chromium (GFM's
    # literal autolinks), on the Run, Compare and Lineage pages.
    from conftest import T0, make_record

    linked = make_record(
        "urlnote0000a",
        variant="urlnote",
        source="# u\n",
        path="kernels/u.py",
        family=None,
        started=T0,
        means=None,
        note="as http://127.0.0.2:9/r.png, www.example.com and ops@example.com say",
    )
    assert Store(path).finish_run(linked) is None
    goto(page, f"{base}/run?id=urlnote0000a")
    expect(page.get_by_text("127.0.0.2", exact=False).first).to_be_visible()
    assert page.locator("a[href*='127.0.0.2'], a[href*='example.com']").count() == 0, page.eval_on_selector_all(
        "a[href*='127.0.0.2'], a[href*='example.com']", "els => els.map(e => e.outerHTML)"
    )
    page.set_viewport_size({"width": 800, "height": 1800})
    for url in (f"run?id={run}", "", f"compare?a={ids['before_regression']}&b={ids['regressed']}", "regressions",
                "leaderboard", "lineage"):  # fmt: skip
        goto(page, f"{base}/{url}")
        no_exception(page)
        page.wait_for_timeout(500)  # the layout after the window's change
        assert page.evaluate(CUT_METRICS) == [], url
        assert page.evaluate(CUT_FILTERS) == [], url
    shot(page, "run_800")
    # At 800 px the Regressions timelines (three a row) and the box plots (four a row) ran past the window's right
    # edge, out of sight: now a panel per case, as wide as the page.
    for url, tab, name in (("regressions?family=householder", None, "regressions_800"),
                           (f"run?id={run}", "Samples", "run_samples_800")):  # fmt: skip
        goto(page, f"{base}/{url}")
        if tab:
            page.get_by_role("tab", name=tab).click()
        vega_descriptions(page)
        page.wait_for_timeout(500)  # the panels resized to the page
        assert page.evaluate(FITS) and page.evaluate(NO_SIDEWAYS), f"{url}: the chart reaches past the page's content"
        shot(page, name)
