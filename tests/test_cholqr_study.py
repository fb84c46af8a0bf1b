"""scripts/cholqr_leaf_study.py, issue 23's CholeskyQR2 leaf: its (H, tau) is a Householder QR of the panel as the
checker reads one (torch's householder_product), ill-conditioned panels say so and fall back, the Triton leaf (in
the interpreter) agrees with the PyTorch one, and the study's gates run end to end."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# The study imports Triton, which reads TRITON_INTERPRET once, at its first import in this process: the same
# setting as test_kernels_smoke's, whichever of the two pytest imports first (else their kernels cannot run).
os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import cholqr_leaf_study as study  # noqa: E402


@pytest.mark.parametrize(("b", "m", "k"), [(3, 64, 32), (2, 200, 32), (4, 48, 16)])
def test_the_leaf_is_a_householder_qr_of_its_panel(b, m, k):
    torch.manual_seed(m + k)
    p = torch.randn(b, m, k, dtype=torch.float64)  # float64: the identities themselves, not float32 rounding
    h, y, t, ok = study.torch_leaf(p)
    assert ok.all()
    assert torch.equal(torch.tril(y[:, :k], -1), torch.tril(h[:, :k], -1)) and torch.equal(y[:, k:], h[:, k:])
    assert torch.allclose(torch.diagonal(y, dim1=-2, dim2=-1), torch.ones(b, k, dtype=p.dtype))
    assert torch.equal(t, torch.triu(t))
    q = torch.linalg.householder_product(h, torch.diagonal(t, dim1=-2, dim2=-1))  # what the checker builds
    assert torch.allclose(q @ torch.triu(h[:, :k]), p, atol=1e-10)
    assert torch.allclose(q.mT @ q, torch.eye(k, dtype=p.dtype).expand(b, k, k), atol=1e-12)
    full = torch.eye(m, dtype=p.dtype) - y @ t @ y.mT  # T is the compact WY factor of those reflectors
    assert torch.allclose(full[:, :, :k], q, atol=1e-12)


def test_a_rank_deficient_panel_says_it_did_not_hold_and_the_blocked_qr_falls_back():
    torch.manual_seed(1)
    p = torch.randn(2, 64, 32)
    p[1, :, 5] = p[1, :, 3]  # two equal columns: the Gram is singular
    *_, ok = study.torch_leaf(p)
    assert ok.tolist() == [True, False]
    a = torch.randn(2, 64, 64)
    a[0, :, 40] = a[0, :, 39]
    h, tau, fell, total = study.blocked_qr(a)
    assert (fell, total) == (1, 4)
    q = torch.linalg.householder_product(h, tau)
    assert torch.allclose(q @ torch.triu(h), a, atol=1e-4)


def _interpreted(code: str) -> dict:
    """The JSON that `code` prints last, run in a process of its own with Triton's interpreter on (Triton reads the
    setting once per process)."""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_triton_leaf_matches_the_torch_leaf_in_the_interpreter():
    """The five Triton kernels, run by Triton's interpreter on the CPU: the same verdicts per matrix, and for the
    matrix whose panel held the same H, Y and T (the other one is not used: the blocked QR falls back for it)."""
    pytest.importorskip("triton")
    code = (
        "import json, sys, torch; sys.path.insert(0, 'scripts'); import cholqr_leaf_study as s\n"
        "torch.manual_seed(0); p = torch.randn(2, 150, 32); p[1, :, 7] = p[1, :, 2]\n"
        "a, b = s.triton_leaf(p, 64), s.torch_leaf(p)\n"
        "print(json.dumps({'ok': [a[3].tolist(), b[3].tolist()], "
        "'diff': max(float((x[0] - y[0]).abs().max()) for x, y in zip(a[:3], b[:3]))}))"
    )
    doc = _interpreted(code)
    assert doc["ok"] == [[True, False], [True, False]]
    assert doc["diff"] < 1e-4


def test_the_study_runs_the_gates_and_counts_fallbacks(tmp_path):
    out = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, "scripts/cholqr_leaf_study.py", "--suite", "tests", "--cases", "0,7", "--device", "cpu",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {r["case"]: r for r in json.loads(out.read_text())}
    assert rows[0]["passed"] and rows[7]["passed"] and "rankdef" in rows[7]["spec"]
    assert rows[7]["fallback_panels"] > 0 and rows[7]["panels"] == 16 * 512 // study.family()._CHOLQR_NB
    assert rows[7]["factor_res"] < 20 and rows[7]["geqrf_factor_res"] is not None


def test_bad_requests_are_usage_errors_not_tracebacks():
    def run(*args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        return subprocess.run([sys.executable, "scripts/cholqr_leaf_study.py", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    bad = run("--cases", "5,x", "--device", "cpu")
    assert bad.returncode == 2 and "--cases 5,x" in bad.stderr and "Traceback" not in bad.stderr
    bad = run("--leaf", "triton", "--device", "cpu")
    said = "TRITON_INTERPRET=1" if importlib.util.find_spec("triton") else "Triton is not installed"
    assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr
    if not torch.cuda.is_available():
        bad = run("--time-leaf", "kernels/fused_wy.py")
        assert bad.returncode == 2 and "needs a GPU" in bad.stderr and "Traceback" not in bad.stderr


def test_every_leaf_the_gpu_probe_times_runs_and_factors_its_panel():
    """--time-leaf's contenders, called as the probe calls them (in Triton's interpreter here, without the CUDA
    graph): each factors the panel, so a broken probe shows here rather than in a device call."""
    pytest.importorskip("triton")
    code = (
        "import json, sys, torch; sys.path.insert(0, 'scripts'); import cholqr_leaf_study as s\n"
        "fam = s.family(); torch.manual_seed(3); src = torch.randn(2, 32, fam._CHOLQR_NB); p = torch.empty_like(src)\n"
        "leaves, tau = s.leaf_contenders(fam, p); out = {}\n"
        "for name, leaf in leaves.items():\n"
        "    p.copy_(src); leaf()\n"
        "    q = torch.linalg.householder_product(p, tau)\n"
        "    out[name] = float((q @ torch.triu(p[:, : p.shape[2]]) - src).abs().max())\n"
        # the probe's loop, its CUDA-graph timer replaced by one that runs each step once and fails the second
        "calls = []\n"
        "def timer(step, reps):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 2: raise RuntimeError('out of resources')\n"
        "    step(); return 1.0\n"
        "print(json.dumps({'errors': out, 'timed': s._time_shape(fam, 2, 32, 1, device='cpu', timer=timer)}))"
    )
    doc = _interpreted(code)
    errors, timed = doc["errors"], doc["timed"]
    assert len(errors) == 11 and any(name.startswith("tile QR") for name in errors)
    for name, err in errors.items():
        if not name.startswith("tile QR"):  # the narrower leaves without their updates are no QR of the panel
            assert err < 1e-4, f"{name}: |QR - P| = {err}"
    # a contender that fails costs its own row only
    assert list(timed) == list(errors) and list(timed.values()).count(1.0) == 10
    assert list(timed.values())[1] == "RuntimeError: out of resources"
