"""Compare's note where two runs' means differ by how far each sits above its best repetition (a launch-bound
case's host pace, which moves between processes), not by the best itself: on the shipped H200 runs where it
happened (fused_wy_x2 91f17483358c against fused_wy_tmk_ga 2aaa7d503d4d: 20x32 0.623 in the means, 0.881 in the
best repetitions), through the CLI, its JSON and the Compare page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import open_page
from tracker.analysis.spread import spread_note

ROOT = Path(__file__).resolve().parent.parent
OLD, NEW = "91f17483358c", "2aaa7d503d4d"
# s30 holds an A/B session (250ea3a83dbe) whose two sides' 20x32 differ by spread too
SAMPLES = ("samples/h200-2026-12-06-s43", "samples/h200-2026-12-06-s50", "samples/h200-2026-12-04-s30")
PAIRED = ("938a87c12783", "e719bf10466f")


def test_a_mean_ratio_made_of_spread_is_noted_and_one_the_bests_share_is_not():
    note = spread_note({"mean_us": 33.96, "best_us": 22.11}, {"mean_us": 21.16, "best_us": 19.48})
    assert note.startswith("B/A 0.623 in the means but 0.881 in the best repetitions") and "1.54x" in note
    # the bests moved as far as the means: the kernel, not the spread
    assert spread_note({"mean_us": 30.0, "best_us": 20.0}, {"mean_us": 21.0, "best_us": 14.0}) is None
    # the spread moved, but less than the bests did
    assert spread_note({"mean_us": 24.0, "best_us": 20.0}, {"mean_us": 14.0, "best_us": 10.0}) is None
    # under the 10% that makes a note, however the bests lie
    assert spread_note({"mean_us": 21.0, "best_us": 20.0}, {"mean_us": 22.8, "best_us": 20.0}) is None
    for broken in ({"mean_us": 30.0, "best_us": None}, {"mean_us": 30.0, "best_us": 0.0}, {}):
        assert spread_note(broken, {"mean_us": 21.0, "best_us": 19.0}) is None


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spread") / "runs.duckdb"
    proc = subprocess.run(
        [sys.executable, "-m", "tracker", "import", "--store", str(path), *SAMPLES],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return path


def compare(store: Path, *args: str, runs: tuple[str, str] = (OLD, NEW)) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "tracker", "compare", *runs, "--store", str(store), *args],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc


def test_compare_notes_the_launch_bound_case_and_no_other(store):
    warned = [x for x in compare(store).stderr.splitlines() if "in the best repetitions" in x]
    assert len(warned) == 1 and warned[0].startswith("warning: 20x32 c1 dense: B/A 0.623"), warned
    doc = json.loads(compare(store, "--json").stdout)
    assert [n["case"] for n in doc["spread"]] == ["20x32 c1 dense"]
    assert "tracker ab" in doc["spread"][0]["note"]


def test_one_ab_sessions_two_runs_get_its_paired_verdict_instead(store):
    from tracker.analysis.spread import compare_notes
    from tracker.store import Store

    bundles = [Store(store).run_bundle(r) for r in PAIRED]
    assert compare_notes(bundles[0]["cases"], bundles[1]["cases"])  # unpaired, the rule would speak
    doc = json.loads(compare(store, "--json", runs=PAIRED).stdout)
    assert doc["pair"]["pair_id"] == "250ea3a83dbe" and doc["spread"] == []
    assert "in the best repetitions" not in compare(store, runs=PAIRED).stderr


def test_the_compare_page_says_it_beside_the_table(store, monkeypatch):
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    at = open_page("pages/compare.py", a=OLD, b=NEW)
    (warning,) = [w.value.replace("\\", "") for w in at.warning if "above its best repetition" in w.value]
    assert "**20x32 c1 dense**" in warning and "0.881 in the best repetitions" in warning, warning
    assert warning.count("**") == 2  # one case
    at = open_page("pages/compare.py", a=PAIRED[0], b=PAIRED[1])
    assert not [w for w in at.warning if "above its best repetition" in w.value]
