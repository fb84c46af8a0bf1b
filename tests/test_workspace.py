"""A workspace as an agent loop keeps it: one folder per variant in a git repository, made here. It goes through
`add` (git history, lineage), `variants`, `run --pending` (smoke suite on the CPU), `since` and the dashboard's
leaderboard, lineage and since pages."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.capture.runner import RunRequest, cannot_run_here
from tracker.variants.naming import unique_names, variant_name
from tracker.variants.register import parent_line

# One worker takes the whole module, so the `workspace` fixture's runs are made once, not once per xdist worker.
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("workspace_runs")]
ROOT = Path(__file__).resolve().parent.parent

BASE = '''"""Baseline: torch.geqrf."""
import torch


def custom_kernel(data):
    return torch.geqrf(data)
'''
BASE_V2 = BASE.replace("Baseline: torch.geqrf.", "Baseline: torch.geqrf, contiguous input.").replace(
    "torch.geqrf(data)", "torch.geqrf(data.contiguous())"
)
CHILD = '''"""Clone before factoring.

Parent: v01_base
"""
import torch


def custom_kernel(data):
    return torch.geqrf(data.clone())
'''
CUDA_EXT = '''"""Builds a CUDA extension -- *fast*."""
import torch
from torch.utils.cpp_extension import load_inline


def custom_kernel(data):
    return torch.geqrf(data.cuda())
'''


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "HOME": str(repo), "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracker", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**__import__("os").environ, "KERNELBEAM_NO_GPU": "1"},
    )


def cli_json(*args: str):
    proc = cli(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def make_workspace(root: Path) -> Path:
    """3 commits: v01_base; v01_base changed + v02_clone (Parent line); v03_cuda (a CUDA extension)."""
    repo = root / "ws"
    sol = repo / "solutions"
    (sol / "v01_base").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (sol / "v01_base" / "submission.py").write_text(BASE)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "v01: baseline")
    (sol / "v01_base" / "submission.py").write_text(BASE_V2)
    (sol / "v02_clone").mkdir()
    (sol / "v02_clone" / "submission.py").write_text(CHILD)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "v02: clone the input")
    (sol / "v03_cuda").mkdir()
    (sol / "v03_cuda" / "submission.py").write_text(CUDA_EXT)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "v03: CUDA extension")
    return repo


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ws")
    repo = make_workspace(folder)
    store = str(folder / "ws.duckdb")
    added = cli_json("add", str(repo / "solutions"), "--family", "beam", "--store", store)
    again = cli_json("add", str(repo / "solutions"), "--family", "beam", "--store", store)
    ran = cli_json("run", "--pending", "--suite", "smoke", "--cases", "0", "--device", "cpu", "--store", store)
    return {"repo": repo, "store": store, "added": added, "again": again, "ran": ran}


def test_names_from_paths():
    assert variant_name("solutions/v43_cholqr/submission.py") == "v43_cholqr"
    assert variant_name("kernels/graphed.py") == "graphed"
    assert unique_names(["a/v1/submission.py", "b/v1/submission.py", "kernels/x.py"]) == {
        "a/v1/submission.py": "a/v1",
        "b/v1/submission.py": "b/v1",
        "kernels/x.py": "x",
    }
    assert parent_line(CHILD) == "v01_base"
    assert parent_line(BASE) is None


def test_static_check_marks_cuda_variants(tmp_path):
    req = RunRequest(path="x.py", device="cpu")
    assert "needs CUDA" in cannot_run_here(CUDA_EXT, req)
    assert cannot_run_here(BASE, req) is None


def test_add_registers_every_version_with_lineage(workspace):
    added = workspace["added"]
    assert len(added) == 4 and all(r["added"] for r in added)  # v01 twice (two commits), v02, v03
    assert not any(r["added"] for r in workspace["again"])  # the same content adds nothing
    by = {(r["variant"], r["message"]): r for r in added}
    v01a, v01b = by[("v01_base", "v01: baseline")], by[("v01_base", "v02: clone the input")]
    v02 = by[("v02_clone", "v02: clone the input")]
    assert v01a["parent"] is None and v01b["parent"] == v01a["sha256"]  # the previous version of the same file
    assert v02["parent"] == v01b["sha256"]  # `Parent: v01_base` names the latest v01_base
    assert all(len(r["commit"]) == 40 and r["committed_at"] for r in added)
    listed = cli_json("variants", "--family", "beam", "--store", workspace["store"])
    assert [v["variant"] for v in listed] == ["v01_base", "v01_base", "v02_clone", "v03_cuda"]
    assert {v["path"] for v in listed} == {
        "solutions/v01_base/submission.py",
        "solutions/v02_clone/submission.py",
        "solutions/v03_cuda/submission.py",
    }
    assert set(listed[0]) == {
        "variant",
        "path",
        "sha256",
        "commit",
        "parent",
        "parent_variant",
        "family",
        "runs",
        "best_geomean_us",
        "aliases",
        "suite",  # the context of best_geomean_us (one suite and GPU: geomeans of others are not comparable)
        "gpu",
        "problem",
    }
    assert all(v["runs"] == 1 for v in listed)  # run --pending ran each once


def test_run_pending_runs_snapshots_and_skips_cuda(workspace):
    ran = {(r["variant"], r["run_id"]): r for r in workspace["ran"]}
    statuses = sorted((v, r["status"]) for (v, _), r in ran.items())
    assert statuses == [
        ("v01_base", "passed"),
        ("v01_base", "passed"),
        ("v02_clone", "passed"),
        ("v03_cuda", "skipped"),
    ]
    skipped = next(r for r in workspace["ran"] if r["status"] == "skipped")
    assert "needs CUDA" in skipped["error"]
    # Nothing is pending any more in this context.
    again = cli_json(
        "run", "--pending", "--suite", "smoke", "--cases", "0", "--device", "cpu", "--store", workspace["store"]
    )
    assert again == []
    runs = cli_json("list", "--store", workspace["store"])
    assert {r["path"] for r in runs} == {"solutions/v01_base/submission.py", "solutions/v02_clone/submission.py",
                                         "solutions/v03_cuda/submission.py"}  # fmt: skip


def test_since_reports_runs_bests_and_failures(workspace):
    out = cli_json("since", "2h", "--store", workspace["store"])
    assert set(out) == {"runs", "new_bests", "regressions", "failures", "verdicts", "dead_ends", "closer_to_gate"}
    assert len(out["runs"]) == 4
    assert out["failures"] == []  # skipped is not a failure
    cases = {b["case"] for b in out["new_bests"]}
    assert len(cases) == 1  # --cases 0: one case, its best is new; no geomean for a subset run
    assert cli_json("since", "2030-01-01T00:00:00", "--store", workspace["store"])["runs"] == []


def test_run_folder_and_glob(workspace, tmp_path):
    store = str(tmp_path / "f.duckdb")
    out = cli_json("run", str(workspace["repo"] / "solutions"), "--suite", "smoke", "--cases", "0", "--device", "cpu",
                   "--store", store)  # fmt: skip
    assert sorted((r["variant"], r["status"]) for r in out) == [
        ("v01_base", "passed"), ("v02_clone", "passed"), ("v03_cuda", "skipped")]  # fmt: skip


def _open(monkeypatch, tmp_path, store: str, page: str, **params: str):
    import streamlit as st

    from tests.conftest import open_page

    empty = tmp_path / "no-samples"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(empty))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    monkeypatch.setenv("KERNELBEAM_STORE", store)
    st.cache_data.clear()
    return open_page(page, **params)


def test_leaderboard_page(workspace, monkeypatch, tmp_path):
    at = _open(monkeypatch, tmp_path, workspace["store"], "pages/leaderboard.py")
    frames = [df.value for df in at.dataframe]
    assert frames, "the leaderboard shows a table"
    board = frames[0]
    # Data frames from a Styler come back as the underlying frame.
    board = getattr(board, "data", board)
    # v01_base was run in two versions (the skipped one has no result): the older source reads v01_base@sha8
    names = sorted(board["variant"])
    assert names[0] == "v01_base" and names[2] == "v02_clone", names
    assert re.fullmatch(r"v01_base@[0-9a-f]{8}", names[1]), names
    assert set(board["path"]) == {"solutions/v01_base/submission.py", "solutions/v02_clone/submission.py"}
    case_cols = [c for c in board.columns if " c" in c and "x" in c]
    assert len(case_cols) == 1 and board[case_cols[0]].notna().all()


def test_lineage_and_since_pages(workspace, monkeypatch, tmp_path):
    at = _open(monkeypatch, tmp_path, workspace["store"], "pages/lineage.py", family="beam", suite="smoke")
    tree = at.dataframe[0].value
    names = [v.strip() for v in tree["variant"]]
    # the two versions of v01_base read apart, as on the Leaderboard: the older one (the root) as v01_base@sha8
    assert re.fullmatch(r"v01_base@[0-9a-f]{8}", names[0]) and "└─ v01_base" in names and "└─ v02_clone" in names
    assert tree["vs parent"].str.startswith("compare?a=").sum() == 2  # both children link to their parent's run
    at = _open(monkeypatch, tmp_path, workspace["store"], "pages/since.py", since="2h")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Runs"] == "4" and metrics["Failures"] == "0"


def _stream(cases, *, mean_ns) -> str:
    lines = [f"benchmark-count: {len(cases)}"]
    for i, c in enumerate(cases):
        lines += [f"benchmark.{i}.spec: batch: {c.batch}; n: {c.n}; cond: {c.cond:g}; seed: {c.seed}; case: {c.case}",
                  f"benchmark.{i}.runs: 100", f"benchmark.{i}.mean: {mean_ns(i)}", f"benchmark.{i}.std: 50.0",
                  f"benchmark.{i}.err: 5.0", f"benchmark.{i}.best: {mean_ns(i) - 100}",
                  f"benchmark.{i}.worst: {mean_ns(i) + 900}"]  # fmt: skip
    return "\n".join(["some harness chatter", *lines, "check: pass"]) + "\n"


def test_import_results_stream(workspace, tmp_path):
    import math

    from tracker.workloads.qr_v2.suites import QR_V2

    store = str(tmp_path / "imp.duckdb")
    variant = workspace["repo"] / "solutions" / "v02_clone" / "submission.py"
    log = tmp_path / "b200.log"
    log.write_text(_stream(QR_V2.benchmarks, mean_ns=lambda i: 1e6 * (i + 1)))
    out = cli_json("import-results", str(log), "--variant", str(variant), "--gpu", "NVIDIA B200", "--store", store)
    assert out["status"] == "passed" and out["gpu"] == "NVIDIA B200" and out["mode"] == "leaderboard"
    assert out["variant"] == "v02_clone" and out["cases"] == 12
    expected = math.exp(sum(math.log(1000.0 * (i + 1)) for i in range(12)) / 12)  # ns -> µs
    assert out["geomean_us"] == pytest.approx(expected)
    shown = cli_json("show", out["run_id"], "--store", store)
    first = shown["cases"][0]
    assert first["mean_us"] == pytest.approx(1000.0) and first["best_us"] == pytest.approx(999.9)
    # The run moves with export and import (its trigger, `import`, had made every import of the folder refuse it).
    assert cli("export", "--out", str(tmp_path / "moved"), "--store", store).returncode == 0
    assert cli("import", str(tmp_path / "moved"), "--store", str(tmp_path / "moved.duckdb")).returncode == 0
    # A stream is data: twelve made-up shapes make no geomean; a time no device reaches, NaN or a negative one, or
    # one case twice, is refused in one line.
    made_up = [dataclasses.replace(c, batch=i + 1, n=2) for i, c in enumerate(QR_V2.benchmarks)]
    log.write_text(_stream(made_up, mean_ns=lambda i: 1000.0))
    out = cli_json("import-results", str(log), "--variant", str(variant), "--gpu", "NVIDIA B200", "--store", store)
    assert out["status"] == "passed" and out["geomean_us"] is None
    for mean, why in ((lambda i: 200.0, "less than its work takes"), (lambda i: float("nan"), "not a finite number"),
                      (lambda i: -5.0, "not a finite number")):  # fmt: skip
        log.write_text(_stream(QR_V2.benchmarks, mean_ns=mean))
        proc = cli("import-results", str(log), "--variant", str(variant), "--gpu", "x", "--store", store)
        assert proc.returncode == 2 and why in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    log.write_text(_stream([QR_V2.benchmarks[0]] * 2, mean_ns=lambda i: 1e6))
    proc = cli("import-results", str(log), "--variant", str(variant), "--gpu", "x", "--store", store)
    assert proc.returncode == 2 and "falls on the case of an earlier one" in proc.stderr, proc.stderr
    # A stream whose test failed is recorded as a failed test-mode run with the harness's message.
    bad = tmp_path / "tests.log"
    bad.write_text("test.0.spec: batch: 2; n: 8; cond: 1; seed: 5; case: dense\ntest.0.status: pass\n"
                   "test.1.spec: batch: 2; n: 16; cond: 1; seed: 6; case: dense\ntest.1.status: fail\n"
                   "test.1.error: mismatch found! output differs from reference\ncheck: fail\n")  # fmt: skip
    out = cli_json("import-results", str(bad), "--variant", str(variant), "--gpu", "NVIDIA B200", "--mode", "test",
                   "--store", store)  # fmt: skip
    assert out["status"] == "failed" and "1 case(s) failed" in out["error"]
    assert cli("import-results", str(tmp_path / "none.log"), "--variant", str(variant), "--gpu", "x",
               "--store", store).returncode == 2  # fmt: skip


def test_history_case_missing_from_a_run_is_not_a_failure():
    import pandas as pd

    from tracker.analysis.series import history_points

    runs = pd.DataFrame({"run_id": ["r1", "r2"], "status": ["passed", "passed"]})
    cases = pd.DataFrame({"run_id": ["r1", "r1", "r2"], "label": ["a", "b", "a"], "case_idx": [0, 1, 0],
                          "passed": [True, True, True], "mean_us": [1.0, 2.0, 1.1]})  # fmt: skip
    samples = pd.DataFrame({"run_id": [], "case_idx": [], "samples": []})
    points = history_points({"runs": runs, "cases": cases, "samples": samples})
    assert [p.status for p in points["b"]] == ["passed", "absent"]  # r2 ran only case a (--cases 0)
    assert [p.status for p in points["a"]] == ["passed", "passed"]


def test_same_folder_name_in_two_places_gets_told_apart(tmp_path):
    store = str(tmp_path / "names.duckdb")
    for top in ("a", "b"):
        (tmp_path / top / "v1").mkdir(parents=True)
        (tmp_path / top / "v1" / "submission.py").write_text(BASE.replace("Baseline", f"Baseline {top}"))
    first = cli_json("add", str(tmp_path / "a"), "--store", store)
    second = cli_json("add", str(tmp_path / "b" / "v1" / "submission.py"), "--store", store)
    assert first[0]["variant"] == "v1" and second[0]["variant"] == "b/v1"


def test_add_of_a_copy_under_a_new_name_says_so_and_records_the_family(tmp_path):
    """Issue 21: an unchanged copy is the same variant (content), so `add` says which name it is known by,
    records the family the variant lacked and the copy's name for it (tests/test_variant_names.py) instead of
    reporting "0 added" and dropping both."""
    store = str(tmp_path / "copy.duckdb")
    (tmp_path / "orig.py").write_text(BASE)
    (tmp_path / "copy.py").write_text(BASE)
    assert cli_json("add", str(tmp_path / "orig.py"), "--store", store)[0]["added"] is True
    (row,) = cli_json("add", str(tmp_path / "copy.py"), "--family", "beam", "--store", store)
    assert row["added"] is False and row["known_as"] == "orig" and row["family"] == "beam" and row["name_added"]
    (listed,) = cli_json("variants", "--store", store)
    assert listed["variant"] == "orig" and listed["family"] == "beam"
    shown = cli("add", str(tmp_path / "copy.py"), "--family", "other", "--store", store)
    assert "the same content as registered variant orig (family beam)" in shown.stdout  # a family is not replaced
