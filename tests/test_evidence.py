"""Trust in the checker: a kernel's global numeric settings do not reach it, and a failed check keeps its
evidence (the worst matrix's input, H, tau, residuals, repetition), stored with the run, shown by `show` and the
Run page, carried by export/import, and judged again by `recheck` with the reference gates."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT, T0, make_record
from streamlit.testing.v1 import AppTest

from tracker import store as store_mod
from tracker.capture import envinfo
from tracker.capture.evidence import pack, unpack
from tracker.capture.runner import RunRequest, run_variant
from tracker.store import Store
from tracker.store.transfer import export_runs, import_runs
from tracker.workloads.qr_v2 import checks, numerics
from tracker.workloads.qr_v2.inputs import generate
from tracker.workloads.qr_v2.suites import Case

pytestmark = pytest.mark.timeout(300)
VARIANTS = Path(__file__).resolve().parent / "variants"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracker", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def run(tmp_path: Path, variant: str, mode: str, cases=None):
    store = tmp_path / "runs.duckdb"
    req = RunRequest(
        path=str(VARIANTS / variant), suite="smoke", mode=mode, cases=cases, store=str(store), device="cpu"
    )
    outcome = run_variant(req)
    assert outcome.pending is None
    return store, outcome


# ------------------------------------------------------------------------------------------ numeric settings


def _flags_like_a_kernel() -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("medium")
    torch.set_default_dtype(torch.float64)
    torch.use_deterministic_algorithms(True)


@pytest.fixture
def kernel_flags():
    """The process's settings as a TF32-happy kernel leaves them; put back afterwards for the other tests."""
    saved = (torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled())
    with numerics.checker_numerics():  # restores whatever the test sets, on exit
        _flags_like_a_kernel()
        yield
    assert (torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled()) == saved


def test_the_check_forces_full_precision_and_restores_the_kernels_settings(kernel_flags):
    before = numerics.snapshot()
    assert before["legacy"] == [True, True] and before["matmul_precision"] == "medium"
    with numerics.checker_numerics():
        inside = numerics.snapshot()
        assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False
        assert torch.get_float32_matmul_precision() == "highest"
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
        assert torch.backends.mkldnn.matmul.fp32_precision == "ieee"  # was bf16 under "medium"
        assert torch.get_default_dtype() == torch.float32
        assert not torch.are_deterministic_algorithms_enabled()
    assert inside != before
    assert numerics.snapshot() == before  # the kernel sees its own settings again
    assert torch.backends.cuda.matmul.allow_tf32 is True  # and its legacy reads still work


def test_settings_are_restored_when_the_check_raises(kernel_flags):
    before = numerics.snapshot()
    with pytest.raises(ZeroDivisionError), numerics.checker_numerics():
        _ = 1 / 0
    assert numerics.snapshot() == before


@pytest.mark.parametrize("blocked", [True, False])
def test_verdicts_and_residuals_do_not_depend_on_the_kernels_settings(blocked):
    a = generate(Case(3, 40, 2, 77))
    good = torch.geqrf(a.clone())
    bad_h = good[0].clone()
    bad_h[2, 3, 9] += 0.5
    clean = [checks.check_qr(a, out, blocked=blocked) for out in (good, (bad_h, good[1]))]
    saved = (torch.get_default_dtype(), numerics.snapshot())
    with numerics.checker_numerics():
        _flags_like_a_kernel()
        flagged = [checks.check_qr(a, out, blocked=blocked) for out in (good, (bad_h, good[1]))]
        assert torch.get_default_dtype() == torch.float64  # the check gave the kernel's setting back
    assert (torch.get_default_dtype(), numerics.snapshot()) == saved
    assert [r.passed for r in clean] == [r.passed for r in flagged] == [True, False]
    assert [r.residuals for r in clean] == [r.residuals for r in flagged]  # bit for bit
    assert clean[1].message == flagged[1].message


@pytest.mark.parametrize("mode", ["test", "benchmark"])
def test_a_kernel_that_turns_tf32_on_at_import_passes_the_smoke_suite(tmp_path, mode):
    store, outcome = run(tmp_path, "tf32_geqrf.py", mode)
    assert outcome.status == "passed", outcome.record.run.error
    assert len(outcome.record.cases) == (9 if mode == "test" else 4)
    assert all(c["passed"] for c in outcome.record.cases)
    assert Store(store).run_evidence(outcome.run_id).empty


# ------------------------------------------------------------------------------------------------ evidence


