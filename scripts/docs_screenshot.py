"""Take docs/compare.png again: the Compare page in Chromium on a store seeded from samples/, as a fresh clone's
dashboard shows it, comparing the best passed qr_v2 benchmark run on the H200 (B) with the best run of another
variant (A, by default the next best).

    python scripts/docs_screenshot.py [--a RUN] [--b RUN] [--out docs/compare.png]

Uses the server and browser helpers of scripts/bench_browser.py (a free port, the store opened read-only, the page
done when its script run is over and its charts have drawn). Needs the dev requirements (playwright) and a Chromium.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_browser import CHROMIUM_ARGS, find_chromium, serve, wait_done  # noqa: E402

from tracker.store import Store  # noqa: E402
from tracker.store.transfer import seed_from_samples  # noqa: E402

SUITE, GPU = "qr_v2", "NVIDIA H200"


def best_two(store: Path) -> tuple[str, str]:
    """(A, B): the best runs of the second best and the best variant, by geomean."""
    table = Store(store).variant_table(suite=SUITE, mode="benchmark", status="passed", gpu=GPU)
    best = table.dropna(subset=["best_geomean_us"]).sort_values("best_geomean_us")["best_run"].tolist()
    if len(best) < 2:
        raise SystemExit(f"fewer than two passed {SUITE} benchmark variants on {GPU} in {store}")
    return best[1], best[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", help="run A (baseline); default: the best run of the second best variant")
    parser.add_argument("--b", help="run B (candidate); default: the best run of all")
    parser.add_argument("--out", default=str(ROOT / "docs" / "compare.png"))
    parser.add_argument("--width", type=int, default=1440)
    parser.add_argument("--height", type=int, default=1700)
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp(prefix="kb-docs-shot-")) / "samples.duckdb"
    seed_from_samples(store, ROOT / "samples")
    a, b = best_two(store)
    a, b = args.a or a, args.b or b
    proc, base = serve(store, store.with_suffix(".log"))
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
            # Streamlit scrolls inside its own container, so the viewport is the picture: tall enough for the
            # table and the first chart
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            page.goto(f"{base}/compare?a={a}&b={b}")
            wait_done(page, "Compare", timeout_s=180)
            page.locator("[data-testid='stDataFrame'] canvas").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1000)  # the grid draws its cells after its canvas appears
            page.screenshot(path=args.out)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"{args.out}: Compare of {a} (A) and {b} (B)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
