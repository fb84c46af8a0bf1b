"""Correctness gates of qr_v2 (docs/workload-qr_v2.md): structure, factor gate per matrix, orthogonality of the worst.

Besides pass/fail, every check returns the scaled residuals, so the store shows how much accuracy slack a
variant uses.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tracker.workloads.base import CheckResult
from tracker.workloads.qr_v2.gates import EPS32, FACTOR_TOL, ORTH_TOL
from tracker.workloads.qr_v2.numerics import checker_numerics


def norm1(x: torch.Tensor) -> torch.Tensor:
    """Max absolute column sum of each matrix in a batch."""
    return x.abs().sum(dim=-2).amax(dim=-1)


def _describe(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"tensor{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} on {t.device}"
    return type(t).__name__


def _structure(a: torch.Tensor, output: object) -> tuple[str, int | None]:
    """Gate 1 and the matrix a non-finite value is in (None when the problem is not in one matrix)."""
    if not isinstance(output, (tuple, list)) or len(output) != 2:
        size = len(output) if isinstance(output, (tuple, list)) else None
        what = f"a {type(output).__name__} of length {size}" if size is not None else _describe(output)
        return f"output must be a 2-tuple (H, tau), got {what}", None
    h, tau = output
    batch, n, _ = a.shape
    for name, t, shape in (("H", h, (batch, n, n)), ("tau", tau, (batch, n))):
        if not isinstance(t, torch.Tensor):
            return f"{name} must be a tensor, got {_describe(t)}", None
        if tuple(t.shape) != shape:
            return f"{name} has shape {tuple(t.shape)}, expected {shape}", None
        if t.dtype != torch.float32:
            return f"{name} has dtype {t.dtype}, expected torch.float32", None
        if t.device != a.device:
            return f"{name} is on {t.device}, expected {a.device}", None
    for name, t in (("H", h), ("tau", tau)):  # only once both are well formed, so a blamed matrix can be kept
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            count = int(bad.sum())
            where = int(bad.reshape(batch, -1).any(dim=1).nonzero()[0, 0])
            return f"{name} has {count} non-finite value(s) (NaN or inf), first in matrix {where}", where
    return "", None


WY_PANEL = 128  # H200, scripts/checker_bench.py: 2x4096 179 ms a check at 32, 101 at 64, 79 at 128; small n within 1 ms


def householder_q(h: torch.Tensor, tau: torch.Tensor, blocked: bool | None = None) -> torch.Tensor:
    """Q of a compact Householder factorization.

    Unblocked (the CPU default): torch.linalg.householder_product in float32, exactly as the spec says. On a GPU
    that is one cuSOLVER call per matrix, which made the contest's recheck after every repetition cost more than
    the kernel (hundreds of seconds per run), so there (`blocked`) we build the same product from compact-WY
    blocks (I - V T V^T) with batched matmuls in float64: no float32 rounding for a TF32 or reduced-precision
    setting to change, and the verdicts of the spec's float32 product (tests/test_gates_differential.py).
    Returns float32 (unblocked) or float64 (blocked).
    """
    if not (h.device.type == "cuda" if blocked is None else blocked):
        return torch.linalg.householder_product(h, tau)
    h, tau = h.double(), tau.double()
    batch, n, _ = h.shape
    q = torch.eye(n, dtype=h.dtype, device=h.device).expand(batch, n, n).clone()
    for start in reversed(range(0, n, WY_PANEL)):
        end = min(start + WY_PANEL, n)
        # V: the panel's reflectors from row `start` down (the rows above are zero), unit diagonal.
        rows = torch.arange(n - start, device=h.device)
        v = h[:, start:, start:end] * (rows[:, None] > rows[None, : end - start]).to(h.dtype)
        v[:, rows[: end - start], rows[: end - start]] = 1.0
        # Applied last to first, the panels so far differ from I only in q[end:, end:], and this one touches rows
        # from `start` on: only the trailing block changes (a third of the flops of updating all of q).
        trail = q[:, start:, start:]
        trail -= v @ (_wy_t(v, tau[:, start:end]) @ (v.transpose(-1, -2) @ trail))
    return q


def _wy_t(v: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """T of the panel's compact WY form, H_1 ... H_w = I - V T V^T.

    The usual recurrence (T[:j, j] = -tau_j T[:j, :j] V^T v_j) is w dependent steps, each a few kernel launches:
    thousands of launches per check on a 4096 matrix, and most of a run's wall time when every repetition is
    rechecked. Written as matrices it is T = D - T S D (D = diag(tau), S = the strict upper triangle of V^T V),
    so T (I + S D) = D: one triangular solve with a unit diagonal, which needs no 1/tau (tau may be 0).
    """
    d = torch.diag_embed(tau)
    unit_upper = torch.eye(v.shape[-1], dtype=v.dtype, device=v.device) + torch.triu(v.transpose(-1, -2) @ v, 1) @ d
    return torch.linalg.solve_triangular(unit_upper, d, upper=True, left=False, unitriangular=True)


def check_outputs(
    inputs: list[torch.Tensor], outputs: list[object], *, blocked: bool | None = None, one_pass: bool = False
) -> CheckResult:
    """Check the outputs for several inputs of one shape at once (batched over all matrices, in chunks of
    CHUNK_BYTES unless `one_pass`: the contest's harness checks a batch at once, and the worker's copy of its recheck
    leaves the allocator as that does).

    Runs under `checker_numerics`: nothing the kernel set in this process (TF32, matmul precision, default
    dtype, deterministic mode, current stream) reaches the arithmetic."""
    with checker_numerics(inputs[0].device if inputs else None):
        return _check_outputs(inputs, outputs, blocked, one_pass)


def _check_outputs(
    inputs: list[torch.Tensor], outputs: list[object], blocked: bool | None, one_pass: bool
) -> CheckResult:
    for i, (a, output) in enumerate(zip(inputs, outputs, strict=True)):
        problem, where = _structure(a, output)
        if problem:
            return CheckResult(
                False,
                problem if len(inputs) == 1 else f"input {i}: {problem}",
                input_idx=i if where is not None else None,
                matrix_idx=where,
            )
    if len(inputs) == 1:
        a, (h, tau) = inputs[0], outputs[0]
        return _gates(a, h, tau, lambda k: f"matrix {k}", a.shape[0], blocked, one_pass)
    batch = inputs[0].shape[0]
    return _gates(
        torch.cat(inputs),
        torch.cat([o[0] for o in outputs]),
        torch.cat([o[1] for o in outputs]),
        lambda k: f"matrix {k % batch} of input {k // batch}",
        batch,
        blocked,
        one_pass,
    )


def check_qr(a: torch.Tensor, output: object, *, blocked: bool | None = None, one_pass: bool = False) -> CheckResult:
    """Apply every qr_v2 gate to the output of custom_kernel(a); `a` is the untouched input."""
    return check_outputs([a], [output], blocked=blocked, one_pass=one_pass)


# The gates judge a batch in chunks of at most this many float64 bytes of matrices. At once their working set is
# about 13 float32 copies of the batch (CPU, 160x512): ~8.6 GB for 640x512, beside a kernel that may hold most of the
# GPU (a checker ran out of memory at 640x512 on an H200 of 139.8 GiB, 2026-12-05); in chunks, ~6 copies of a chunk.
# Each matrix's residuals are its own, so chunking changes no verdict (640x512 takes five chunks, 60x1024 two).
# The worker's copy of the harness's recheck stays one pass (check_outputs' one_pass), as the harness is.
CHUNK_BYTES = 256 << 20


def _measure(a: torch.Tensor, h: torch.Tensor, tau: torch.Tensor, blocked: bool | None) -> dict[str, torch.Tensor]:
    """Per matrix of one chunk: whether Q and Q^T A are finite, and the gates' norms (float64)."""
    n = a.shape[-1]
    q = householder_q(h, tau, blocked)
    q_bad = (~torch.isfinite(q)).reshape(q.shape[0], -1).any(dim=1)
    a64, q64, r64 = a.double(), q.double(), torch.triu(h).double()
    del q
    p = q64.transpose(-1, -2) @ a64
    p_bad = (~torch.isfinite(p)).reshape(p.shape[0], -1).any(dim=1)
    eye = torch.eye(n, dtype=torch.float64, device=a.device)
    return {
        "q_bad": q_bad,
        "p_bad": p_bad,
        "a_norm": norm1(a64),
        "factor": norm1(r64 - p),
        "tril": norm1(torch.tril(p, -1)),
        "orth": norm1(q64.transpose(-1, -2) @ q64 - eye),
        "recon": norm1(q64 @ r64 - a64),
    }