def test_a_repetition_that_fails_keeps_its_evidence_shown_and_rechecked(tmp_path):
    store, outcome = run(tmp_path, "wrong_r_later.py", "benchmark", cases=[1])
    assert outcome.status == "failed"
    case = outcome.record.cases[0]
    assert case["message"].startswith("repetition 1: factor gate failed on matrix 1 of input 1")
    ev = Store(store).run_evidence(outcome.run_id).to_dict("records")
    assert len(ev) == 1
    row = ev[0]
    assert (row["case_idx"], row["repetition"], row["input_idx"], row["matrix_idx"], row["n"]) == (1, 1, 1, 1, 48)
    assert row["factor_res"] > checks.FACTOR_TOL and row["orth_res"] < checks.ORTH_TOL
    arrays = unpack(Store(store).evidence_arrays(outcome.run_id, 1))
    assert arrays["a"].shape == arrays["h"].shape == (48, 48) and arrays["tau"].shape == (48,)
    assert arrays["a"].dtype == np.float32
    # the kept input is the case's input 1, matrix 1; H is its factorization with the planted error
    from tracker.workloads.qr_v2.inputs import benchmark_inputs
    from tracker.workloads.qr_v2.suites import SMOKE

    a = benchmark_inputs(SMOKE.benchmarks[1])[1][1]
    assert np.array_equal(arrays["a"], a.numpy())
    h, _ = torch.geqrf(a)
    assert float(arrays["h"][2, 5] - h[2, 5]) == pytest.approx(0.5, abs=1e-5)
    assert arrays["meta"]["repetition"] == 1

    shown = cli("show", outcome.run_id, "--store", str(store))
    assert "evidence case 1: repetition 1, input 1, matrix 1" in shown.stdout
    shown_json = json.loads(cli("show", outcome.run_id, "--store", str(store), "--json").stdout)
    assert shown_json["evidence"][0]["repetition"] == 1

    proc = cli("recheck", outcome.run_id, "--store", str(store))
    assert proc.returncode == 0, proc.stderr
    assert "the kernel's output is wrong" in proc.stdout and "repetition 1" in proc.stdout
    report = json.loads(cli("recheck", outcome.run_id, "--store", str(store), "--json", "--case", "1").stdout)
    entry = report["cases"][0]
    assert entry["reference"]["passed"] is False and entry["reference"]["gate"] == "factor"
    assert entry["reference"]["residuals"]["factor_res"] == pytest.approx(row["factor_res"], rel=0.01)
    assert report["checker_disagreed"] == 0
    assert cli("recheck", outcome.run_id, "--store", str(store), "--case", "0").returncode == 2


def test_a_first_pass_failure_in_test_mode_keeps_evidence_and_travels_with_export(tmp_path):
    store, outcome = run(tmp_path, "wrong_r.py", "test", cases=[0, 2])
    ev = Store(store).run_evidence(outcome.run_id)
    assert ev["case_idx"].tolist() == [0, 2] and ev["repetition"].tolist() == [-1, -1]
    assert ev["matrix_idx"].tolist() == [1, 1] and ev["input_idx"].tolist() == [0, 0]
    out = tmp_path / "export"
    export_runs(store, out, [outcome.run_id])
    other = tmp_path / "other.duckdb"
    assert import_runs(other, out) == 1
    assert Store(other).evidence_arrays(outcome.run_id, 2) == Store(store).evidence_arrays(outcome.run_id, 2)
    assert cli("recheck", outcome.run_id, "--store", str(other)).returncode == 0


def test_a_nan_output_keeps_the_matrix_it_is_in(tmp_path):
    store, outcome = run(tmp_path, "returns_nan.py", "test", cases=[0])
    row = Store(store).run_evidence(outcome.run_id).iloc[0]
    assert row["matrix_idx"] == 0 and row["repetition"] == -1
    report = json.loads(cli("recheck", outcome.run_id, "--store", str(store), "--json").stdout)
    assert report["cases"][0]["conclusion"] == "the kernel's output is wrong"
    assert report["cases"][0]["reference"]["gate"] == "structure"


def _inconsistent_record(run_id: str) -> store_mod.RunRecord:
    """A run recorded as failed whose kept evidence is in fact a correct factorization."""
    rec = make_record(
        run_id, variant="honest", source="# honest\n", path="kernels/honest.py", family=None, started=T0,
        means=None, suite="smoke", gpu="CPU", status="failed", failed_cases=(2,),
    )  # fmt: skip
    a = generate(Case(3, 32, 2, 5))
    h, tau = torch.geqrf(a.clone())
    blob = pack({"a": a[1].numpy(), "h": h[1].numpy(), "tau": tau[1].numpy()})
    rec.evidence = [
        {"case_idx": 2, "repetition": 7, "input_idx": 0, "matrix_idx": 1, "n": 32, "arrays": blob,
         "message": "factor gate failed on matrix 1 (scaled 369.4 > 20)", "factor_res": 369.4, "tril_res": 0.1,
         "recon_res": 0.2, "orth_res": 0.9, "arrays_bytes": len(blob)}
    ]  # fmt: skip
    return rec


def test_recheck_says_the_checker_disagreed_when_the_evidence_passes(tmp_path):
    store = tmp_path / "forced.duckdb"
    assert Store(store).finish_run(_inconsistent_record("forced000001")) is None
    proc = cli("recheck", "forced000001", "--store", str(store))
    assert proc.returncode == 1
    assert "the tracker's checker disagreed" in proc.stdout and "repetition 7" in proc.stdout
    report = json.loads(cli("recheck", "forced000001", "--store", str(store), "--json").stdout)
    assert report["checker_disagreed"] == 1 and report["cases"][0]["reference"]["passed"] is True


def test_evidence_survives_the_pending_side_file(tmp_path):
    rec = _inconsistent_record("side00000001")
    back = store_mod.RunRecord.from_json(rec.to_json())
    assert back.evidence[0]["arrays"] == rec.evidence[0]["arrays"]
    assert np.array_equal(np.load(io.BytesIO(back.evidence[0]["arrays"]))["h"], unpack(rec.evidence[0]["arrays"])["h"])


def test_run_page_shows_the_evidence_with_a_download(tmp_path, monkeypatch):
    store = tmp_path / "page.duckdb"
    rec = _inconsistent_record("page00000001")
    rec.run.finished_at = T0 + timedelta(minutes=1)
    assert Store(store).finish_run(rec) is None
    empty = tmp_path / "no-samples"
    empty.mkdir()
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(empty))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    envinfo.gpu_available.cache_clear()
    import streamlit as st

    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/run.py")
    at.query_params["id"] = "page00000001"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(df.value for df in at.dataframe if "repetition" in df.value.columns)
    assert table["repetition"].tolist() == ["7"] and table["matrix"].tolist() == [1]
    assert table["factor res"].tolist() == [369.4]
    assert any("Evidence of failed checks" in m.value for m in at.markdown)
    buttons = [b for b in at.get("download_button") if "case 2" in b.proto.label]
    assert len(buttons) == 1
