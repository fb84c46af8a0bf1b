"""The spec's gates written the plain way (qr_v2_spec.md, "Correctness gates"), one matrix at a time.

This is the yardstick for the tracker's fast batched checker (checks.py): the differential test compares their
verdicts, and `python -m tracker recheck` judges recorded evidence with it. Slow on a GPU by design; keep it
simple rather than fast, and independent of checks.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from tracker.workloads.qr_v2.gates import EPS32, FACTOR_TOL, ORTH_TOL
from tracker.workloads.qr_v2.numerics import checker_numerics


@dataclass
class ReferenceVerdict:
    passed: bool
    gate: str  # "" when passed; "structure", "finite", "factor" or "orthogonality"
    message: str = ""
    matrix: int | None = None  # the worst matrix (or the first one at fault)
    residuals: dict[str, float] = field(default_factory=dict)  # of the worst matrix of the failing gate, scaled


def _norm1(m: torch.Tensor) -> float:
    """Max absolute column sum of one matrix, float64."""
    return float(torch.linalg.matrix_norm(m.double(), ord=1))


def judge(a: torch.Tensor, output: object) -> ReferenceVerdict:
    """Every gate of the spec on custom_kernel(a)'s output; `a` is the untouched float32 input (batch, n, n)."""
    with checker_numerics(a.device):
        return _judge(a, output)


def _judge(a: torch.Tensor, output: object) -> ReferenceVerdict:
    # 1. structure
    if not isinstance(output, tuple | list) or len(output) != 2:
        return ReferenceVerdict(False, "structure", "output is not a 2-tuple")
    h, tau = output
    batch, n, _ = a.shape
    for name, t, shape in (("H", h, (batch, n, n)), ("tau", tau, (batch, n))):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != torch.float32:
            return ReferenceVerdict(False, "structure", f"{name} is not a float32 tensor of shape {shape}")
        if t.device != a.device:
            return ReferenceVerdict(False, "structure", f"{name} is on the wrong device")
        if not bool(torch.isfinite(t).all()):
            k = next(i for i in range(batch) if not bool(torch.isfinite(t[i]).all()))
            return ReferenceVerdict(False, "structure", f"{name} is not finite", k)

    # 2. Q from the reflectors, in float32; R = triu(H)
    q = torch.linalg.householder_product(h, tau)
    r = torch.triu(h)
    for k in range(batch):
        if not bool(torch.isfinite(q[k]).all()):
            return ReferenceVerdict(False, "finite", f"Q of matrix {k} is not finite", k)

    # 3-5. per matrix, in float64
    eye = torch.eye(n, dtype=torch.float64, device=a.device)
    rows = []
    for k in range(batch):
        ak, qk, rk = a[k].double(), q[k].double(), r[k].double()
        p = qk.T @ ak
        if not bool(torch.isfinite(p).all()):
            return ReferenceVerdict(False, "finite", f"Q^T A of matrix {k} is not finite", k)
        scale = EPS32 * n * max(_norm1(ak), torch.finfo(torch.float64).tiny)
        rows.append(
            {
                "factor_res": _norm1(rk - p) / scale,
                "tril_res": _norm1(torch.tril(p, -1)) / scale,
                "recon_res": _norm1(qk @ rk - ak) / scale,
                "orth_res": _norm1(qk.T @ qk - eye) / (EPS32 * n),
            }
        )
    worst = max(range(batch), key=lambda k: rows[k]["factor_res"])
    if rows[worst]["factor_res"] > FACTOR_TOL:
        message = f"factor gate: matrix {worst} scaled {rows[worst]['factor_res']:.1f} > {FACTOR_TOL:g}"
        return ReferenceVerdict(False, "factor", message, worst, rows[worst])
    worst = max(range(batch), key=lambda k: rows[k]["orth_res"])
    if rows[worst]["orth_res"] > ORTH_TOL:
        message = f"orthogonality gate: matrix {worst} scaled {rows[worst]['orth_res']:.1f} > {ORTH_TOL:g}"
        return ReferenceVerdict(False, "orthogonality", message, worst, rows[worst])
    return ReferenceVerdict(True, "", "", worst, {key: max(row[key] for row in rows) for key in rows[0]})
