"""validation/fidelity_table.py reads the pool's JSON files as the tracker and the spec loop write them."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _module():
    spec = importlib.util.spec_from_file_location("fidelity_table", ROOT / "validation" / "fidelity_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_says_whether_the_tracker_median_is_inside_the_spec_range(tmp_path):
    rounds = {0: ([44.6, 71.9, 43.8], [43.2, 60.5, 41.8]), 2: ([959.0, 961.0, 960.0], [955.4, 957.8, 956.6])}
    for case, (tracker, spec) in rounds.items():
        for r, (t, s) in enumerate(zip(tracker, spec, strict=True), 1):
            doc = {"run_id": "x", "cases": [{"case_idx": case, "mean_us": t, "median_us": t}]}
            (tmp_path / f"fid_tracker_c{case}_r{r}.json").write_text(json.dumps(doc))
            (tmp_path / f"fid_spec_c{case}_r{r}.json").write_text(json.dumps({"l": {"case_idx": case, "mean_us": s}}))
    (tmp_path / "fid_spec_c2_r4.json").write_text("")  # a job cut off mid-write is left out, not an error
    mod = _module()
    rows = mod.table(mod.read_means(tmp_path)).splitlines()
    assert rows[2] == "| 0 | 44.6 / 71.9 / 43.8 | 44.6 | 43.2 / 60.5 / 41.8 | 41.8..60.5 | yes |"
    assert rows[3].endswith("| 960.0 | 955.4 / 957.8 / 956.6 | 955.4..957.8 | no |")


def _sessions_module():
    spec = importlib.util.spec_from_file_location("fidelity_sessions", ROOT / "validation" / "fidelity_sessions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_session_tables_read_what_tracker_fidelity_wrote_on_the_h200(tmp_path):
    """validation/fidelity_sessions.py on session 26's JSON as `tracker fidelity --json` wrote it, and a session
    cut before it printed anything."""
    mod = _sessions_module()
    runs = ROOT / "validation" / "runs" / "h200-2026-12-03-s26-fidelity-a"
    (tmp_path / "cut.json").write_text("")
    docs = mod._sessions([runs, tmp_path])
    assert [name for name, _ in docs] == ["fused_wy_c1-2", "graphed_c1-2"]
    lines = mod.table(*docs[0])
    assert lines[0].startswith("fused_wy_c1-2: session f915645f9a4d, 5 rounds")
    assert lines[5] == (
        "| batch=40 n=352 cond=1 | 719.3..722.7 | 720.3 | yes | 0.999 (0.996-1.002) | same | "
        "722.7 / 719.3 / 720.1 / 721.0 / 721.1 | 718.7 / 719.2 / 720.3 / 721.4 / 720.4 |"
    )


def test_a_resumed_session_is_paired_by_round_and_pooled_once(tmp_path):
    """Session 26's case-0 session was cut in round 5 (the tracker's run cancelled) and resumed for a sixth: its
    JSON lists hold 6 contest means and 5 tracker means, which pair wrongly in order from round 5 on. The ratios
    come from the runs exported beside it instead (rounds 1-4 and 6), and the pooled table counts the session
    once although two of its documents are in the folder."""
    mod = _sessions_module()
    docs = mod._sessions([ROOT / "validation" / "runs" / "h200-2026-12-03-s26-fidelity-b"])
    assert [name for name, _ in docs] == ["fused_wy_c0", "fused_wy_c0_9ae6fafc1fd9"]
    (case,) = docs[1][1]["cases"]
    contest, tracker = case["contest_means_us"], case["tracker_means_us"]
    assert len(contest) == 6 and len(tracker) == 5
    by_round = [t / c for c, t in zip(contest[:4], tracker[:4], strict=True)] + [tracker[4] / contest[5]]
    assert [round(r, 6) for r in case["ratios"]] == [round(r, 6) for r in by_round]
    pooled = mod.pooled(docs)
    assert pooled[-2].startswith("| fused_wy | batch=20 n=32 cond=1 | 1 | 5 | 0.995 (")