def _gates(
    a: torch.Tensor,
    h: torch.Tensor,
    tau: torch.Tensor,
    name: Callable[[int], str],
    per_input: int,
    blocked: bool | None,
    one_pass: bool,
) -> CheckResult:
    batch, n, _ = a.shape

    def fail(message: str, k: int, worst: dict[str, float] | None = None, residuals=None) -> CheckResult:
        return CheckResult(False, message, residuals or {}, k // per_input, k % per_input, worst or {})

    step = batch if one_pass else max(1, CHUNK_BYTES // (8 * n * n))
    chunks = [_measure(a[i : i + step], h[i : i + step], tau[i : i + step], blocked) for i in range(0, batch, step)]
    m = {key: torch.cat([c[key] for c in chunks]) for key in chunks[0]}
    del chunks
    for key, what in (("q_bad", "Q built from (H, tau)"), ("p_bad", "Q^T A")):
        if bool(m[key].any()):
            k = int(m[key].nonzero()[0, 0])
            return fail(f"{what} is not finite ({name(k)})", k)

    factor_scale = EPS32 * n * m["a_norm"].clamp_min(torch.finfo(torch.float64).tiny)
    factor, orth = m["factor"], m["orth"]
    allowed = FACTOR_TOL * factor_scale
    orth_allowed = ORTH_TOL * n * EPS32

    per_matrix = {
        "factor_res": factor / factor_scale,
        "tril_res": m["tril"] / factor_scale,
        "recon_res": m["recon"] / factor_scale,
        "orth_res": orth / (n * EPS32),
    }
    residuals = {k: float(v.max()) for k, v in per_matrix.items()}
    ratio = factor / allowed
    worst = int(ratio.argmax())
    if float(ratio[worst]) > 1.0:
        return fail(
            f"factor gate failed on {name(worst)}: ||R - Q^T A||_1 = {float(factor[worst]):.3e} > allowed "
            f"{float(allowed[worst]):.3e} (scaled {float(factor[worst] / factor_scale[worst]):.1f} > {FACTOR_TOL:g})",
            worst,
            {k: float(v[worst]) for k, v in per_matrix.items()},
            residuals,
        )
    worst = int(orth.argmax())
    if float(orth[worst]) > orth_allowed:
        return fail(
            f"orthogonality gate failed on {name(worst)}: ||Q^T Q - I||_1 = {float(orth[worst]):.3e} > allowed "
            f"{orth_allowed:.3e} (scaled {float(orth[worst]) / (n * EPS32):.1f} > {ORTH_TOL:g})",
            worst,
            {k: float(v[worst]) for k, v in per_matrix.items()},
            residuals,
        )
    return CheckResult(True, "", residuals)
