"""Gate margins: the worst scaled residual per case over every run and seed of a variant against each gate's
tolerance; flagged within a factor 2 on the Run page and the Leaderboard; `since` names a child closer to a gate
than its parent. Stores written through the tracker's write path."""

from __future__ import annotations

import json
from datetime import timedelta

from tests.conftest import T0, kernel_source, make_record, open_page
from tracker.analysis.margins import closest_text, gate_margins
from tracker.cli.main import main
from tracker.store import Store
from tracker.workloads.qr_v2.gates import FACTOR_TOL


def _store(tmp_path):
    path = tmp_path / "s.duckdb"
    base = make_record("b0000000000a", variant="base", source=kernel_source("base", 1), path="k/base.py",
                       family="f", started=T0, means=[100.0] * 12)  # fmt: skip
    edgy = [
        make_record(rid, variant="edgy", source=kernel_source("edgy", 2), path="k/edgy.py", family="f",
                    started=T0 + timedelta(hours=i + 1), means=[90.0] * 12, parent="b0000000000a", seed=i)
        for i, rid in enumerate(("e0000000000a", "e0000000000b"))
    ]  # fmt: skip
    edgy[1].cases[3]["factor_res"] = 0.6 * FACTOR_TOL  # one seed of one case came close
    for rec in (base, *edgy):
        assert Store(path).finish_run(rec) is None
    return path, base.run.variant_sha256, edgy[0].run.variant_sha256


def test_margins_take_the_worst_run_and_flag_within_a_factor_2(tmp_path):
    path, base, edgy = _store(tmp_path)
    m = gate_margins(Store(str(path)).gate_residuals())
    assert m[edgy]["near"] and not m[base]["near"]
    c = m[edgy]["closest"]
    assert (c["gate"], c["case_idx"], c["runs"]) == ("factor_res", 3, 2) and c["ratio"] == 0.6
    assert {x["gate"] for x in m[base]["cases"]} == {"factor_res", "orth_res"} and len(m[base]["cases"]) == 24


def test_a_gate_a_run_failed_is_said_to_be_over_not_near():
    """The Run page of a failed run read "Within 2x of the factor gate ... 57.3 of 20 (286% of the tolerance)"."""
    near = {"gate": "factor_res", "case": "16x512 c2 mixed", "worst": 12.0, "tolerance": 20.0, "ratio": 0.6, "runs": 2}
    assert closest_text(near).startswith("Within 2x of the factor gate: on 16x512 c2 mixed") and "60%" in closest_text(
        near
    )
    over = near | {"worst": 57.3, "ratio": 57.3 / 20}
    text = closest_text(over)
    assert text.startswith("Over the factor gate:") and "2.9x the tolerance" in text and "Within" not in text


def test_since_run_page_and_leaderboard_flag_it(tmp_path, monkeypatch, capsys):
    path, _, _ = _store(tmp_path)
    assert main(["since", (T0 - timedelta(days=1)).isoformat(), "--json", "--store", str(path)]) == 0
    closer = json.loads(capsys.readouterr().out)["closer_to_gate"]
    assert [(c["run_id"], c["variant"], c["parent_variant"], c["gate"]) for c in closer] == [
        ("e0000000000b", "edgy", "base", "factor_res")  # once per variant, with its latest run
    ]
    empty = tmp_path / "no-samples"
    empty.mkdir()
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(empty))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_page("pages/run.py", id="e0000000000a")  # the flag is the variant's: every run of it says so
    assert any("Within 2x of the factor gate" in w.value for w in at.warning), [w.value for w in at.warning]
    at = open_page("pages/run.py", id="b0000000000a")
    assert not any("gate" in w.value for w in at.warning)
    at = open_page("pages/leaderboard.py")
    (near,) = [df.value for df in at.dataframe if "worst / tolerance" in df.value.columns]
    assert list(near["variant"]) == ["edgy"] and list(near["gate"]) == ["factor"]
