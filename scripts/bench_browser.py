"""Time the dashboard as a person sees it: in Chromium, every page switch in one browser session and every fresh
page load, on a large synthetic store (the one scripts/bench_dashboard.py builds).

    python scripts/bench_browser.py --store /tmp/kb-100k.duckdb [--runs 100000 --variants 2000] [--repeat 3]
    python scripts/bench_browser.py --store /tmp/kb-100k.duckdb --base cf3ae3c   # this checkout against a commit

Starts `streamlit run app.py` on the store (opened read-only: it is not the dashboard's own store) on a free
port, then drives Chromium with Playwright:

- switch: one browser session clicks through the sidebar (Experiments, Run, Compare, Regressions, Leaderboard,
  Lineage, Since, Benchmark) --repeat times; a switch is timed from the click until the page's title is shown,
  its script run is over and every chart on it has drawn;
- fresh: each page's URL (with the parameters a shared link has) opened in a new browser context (no cookies,
  a new Streamlit session), timed from navigation to the same point.

With --base REF, the commit REF is exported (git archive) into a temporary folder and served too, from the same
virtual environment, and every timing alternates between the two servers (base then this checkout, then the
other way round), so both see the same machine load: each fresh load of a page and each click of a switch is
taken on both before the next; the table then gives both medians side by side.

Before timing, one untimed load warms the fresh server (Python imports and the first reads, once per server
process); its time is printed on its own. Prints the median per page; exits 1 when a switch takes 1 s or more or
a fresh load 2 s or more. Needs the dev requirements (playwright) and a Chromium (see docs/install.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_dashboard  # noqa: E402

from tracker.store import Store  # noqa: E402

SWITCH_LIMIT_S, FRESH_LIMIT_S = 1.0, 2.0
# (sidebar label, page title) in the order a session clicks through them; a page's name is its label in lower case
NAV = [("Run", "Run"), ("Compare", "Compare"), ("Regressions", "Regressions"), ("Leaderboard", "Leaderboard"),
       ("Lineage", "Lineage"), ("Since", "Since"), ("Benchmark", "Run a benchmark"),
       ("Experiments", "Experiments")]  # fmt: skip
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
# Drawn: a Plotly chart has its SVG, a Vega-Lite chart its canvas (or SVG) with a size, unless it is hidden (a tab
# not shown).
DONE_JS = """(title) => {
    const h1 = [...document.querySelectorAll('h1')].some(h => h.innerText.trim() === title);
    const idle = document.querySelector("[data-test-script-state='notRunning']") !== null;
    const plotly = [...document.querySelectorAll("[data-testid='stPlotlyChart']")];
    const vega = [...document.querySelectorAll("[data-testid='stVegaLiteChart']")];
    const drawn = plotly.every(c => c.querySelector('.main-svg') !== null) && vega.every(c => {
        if (c.getClientRects().length === 0) return true;
        const m = c.querySelector('canvas, svg.marks');
        return m !== null && m.getBoundingClientRect().width > 0;
    });
    const stale = document.querySelector("[data-stale='true']") !== null;
    return h1 && idle && drawn && !stale;
}"""


def find_chromium() -> str:
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as p:
            bundled = p.chromium.executable_path
    except Exception:  # noqa: BLE001 - no Playwright browser: the system's
        bundled = None
    for candidate in (bundled, "/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("no Chromium: `python -m playwright install chromium` or `apt-get install chromium`")


def serve(store: Path, log: Path, root: Path = ROOT) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, KERNELBEAM_STORE=str(store), PYTHONPATH=str(root), KERNELBEAM_NO_GPU="1",
               KERNELBEAM_OWN_STORE=str(Path(tempfile.mkdtemp(prefix="kb-bench-own-")) / "own.duckdb"))  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true",
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=root, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                return proc, base
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the dashboard did not start: {log.read_text()[-2000:]}")


def wait_done(pg, title: str, timeout_s: float = 60.0) -> None:
    pg.wait_for_function(DONE_JS, arg=title, timeout=timeout_s * 1000, polling=20)


def fresh_urls(store: Path) -> list[tuple[str, str, str]]:
    """(name, path with query, title) of each page as a shared link opens it."""
    runs = Store(store).list_runs(limit=50)
    passed = runs[runs["status"] == "passed"]["run_id"].tolist()
    family = bench_dashboard.FAMILIES[0]
    gpu = bench_dashboard.GPU.replace(" ", "%20")
    return [
        ("experiments", "/", "Experiments"),
        ("run", f"/run?id={passed[0]}", "Run"),
        ("compare", f"/compare?a={passed[1]}&b={passed[0]}", "Compare"),
        ("regressions", f"/regressions?family={family}", "Regressions"),
        ("leaderboard", f"/leaderboard?suite=qr_v2&gpu={gpu}", "Leaderboard"),
        ("lineage", f"/lineage?family={family}&suite=qr_v2&gpu={gpu}", "Lineage"),
        ("since", "/since?since=1d", "Since"),
        ("benchmark", "/benchmark", "Run a benchmark"),
    ]


def export(ref: str) -> Path:
    """The tree of commit `ref` in a new temporary folder (git archive: no worktree, nothing else changed)."""
    out = Path(tempfile.mkdtemp(prefix="kb-bench-base-"))
    archive = subprocess.run(["git", "archive", "--format=tar", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def _timed_load(browser, url: str, title: str, viewport: dict) -> float:
    ctx = browser.new_context(viewport=viewport)
    pg = ctx.new_page()
    t = time.perf_counter()
    pg.goto(url)
    wait_done(pg, title)
    took = time.perf_counter() - t
    ctx.close()
    return took


def measure(bases: dict[str, str], store: Path, repeat: int):
    """Per server (name -> base URL): (first load, switches per page label, fresh loads per page name). With
    several servers every timing is taken on each in turn, the order reversed every round."""
    from playwright.sync_api import sync_playwright

    names = list(bases)
    switches = {n: {label: [] for label, _ in NAV} for n in names}
    fresh: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    first = {}
    viewport = {"width": 1440, "height": 1000}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        for n in names:
            ctx = browser.new_context(viewport=viewport)
            pg = ctx.new_page()
            t = time.perf_counter()
            pg.goto(bases[n] + "/")
            wait_done(pg, "Experiments", timeout_s=180)
            first[n] = time.perf_counter() - t
            ctx.close()
        for r in range(repeat):  # fresh loads: a new context each, so a new session with empty browser state
            for name, path, title in fresh_urls(store):
                for n in names if r % 2 == 0 else names[::-1]:
                    took = _timed_load(browser, bases[n] + path, title, viewport)
                    fresh[n].setdefault(name, []).append(took)
        pages, navs = {}, {}
        for n in names:
            ctx = browser.new_context(viewport=viewport)
            pages[n] = ctx.new_page()
            pages[n].goto(bases[n] + "/")
            wait_done(pages[n], "Experiments")
            navs[n] = pages[n].get_by_test_id("stSidebarNav")
        for r in range(repeat):
            for label, title in NAV:
                for n in names if r % 2 == 0 else names[::-1]:
                    link = navs[n].get_by_role("link", name=label, exact=True)
                    t = time.perf_counter()
                    link.click()
                    wait_done(pages[n], title)
                    switches[n][label].append(time.perf_counter() - t)
        browser.close()
    return first, switches, fresh


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=str(Path(tempfile.gettempdir()) / "kernelbeam-bench-100k.duckdb"))
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--variants", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--base", help="a commit to time too, interleaved with this checkout (e.g. the one before)")
    args = parser.parse_args()
    store = Path(args.store)
    if not store.exists() or Store(store).count_runs() != args.runs:
        print(f"building a store of {args.runs:,} runs (bench_dashboard.build_bulk) ...", file=sys.stderr)
        bench_dashboard.build_bulk(store, args.runs, args.variants, 12, 50)
    roots = {"this": ROOT}
    if args.base:
        roots = {f"base {args.base}": export(args.base), "this": ROOT}
    procs, bases = [], {}
    load_start = os.getloadavg()[0]
    try:
        for n, root in roots.items():
            log = Path(tempfile.gettempdir()) / f"kb-bench-browser-streamlit-{len(procs)}.log"
            proc, bases[n] = serve(store, log, root)
            procs.append(proc)
        first, switches, fresh = measure(bases, store, args.repeat)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        if args.base:
            shutil.rmtree(roots[f"base {args.base}"], ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"store {store}: {Store(store).count_runs():,} runs · {os.cpu_count()} cores · "
          f"load {load_start:.2f} at the start, {load:.2f} at the end")  # fmt: skip
    ok = True
    for n in roots:
        head = f"{n} ({ROOT if n == 'this' else args.base})"
        print(f"\n{head}: first load of a fresh server (untimed below): {first[n]:.2f} s")
        print(f"{'page':<14}{'switch (s)':>11}{'fresh (s)':>11}   median of {args.repeat}, in Chromium")
        for label, _ in NAV:
            name = label.lower()
            sw = statistics.median(switches[n][label])
            fr = statistics.median(fresh[n][name])
            slow = ("  switch >= 1 s!" if sw >= SWITCH_LIMIT_S else "") + (
                "  fresh >= 2 s!" if fr >= FRESH_LIMIT_S else ""
            )
            ok = ok and (not slow or n != "this")  # the limits are this checkout's
            each = " ".join(f"{x:.2f}" for x in switches[n][label])
            each += " / " + " ".join(f"{x:.2f}" for x in fresh[n][name])
            print(f"{name:<14}{sw:>11.2f}{fr:>11.2f}   each: {each}{slow}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
