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


def test_the_session_tables_read_what_tracker_fidelity_wrote_on_the_h200(tmp_path):
    """validation/fidelity_sessions.py on session 26's JSON as `tracker fidelity --json` wrote it, and a session
    cut before it printed anything."""
    spec = importlib.util.spec_from_file_location("fidelity_sessions", ROOT / "validation" / "fidelity_sessions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    runs = ROOT / "validation" / "runs" / "h200-2026-12-03-s26-fidelity-a"
    (tmp_path / "cut.json").write_text("")
    docs = mod._sessions([runs, tmp_path])
    assert [name for name, _ in docs] == ["fused_wy_c1-2", "graphed_c1-2"]
    lines = mod.table(*docs[0])
    assert lines[0].startswith("fused_wy_c1-2: session f915645f9a4d, 5 rounds")
    assert lines[5] == (
        "| batch=40 n=352 cond=1 | 719.3..722.7 | 720.3 | yes | 722.7 / 719.3 / 720.1 / 721.0 / 721.1 | "
        "718.7 / 719.2 / 720.3 / 721.4 / 720.4 |"
    )
