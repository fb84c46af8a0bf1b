"""The GPU's state per case (issue 19, item 5): NVML readings by the runner, their aggregation over a case's timed
loop, the stored columns and their import rules, and the warnings of Compare and Regressions.

No GPU here: the sampler is exercised with NVML really absent; aggregation and warnings with real stored values
written through the tracker's write path and read back through the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tests.conftest import BASE_US, T0, kernel_source, make_record
from tracker.capture import gpustate
from tracker.capture.evidence import FIRST_PASS, FRESH_PASS
from tracker.capture.runner import RunRequest, judge
from tracker.store import Store
from tracker.store.schema import GPU_STATE_COLUMNS
from tracker.store.validate import InvalidImport, check_record

ROOT = Path(__file__).resolve().parent.parent
STEADY = {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "power_w": 420.0, "temp_c": 55.0}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracker", *args], cwd=ROOT, capture_output=True, text=True)


def state(sm: float = 1980.0, throttle: str = "", samples: int = 40) -> dict:
    """Stored GPU-state columns of one case: a steady device at `sm` MHz."""
    row = {"gpu_samples": samples, "throttle": throttle}
    for q, v in {**STEADY, "sm_mhz": sm}.items():
        row.update({f"{q}_min": v * 0.99, f"{q}_median": v, f"{q}_max": v * 1.01})
    return row


def test_without_nvml_the_sampler_says_why_and_reads_nothing():
    sampler = gpustate.Sampler("0").start()
    try:
        if sampler.unavailable is None:  # a machine with a GPU: then it must actually read the device
            time.sleep(0.2)
            assert sampler.readings and sampler.readings[-1].sm_mhz > 0
            return
        assert "nvidia-ml-py" in sampler.unavailable or "NVML" in sampler.unavailable
        time.sleep(0.1)
        assert sampler.readings == []
    finally:
        sampler.stop()
    sampler.stop()  # twice is harmless: the runner stops it on every path out


def test_a_case_gets_min_median_max_and_the_throttle_reasons_of_its_timed_loop_only():
    r = gpustate.Reading
    readings = [
        r(9.0, 345.0, 3201.0, 80.0, 40.0, 0x1),  # idle before the loop: outside the window
        r(10.1, 1980.0, 3201.0, 400.0, 50.0, 0),
        r(10.2, 1755.0, 3201.0, 700.0, 52.0, 0x4),  # held at the power cap
        r(10.3, 1980.0, 3201.0, 410.0, 51.0, 0),
        r(11.5, 345.0, 1593.0, 70.0, 45.0, 0x20),  # after the loop: outside
    ]
    verdicts = [
        {"rep": FIRST_PASS, "received_s": 9.9, "check_s": 0.1},  # the loop starts once the first pass is judged
        {"rep": 0, "received_s": 10.15},
        {"rep": 1, "received_s": 10.35},
    ]
    window = gpustate.timed_window(verdicts)
    assert window == pytest.approx((10.0, 10.35))
    row = gpustate.case_state(readings, window)
    assert set(row) == set(GPU_STATE_COLUMNS)
    assert row["gpu_samples"] == 3
    assert (row["sm_mhz_min"], row["sm_mhz_median"], row["sm_mhz_max"]) == (1755.0, 1980.0, 1980.0)
    assert (row["power_w_min"], row["power_w_median"], row["power_w_max"]) == (400.0, 410.0, 700.0)
    assert row["throttle"] == "sw-power-cap"
    assert gpustate.case_state(readings[:1] + readings[-1:], window) == {}  # nothing read inside: left empty
    assert gpustate.timed_window(verdicts[:1]) is None  # test mode: no timed loop
    assert gpustate.throttle_names(0x1 | 0x40) == ["idle", "hw-thermal"]


def test_the_workers_word_for_the_gpu_state_is_dropped():
    """A forged case_done with clocks of its own: the columns come only from the runner's readings."""
    req = RunRequest(path=str(ROOT / "kernels/geqrf_reference.py"), suite="smoke", cases=[0], device="cpu")
    forged = {"event": "case_done", "case_idx": 0, "passed": True, "samples": [5.0, 5.0], **state(sm=2500.0)}
    verdicts = [
        {"event": "verdict", "case_idx": 0, "rep": rep, "passed": True, "message": "", "received_s": 1.0 + rep}
        for rep in (FIRST_PASS, FRESH_PASS, 0, 1)
    ]
    judge([forged], verdicts, req)
    assert forged["passed"] and not any(c in forged for c in GPU_STATE_COLUMNS)
    readings = [gpustate.Reading(1.0 + k / 10, 1410.0, 2619.0, 300.0, 48.0, 0) for k in range(5, 20)]
    judge([forged], verdicts, req, readings)
    assert forged["sm_mhz_median"] == 1410.0 and forged["throttle"] == ""


