"""Differential test: the tracker's fast checker (checks.py; its GPU path, blocked float64 Q, run here on the CPU,
and its CPU path) gives the same verdicts as the plain implementation of the spec's gates (reference_gates.py)
on adversarial outputs: tau = 0 with garbage below the diagonal, reflectors with huge or tiny entries, tau near
2, zero and rank-deficient columns, NaN/inf, wrong shapes and dtypes, and outputs built to land just inside and
just outside the factor and orthogonality tolerances. Seeded; a few hundred cases in seconds."""

from __future__ import annotations

import math

import pytest
import torch

from tracker.workloads.qr_v2 import checks
from tracker.workloads.qr_v2 import reference_gates as ref
from tracker.workloads.qr_v2.inputs import generate
from tracker.workloads.qr_v2.suites import Case

EPS = ref.EPS32
# "just" inside/outside: 5% of the tolerance; float32 rounding of Q moves residuals by a few units at most
MARGIN = 0.05


def _gate(result: checks.CheckResult) -> str:
    m = result.message
    if result.passed:
        return ""
    if m.startswith("factor gate"):
        return "factor"
    if m.startswith("orthogonality gate"):
        return "orthogonality"
    return "finite" if m.startswith(("Q built", "Q^T A")) else "structure"


def _compare(a, out, label: str) -> ref.ReferenceVerdict:
    want = ref.judge(a, out)
    for blocked in (True, False):
        got = checks.check_qr(a, out, blocked=blocked)
        assert got.passed == want.passed, f"{label} blocked={blocked}: ours {got.message!r} vs reference {want}"
        gate = _gate(got)
        if not (blocked and want.gate == "finite"):  # float32 Q may overflow where the float64 one does not
            assert gate == want.gate, f"{label} blocked={blocked}: {got.message!r} vs {want}"
        if want.gate in ("factor", "orthogonality"):
            assert got.matrix_idx is not None  # the same matrix unless several tie: their residuals agree below
            for key, value in want.residuals.items():  # the worst matrix's residuals agree too
                assert got.worst_residuals[key] == pytest.approx(value, rel=0.02, abs=3.0), (label, key)
        if want.passed:
            for key, value in want.residuals.items():
                assert got.residuals[key] == pytest.approx(value, rel=0.02, abs=3.0), (label, key)
    return want


