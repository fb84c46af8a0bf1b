"""Results cannot be forged from inside the kernel's process by the obvious routes, and known reward hacks in a
variant's source are flagged, stored with the run and shown beside its verdict (one hostile kernel per flag)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import leftover_run_folders
from tracker.capture.sandbox import RUNS_ROOT_NAME
from tracker.store import Store
from tracker.variants.scan import FLAGS, scan_source

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = Path(__file__).resolve().parent / "variants"
HOSTILE = {
    "hack_tracker_import.py": "tracker-internals",
    "hack_sys_modules.py": "sys-modules",
    "hack_introspection.py": "introspection",
    "hack_timer_patch.py": "timer-patch",
    "hack_identity_cache.py": "identity-cache",
    "hack_side_stream.py": "side-stream",
    "hack_torch_patch.py": "torch-patch",
    "spawns_children.py": "process-spawn",
}


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracker", *args], cwd=ROOT, capture_output=True, text=True, timeout=150, env=env
    )


@pytest.mark.parametrize("variant,code", sorted(HOSTILE.items()))
def test_each_hostile_kernel_gets_its_flag(variant, code):
    flags = scan_source((VARIANTS / variant).read_text())
    assert code in {f.code for f in flags}, flags
    assert all(f.line > 0 and f.message for f in flags)


def test_every_flag_code_has_a_hostile_kernel():
    assert set(HOSTILE.values()) == {c for c in FLAGS if c != "forged-events"}


def test_our_kernels_and_plain_variants_raise_no_hack_flag():
    for path in [*sorted((ROOT / "kernels").glob("*.py")), VARIANTS / "contest_print.py", VARIANTS / "raises.py"]:
        flags = [f for f in scan_source(path.read_text()) if f.severity == "hack"]
        assert flags == [], (path.name, flags)


def test_the_scan_reads_code_not_text():
    source = '''
"""We never call time.perf_counter = 0 or data_ptr() here; torch.cuda.Stream is mentioned in a docstring."""
import torch  # sys.modules and gc.get_objects are only words in a comment
x = "import tracker"
def custom_kernel(data):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = torch.geqrf(data)
    torch.cuda.current_stream().wait_stream(s)
    return out
'''
    assert scan_source(source) == []
    patched = "import time\nfrom time import perf_counter\nimport torch.cuda as tc\ntime.time = None\ntc.Event = 1\n"
    assert [(f.code, f.line) for f in scan_source(patched)] == [("timer-patch", 4), ("timer-patch", 5)]
    assert [f.code for f in scan_source("d = {}\ndef k(x):\n    return d.setdefault(id(x), x)\n")] == ["identity-cache"]


def test_flags_are_stored_with_the_run_and_shown_by_run_and_show(tmp_path):
    store = tmp_path / "s.duckdb"
    variant = VARIANTS / "hack_timer_patch.py"
    proc = cli("run", str(variant), "--suite", "smoke", "--mode", "test", "--cases", "0", "--store", str(store))
    assert "flag: timer-patch (line 7)" in proc.stdout, proc.stdout + proc.stderr
    run_id = Store(store).list_runs()["run_id"][0]
    stored = json.loads(Store(store).get_run(run_id)["flags"])
    assert [(f["code"], f["line"]) for f in stored] == [("timer-patch", 7), ("timer-patch", 8), ("timer-patch", 9)]
    shown = json.loads(cli("show", run_id, "--store", str(store), "--json").stdout)
    assert [f["code"] for f in shown["flags"]] == ["timer-patch"] * 3
    text = cli("show", run_id, "--store", str(store)).stdout
    assert "flags" in text and "timer-patch@7" in text


def test_a_kernel_that_writes_passed_events_cannot_forge_a_pass(tmp_path):
    """The old attack (append `passed` events to the events file named in the job file or environment) and the
    new one (write them into every open fd, signed with a guessed key) both fail; the run is judged on what the
    kernel really returned, and the rejected lines are reported."""
    store = tmp_path / "s.duckdb"
    private = tmp_path / "tmp"  # the forger writes into every kernelbeam-* folder it finds: only ours, not others'
    private.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(TMPDIR=str(private), KERNELBEAM_LOCK_DIR=str(tmp_path / "locks"))
    proc = cli("run", str(VARIANTS / "forges_events.py"), "--suite", "smoke", "--cases", "0", "--store", str(store),
               "--json", "--quiet", env=env)  # fmt: skip
    summary = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert summary["status"] == "failed" and summary["geomean_us"] is None and summary["gpu"] == "CPU"
    (case,) = summary["cases"]
    # Its writes into every fd reach the worker's socket to the checker too: the handoff breaks, and that is the
    # kernel's failure (never a pass, never a crash of ours).
    assert not case["passed"] and case["mean_us"] is None
    assert "factor gate failed" in case["message"] or "broke the handoff" in summary["error"], summary["error"]
    forged = [f for f in summary["flags"] if f["code"] == "forged-events"]
    assert forged and "failed authentication" in forged[0]["message"]
    row = Store(store).get_run(summary["run_id"])
    assert row["status"] == "failed" and "KB-FORGER tried" in row["log_tail"]
    assert Store(store).case_results(summary["run_id"])["passed"].tolist() == [False]
    assert [p.name for p in private.iterdir()] in ([], [RUNS_ROOT_NAME]) and leftover_run_folders(private) == []


def test_flags_show_beside_the_verdict_on_the_run_page_and_in_the_experiments_table(demo_store):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import T0, make_record
    from tracker.variants.scan import flags_as_dicts

    path, _ = demo_store
    source = (VARIANTS / "hack_identity_cache.py").read_text()
    rec = make_record("flagged0aaaa", variant="hack_identity_cache", source=source, path="kernels/hack.py",
                      family="hacks", started=T0.replace(day=3), means=[20.0] * 12, seed=3)  # fmt: skip
    rec.run.flags = json.dumps(flags_as_dicts(scan_source(source)))
    assert Store(path).finish_run(rec) is None
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/run.py")
    at.query_params["id"] = "flagged0aaaa"
    at.run()
    assert not at.exception
    assert any("Flag **identity\\-cache** (line 9)" in w.value for w in at.warning), [w.value for w in at.warning]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    table = next(df.value for df in at.dataframe if "flags" in df.value.columns)
    row = table[table["variant"] == "hack_identity_cache"].iloc[0]
    assert row["flags"] == "⚠ identity-cache"
    assert set(table[table["variant"] != "hack_identity_cache"]["flags"]) <= {"", None}