def _record(run_id: str, started, means, states: dict[int, dict], family: str = "fam"):
    record = make_record(
        run_id, variant="v", source=kernel_source("v", 1), path="kernels/v.py", family=family, started=started,
        means=means,
    )  # fmt: skip
    for case in record.cases:
        case.update(states.get(case["case_idx"], state()))
    return record


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """A real store: an A/A pair in one clock state, a pair whose B ran throttled and slower clocked on case 3,
    and a history whose regression on case 3 came with a lower clock."""
    path = tmp_path_factory.mktemp("gpustate") / "runs.duckdb"
    slow = list(BASE_US)
    slow[3] *= 1.5
    records = [
        _record("same00000001", T0, BASE_US, {}, family="pair"),
        _record("same00000002", T0 + timedelta(minutes=3), BASE_US, {2: state(throttle="idle")}, family="pair"),
        _record("hot000000001", T0 + timedelta(minutes=6), BASE_US, {3: state(1410.0, "sw-power-cap,sw-thermal")},
                family="pair"),
    ]  # fmt: skip
    for k in range(8):  # history: 4 runs, then 4 runs 1.5x slower on case 3 that ran at a lower SM clock
        after = k >= 4
        records.append(
            _record(f"hist0000000{k}", T0 + timedelta(hours=1, minutes=3 * k), slow if after else BASE_US,
                    {3: state(1500.0)} if after else {})
        )  # fmt: skip
    for record in records:
        assert Store(path).finish_run(record) is None
    return path


def test_compare_warns_where_the_sides_ran_in_different_gpu_states(stored):
    same = cli("compare", "same00000001", "same00000002", "--store", str(stored), "--json")
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["gpu_state"] == []  # an idle reason is a state, not a slowdown
    hot = cli("compare", "same00000001", "hot000000001", "--store", str(stored), "--json")
    notes = json.loads(hot.stdout)["gpu_state"]
    assert len(notes) == 1 and notes[0]["case"].startswith("640x512")
    assert "B throttled (sw-power-cap, sw-thermal)" in notes[0]["note"]
    assert "SM clock 1,980 vs 1,410 MHz" in notes[0]["note"]
    text = cli("compare", "same00000001", "hot000000001", "--store", str(stored))
    assert "warning: GPU state on 640x512" in text.stderr


def test_both_sides_throttled_alike_is_said_once_not_as_a_difference(stored):
    """A run against itself read "A throttled (sw-power-cap); B throttled (sw-power-cap)" under "different
    states"; the same reasons on both sides are one note, and the same run is said to be one."""
    from tracker.analysis.gpustate import state_note

    hot = {"throttle": "sw-power-cap", "sm_mhz_median": 1980.0}
    assert state_note(hot, hot) == "both throttled (sw-power-cap)"
    assert state_note(hot, {"throttle": "none", "sm_mhz_median": 1980.0}) == "A throttled (sw-power-cap)"
    self = cli("compare", "hot000000001", "hot000000001", "--store", str(stored))
    assert self.returncode == 0 and "A and B are the same run" in self.stderr
    assert "both throttled (sw-power-cap, sw-thermal)" in self.stderr and "A throttled" not in self.stderr


def test_regressions_name_a_change_point_whose_sides_ran_at_different_clocks(stored):
    proc = cli("regressions", "--family", "fam", "--store", str(stored), "--json")
    assert proc.returncode == 0, proc.stderr
    (found,) = json.loads(proc.stdout)
    assert found["run_id"] == "hist00000004" and "SM clock 1,980 vs 1,500 MHz" in found["gpu_state"]


def test_the_run_page_table_shows_the_state_beside_the_timings(stored):
    from pages.ui.tables import run_case_table

    table = run_case_table(Store(stored).run_bundle("hot000000001")["cases"])
    cols = list(table.columns)
    assert cols.index("SM MHz") == cols.index("runs") + 1 and "throttle" in cols
    row = table.iloc[3]
    assert row["SM MHz"] == "1,410 (1,396-1,424)" and row["throttle"] == "sw-power-cap,sw-thermal"
    assert table.iloc[0]["throttle"] == "none"


def test_exports_keep_the_state_and_imports_check_it(stored, tmp_path):
    out = tmp_path / "export"
    assert cli("export", "--out", str(out), "hot000000001", "--store", str(stored)).returncode == 0
    home = tmp_path / "home.duckdb"
    proc = cli("import", str(out), "--store", str(home))
    assert proc.returncode == 0, proc.stderr
    states = Store(home).gpu_states(["hot000000001"])
    assert states.iloc[3]["throttle"] == "sw-power-cap,sw-thermal" and states.iloc[3]["sm_mhz_median"] == 1410.0
    bad = _record("badstate0001", T0, BASE_US, {0: state(throttle="turbo")})
    with pytest.raises(InvalidImport, match="throttle"):
        check_record(bad, "side.json")
    bad = _record("badstate0002", T0, BASE_US, {0: {**state(), "sm_mhz_min": -5.0}})
    with pytest.raises(InvalidImport, match="sm_mhz_min"):
        check_record(bad, "side.json")


def test_the_compare_and_regressions_pages_warn(stored, monkeypatch, tmp_path):
    import streamlit as st

    from tests.conftest import open_page

    monkeypatch.setenv("KERNELBEAM_STORE", str(stored))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(tmp_path / "own.duckdb"))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    st.cache_data.clear()
    at = open_page("pages/compare.py", a="same00000001", b="hot000000001")
    warned = [w.value for w in at.warning if "the code, may explain" in w.value]
    assert warned and "sw\\-power\\-cap" in warned[0] and "640x512" in warned[0]
    at = open_page("pages/compare.py", a="same00000001", b="same00000002")
    assert not [w.value for w in at.warning if "the code, may explain" in w.value]
    at = open_page("pages/regressions.py", family="fam")
    warned = [w.value for w in at.warning if "the code, may explain" in w.value]
    assert warned and "hist00000004" in warned[0] and "1,500" in warned[0]