def _reflectors(gen: torch.Generator, batch: int, n: int, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Valid reflectors (tau = 2 / v^T v, or tau = 0 with anything below the diagonal) of several kinds."""
    h = torch.randn(batch, n, n, generator=gen, dtype=torch.float64)
    mag = {"huge": 1e12, "tiny": 1e-12, "near2": 1e-4, "plain": 1.0, "zero_tau": 1.0}[kind]
    h = h * mag
    below = torch.tril(torch.ones(n, n, dtype=torch.bool), -1)
    v = torch.where(below, h, torch.zeros((), dtype=torch.float64)) + torch.eye(n, dtype=torch.float64)
    tau = 2.0 / (v * v).sum(dim=-2)
    if kind == "zero_tau":
        tau[:, ::2] = 0.0  # identity reflectors whose columns keep garbage below the diagonal
        h = h + 1e6 * torch.randn(batch, n, n, generator=gen, dtype=torch.float64) * below
        v = torch.where(below, h, torch.zeros((), dtype=torch.float64)) + torch.eye(n, dtype=torch.float64)
    return h.float(), tau.float()


def _exact_output(gen, batch, n, kind, rank_deficient=False):
    """A = Q R for chosen reflectors and R: (H, tau) is then a correct answer for A (up to float32 rounding)."""
    h, tau = _reflectors(gen, batch, n, kind)
    r = torch.triu(torch.randn(batch, n, n, generator=gen, dtype=torch.float64))
    if rank_deficient:
        r[:, :, n // 2 :] = torch.triu(r)[:, :, n // 2 :] * torch.tensor(0.0, dtype=torch.float64)
    q = torch.linalg.householder_product(h.double(), tau.double())
    a = (q @ r).float()
    h = torch.tril(h, -1) + torch.triu(r.float())
    return a, (h, tau)


def _bisect(score, target: float, lo: float = 0.0, hi: float = 1.0) -> float:
    """The parameter at which the reference's (monotone) score reaches target."""
    while score(hi) < target:
        hi *= 2
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if score(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


CASES = range(24)


@pytest.mark.parametrize("seed", CASES)
def test_same_verdicts_as_the_reference_on_adversarial_outputs(seed):
    gen = torch.Generator().manual_seed(seed)
    n = [1, 2, 3, 5, 8, 16, 24, 33][seed % 8]
    batch = 1 + seed % 3
    verdicts = []

    # correct factorizations of the workload's hard inputs, and of all-zero matrices
    for case in ("dense", "rankdef", "nearrank", "clustered", "nearcollinear", "band", "rowscale"):
        a = generate(Case(batch, n, seed % 4, 1000 + seed, case))
        verdicts.append(_compare(a, torch.geqrf(a.clone()), f"geqrf {case}"))
    zero = torch.zeros(batch, n, n)
    verdicts.append(_compare(zero, torch.geqrf(zero), "zero matrix"))

    # exact outputs built from chosen reflectors: tau = 0 with garbage, huge / tiny entries, tau near 2
    for kind in ("plain", "zero_tau", "huge", "tiny", "near2"):
        a, out = _exact_output(gen, batch, n, kind, rank_deficient=seed % 2 == 1)
        verdicts.append(_compare(a, out, f"exact {kind}"))
        h, tau = out
        wrong = tau.clone()
        wrong[:, 0] = wrong[:, 0] * 1.5 + 0.1  # a reflector that is no longer orthogonal
        verdicts.append(_compare(a, (h, wrong), f"wrong tau {kind}"))
        garbage = h + torch.tril(torch.randn(h.shape, generator=gen), -1) * 1e3
        verdicts.append(_compare(a, (garbage, tau), f"garbage reflectors {kind}"))

    # non-finite values, wrong shapes and dtypes
    a = generate(Case(batch, n, 1, 2000 + seed))
    h, tau = torch.geqrf(a.clone())
    h_nan, tau_inf = h.clone(), tau.clone()
    h_nan[batch - 1, n - 1, 0] = math.nan
    tau_inf[0, 0] = math.inf
    for bad, label in (
        ((h_nan, tau), "nan"),
        ((h, tau_inf), "inf"),
        ((h.double(), tau), "dtype"),
        ((h, tau[:, :-1]), "shape"),
        ((h,), "1-tuple"),
        ((h * 1e30, tau * 1e30), "overflow"),
    ):
        verdicts.append(_compare(a, bad, label))
    assert any(v.passed for v in verdicts) and any(not v.passed for v in verdicts)


@pytest.mark.parametrize("seed", range(12))
def test_same_verdicts_just_inside_and_just_outside_the_factor_tolerance(seed):
    gen = torch.Generator().manual_seed(100 + seed)
    n, batch = [4, 9, 16, 31][seed % 4], 1 + seed % 3
    a = generate(Case(batch, n, seed % 3, 3000 + seed, ["dense", "rankdef", "clustered"][seed % 3]))
    h, tau = torch.geqrf(a.clone())
    e = torch.triu(torch.randn(h.shape, generator=gen))
    e[: batch - 1] = 0  # only the last matrix is perturbed

    def factor(s: float) -> float:
        return ref.judge(a, (h + s * e, tau)).residuals["factor_res"]

    for side in (1 - MARGIN, 1 + MARGIN):
        s = _bisect(factor, checks.FACTOR_TOL * side)
        want = _compare(a, (h + s * e, tau), f"factor x{side}")
        assert want.passed == (side < 1), want
        assert want.residuals["factor_res"] == pytest.approx(checks.FACTOR_TOL * side, rel=5e-3)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("near_two", [False, True])
def test_same_verdicts_just_inside_and_just_outside_the_orthogonality_tolerance(seed, near_two):
    """The last reflector is v = e_n, so tau_n = t gives Q^T Q - I = ((1 - t)^2 - 1) e e^T (orthogonality off by
    exactly that) while R[n-1, n-1] = 0 keeps Q^T A = R: only the orthogonality gate is near its limit."""
    gen = torch.Generator().manual_seed(200 + seed)
    n, batch = [3, 8, 17, 30][seed % 4], 1 + seed % 2
    h, tau = _reflectors(gen, batch, n, "plain")
    r = torch.triu(torch.randn(batch, n, n, generator=gen, dtype=torch.float64))
    r[:, -1, -1] = 0.0
    h = torch.tril(h, -1) + r.float()
    for side in (1 - MARGIN, 1 + MARGIN):
        c = checks.ORTH_TOL * side * n * EPS  # (1 - t)^2 - 1 = c
        t = (1 + math.sqrt(1 + c)) if near_two else (1 - math.sqrt(1 + c))
        bad = tau.clone()
        bad[-1, -1] = t
        q = torch.linalg.householder_product(h.double(), bad.double())
        a = (q @ r).float()
        want = _compare(a, (h, bad), f"orth x{side} near2={near_two}")
        assert want.passed == (side < 1), want
        assert want.residuals["orth_res"] == pytest.approx(checks.ORTH_TOL * side, abs=2.0)
        assert want.residuals["factor_res"] < checks.FACTOR_TOL / 2
