"""Dead ends: a rejected variant carries its reason and assumption; `add` and `run` of the same code but for
constants, names and formatting warn and name it (unless --force or a new --note); `since`, `lineage` and the
Lineage page list them. Real CPU runs of small PyTorch kernels in a fresh store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import open_url
from tracker.capture import jobs
from tracker.cli.main import main
from tracker.variants.deadends import code_shape

pytestmark = pytest.mark.timeout(120)

A = '''"""Clone, then torch.geqrf."""
import torch

BLOCK = 64


def custom_kernel(data):
    work = data.clone() if BLOCK > 0 else data  # the copy under test
    return torch.geqrf(work)
'''
# A again: other names, constants, docstring, comments and layout.
B = '''import torch
TILE=128
def custom_kernel( inp ):
    """Blocked copy first."""
    tmp = inp.clone() if TILE > 1 else inp
    return torch.geqrf(
        tmp
    )
'''
# Different code: another call.
D = A.replace("torch.geqrf(work)", "torch.geqrf(work.contiguous())")


def test_code_shape_ignores_constants_names_and_layout_not_code():
    assert code_shape(A) == code_shape(B)
    assert code_shape(A) != code_shape(D)
    assert code_shape(A) != code_shape(A.replace("data.clone()", "data.detach()"))  # attributes are code
    assert code_shape("def (:") is None


def _json(capsys, argv: list[str], code: int = 0):
    assert main(argv) == code
    out = capsys.readouterr()
    return json.loads(out.out), out.err


@pytest.mark.timeout(240)
def test_rejected_variant_warns_on_add_and_run_and_is_listed(tmp_path: Path, capsys, monkeypatch):
    store = str(tmp_path / "s.duckdb")
    files = {}
    for name, text in (("a_clone", A), ("b_again", B), ("c_forced", B.replace("128", "256")), ("d_other", D)):
        files[name] = tmp_path / f"{name}.py"
        files[name].write_text(text)
    cpu = ["--suite", "smoke", "--device", "cpu", "--cases", "0", "--quiet", "--json", "--store", store]
    ran, err = _json(capsys, ["run", str(files["a_clone"]), "--family", "fam", "--note", "copy is free", *cpu])
    assert ran["status"] == "passed" and ran["dead_ends"] == [] and "warning" not in err
    rid = ran["run_id"]
    why = ["--reason", "12% slower: the clone", "--assumption", "a copy costs nothing at this size"]
    assert main(["verdict", rid, "rejected", *why, "--store", store]) == 0
    capsys.readouterr()

    rows, err = _json(capsys, ["add", str(files["b_again"]), "--json", "--store", store])
    assert f"is rejected variant a_clone again (run {rid}" in err and "12% slower: the clone" in err
    assert "assumption: a copy costs nothing" in err
    assert [d["run_id"] for d in rows[0]["dead_ends"]] == [rid]
    rows, err = _json(capsys, ["add", str(files["c_forced"]), "--force", "--json", "--store", store])
    assert rows[0]["added"] and rows[0]["dead_ends"] == [] and "warning" not in err
    rows, err = _json(capsys, ["add", str(files["d_other"]), "--json", "--store", store])
    assert rows[0]["dead_ends"] == [] and "warning" not in err

    ran, err = _json(capsys, ["run", str(files["b_again"]), *cpu])
    assert [d["run_id"] for d in ran["dead_ends"]] == [rid] and f"(run {rid}" in err
    ran, err = _json(capsys, ["run", str(files["b_again"]), "--note", "a blocked copy overlaps", *cpu])
    assert ran["dead_ends"] == [] and "warning" not in err  # a new hypothesis acknowledges it
    # a dashboard job of the same file (tracker.capture.job) says it too: in its log and its result
    job = jobs.start_job(store, "b_again.py", kernels_dir=tmp_path, suite="smoke", cases=[0], device="cpu")
    assert jobs.wait(job, timeout=90)["status"] == "passed", jobs.log_tail(job)
    assert [d["run_id"] for d in json.loads(job.result_file.read_text())["dead_ends"]] == [rid]
    assert f"is rejected variant a_clone again (run {rid}" in jobs.log_tail(job)

    since, _ = _json(capsys, ["since", "1d", "--json", "--store", store])
    (dead,) = since["dead_ends"]
    assert (dead["variant"], dead["run_id"]) == ("a_clone", rid)
    assert dead["assumption"] == "a copy costs nothing at this size"
    lineage, _ = _json(capsys, ["lineage", "--family", "fam", "--json", "--store", store])
    assert [d["reason"] for d in lineage["dead_ends"]] == ["12% slower: the clone"]
    # Another problem's tree lists that problem's dead ends only (this one was judged on a qr_v2 run).
    from tracker.store import Store

    assert [d["run_id"] for d in Store(store).dead_ends(problem="qr_v2")] == [rid]
    assert Store(store).dead_ends(problem="vectoradd") == []

    empty = tmp_path / "no-samples"
    empty.mkdir()
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(empty))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    monkeypatch.setenv("KERNELBEAM_STORE", store)
    at = open_url("pages/lineage.py", family="fam", suite="smoke")
    (shown,) = [df.value for df in at.dataframe if "assumption" in df.value.columns]
    assert list(shown["variant"]) == ["a_clone"] and list(shown["assumption"]) == ["a copy costs nothing at this size"]
