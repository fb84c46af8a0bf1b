"""The qr_v2 correctness gates: torch.geqrf passes every smoke case; each kind of wrong output is rejected with a
message that says what is wrong; the blocked compact-WY Q (float64) equals torch.linalg.householder_product."""

from __future__ import annotations

import pytest
import torch

from tracker.workloads.qr_v2 import checks
from tracker.workloads.qr_v2.inputs import benchmark_inputs, generate
from tracker.workloads.qr_v2.suites import QR_V2, SMOKE, Case

RESIDUALS = {"factor_res", "tril_res", "recon_res", "orth_res"}


def _qr(case: Case) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    a = generate(case)
    return a, torch.geqrf(a.clone())


@pytest.fixture(scope="module")
def dense():
    """4 matrices 24x24 and their correct factorization."""
    return _qr(Case(4, 24, 1, 2024))


@pytest.mark.parametrize("case", SMOKE.tests + (QR_V2.tests[0],), ids=lambda c: c.spec)
def test_geqrf_passes_every_smoke_test_case(case):
    a, out = _qr(case)
    result = checks.check_qr(a, out)
    assert result.passed, result.message
    assert result.message == ""
    assert set(result.residuals) == RESIDUALS
    assert result.residuals["factor_res"] <= checks.FACTOR_TOL
    assert result.residuals["orth_res"] <= checks.ORTH_TOL
    assert all(v >= 0 for v in result.residuals.values())


@pytest.mark.parametrize("case", SMOKE.benchmarks, ids=lambda c: c.spec)
def test_geqrf_passes_every_smoke_benchmark_case_over_all_its_inputs(case):
    xs = benchmark_inputs(case)
    result = checks.check_outputs(xs, [torch.geqrf(x.clone()) for x in xs])
    assert result.passed, result.message
    assert set(result.residuals) == RESIDUALS


def test_residuals_are_scaled_by_eps_n_norm(dense):
    a, (h, tau) = dense
    res = checks.check_qr(a, (h, tau)).residuals
    n = a.shape[-1]
    q = torch.linalg.householder_product(h, tau).double()
    a64, r = a.double(), torch.triu(h).double()
    scale = checks.EPS32 * n * checks.norm1(a64)
    assert res["recon_res"] == pytest.approx(float((checks.norm1(q @ r - a64) / scale).max()), rel=1e-6)
    eye = torch.eye(n, dtype=torch.float64)
    assert res["orth_res"] == pytest.approx(float(checks.norm1(q.mT @ q - eye).max() / (n * checks.EPS32)), rel=1e-6)
    # norm1 is the max absolute column sum
    m = torch.tensor([[[1.0, -2.0], [3.0, 4.0]]])
    assert checks.norm1(m).tolist() == [6.0]


def _rejected(a, out) -> str:
    result = checks.check_qr(a, out)
    assert not result.passed
    assert result.message
    return result.message


def test_wrong_tau_is_rejected_naming_the_matrix(dense):
    a, (h, tau) = dense
    bad = tau.clone()
    bad[1, 3] *= 0.5
    msg = _rejected(a, (h, bad))
    assert "gate failed on matrix 1" in msg
    assert "allowed" in msg and "scaled" in msg


def test_one_corrupted_reflector_is_rejected_naming_the_matrix(dense):
    a, (h, tau) = dense
    bad = h.clone()
    bad[2, 10, 4] += 0.25  # an entry below the diagonal: part of the 5th Householder vector of matrix 2
    msg = _rejected(a, (bad, tau))
    assert msg.startswith("factor gate failed on matrix 2")
    assert "||R - Q^T A||_1" in msg and "> allowed" in msg


def test_a_nan_is_rejected_as_non_finite(dense):
    a, (h, tau) = dense
    bad = h.clone()
    bad[3, 5, 7] = float("nan")
    msg = _rejected(a, (bad, tau))
    assert "H has 1 non-finite value(s)" in msg and "matrix 3" in msg
    bad_tau = tau.clone()
    bad_tau[0, 0] = float("inf")
    assert "tau has 1 non-finite" in _rejected(a, (h, bad_tau))


def test_wrong_shapes_are_rejected(dense):
    a, (h, tau) = dense
    assert "H has shape (4, 23, 24), expected (4, 24, 24)" in _rejected(a, (h[:, :-1], tau))
    assert "tau has shape (4, 23), expected (4, 24)" in _rejected(a, (h, tau[:, :-1]))
    assert "H has shape (24, 24)" in _rejected(a, (h[0], tau))


def test_wrong_dtype_is_rejected(dense):
    a, (h, tau) = dense
    assert "H has dtype torch.float64, expected torch.float32" in _rejected(a, (h.double(), tau))
    assert "tau has dtype torch.float16" in _rejected(a, (h, tau.half()))


def test_output_on_another_device_is_rejected(dense):
    a, (h, tau) = dense
    assert "H is on meta, expected cpu" in _rejected(a, (h.to("meta"), tau))


def test_not_a_two_tuple_is_rejected(dense):
    a, (h, tau) = dense
    msg = _rejected(a, (h, tau, tau))
    assert "2-tuple" in msg and "length 3" in msg
    assert "2-tuple" in _rejected(a, h)
    assert "got NoneType" in _rejected(a, None)
    assert "H must be a tensor" in _rejected(a, ("H", tau))


def test_r_with_flipped_row_signs_without_q_is_rejected(dense):
    a, (h, tau) = dense
    bad = h.clone()
    bad[0, 6, 6:] = -bad[0, 6, 6:]  # row 6 of R (its part of H, on and right of the diagonal), Q untouched
    msg = _rejected(a, (bad, tau))
    assert msg.startswith("factor gate failed on matrix 0")
    # flipping the signs of R's rows together with Q's columns is a valid QR and passes: shown on a 2x2
    a2 = torch.tensor([[[3.0, 1.0], [4.0, 2.0]]])
    h2, tau2 = torch.geqrf(a2)
    q = torch.linalg.householder_product(h2, tau2)
    assert torch.allclose(q @ torch.triu(h2), a2, atol=1e-5)


def test_orthogonality_gate_catches_a_q_that_is_not_orthogonal():
    # n = 1: Q = 1 - tau. With tau = 0.5 and R = Q^T A the factor gate holds exactly, Q^T Q = 0.25 does not.
    a = torch.tensor([[[2.0]], [[-3.0]], [[5.0]]])
    h, tau = torch.geqrf(a)
    h, tau = h.clone(), tau.clone()
    tau[2, 0] = 0.5
    h[2, 0, 0] = 0.5 * a[2, 0, 0]
    result = checks.check_qr(a, (h, tau))
    assert not result.passed
    assert result.message.startswith("orthogonality gate failed on matrix 2")
    assert result.residuals["factor_res"] <= checks.FACTOR_TOL
    assert result.residuals["orth_res"] > checks.ORTH_TOL


def test_check_outputs_names_the_input_of_several():
    case = Case(3, 16, 1, 55, inputs=3)
    xs = benchmark_inputs(case)
    outs = [torch.geqrf(x.clone()) for x in xs]
    assert checks.check_outputs(xs, outs).passed
    h, tau = outs[2]
    h = h.clone()
    h[1, 8, 2] -= 0.5
    msg = checks.check_outputs(xs, [outs[0], outs[1], (h, tau)]).message
    assert msg.startswith("factor gate failed on matrix 1 of input 2")
    msg = checks.check_outputs(xs, [outs[0], (outs[1][0][:, :-1], outs[1][1]), outs[2]]).message
    assert msg.startswith("input 1: H has shape")


@pytest.mark.parametrize("n", [1, 5, 33, 100, 127, 128, 129, 300])  # one panel, and several (WY_PANEL 128)
def test_blocked_wy_q_equals_householder_product(n):
    a = generate(Case(3, n, 1, 300 + n))
    h, tau = torch.geqrf(a)
    tau = tau.clone()
    tau[0, :: max(1, n // 4)] = 0.0  # some reflectors are the identity
    tau[1, -1] = 0.0
    expected = torch.linalg.householder_product(h, tau)
    blocked = checks.householder_q(h, tau, blocked=True)
    assert blocked.shape == expected.shape and blocked.dtype == torch.float64  # the GPU path computes in float64
    assert torch.allclose(blocked.float(), expected, atol=1e-5, rtol=0), float((blocked - expected).abs().max())
    exact = torch.linalg.householder_product(h.double(), tau.double())
    assert torch.allclose(blocked, exact, atol=1e-12, rtol=0), float((blocked - exact).abs().max())
    assert torch.equal(checks.householder_q(h, tau, blocked=False), expected)
    assert torch.equal(checks.householder_q(h, tau), expected)  # on the CPU the library call is used


def test_blocked_wy_q_with_all_tau_zero_is_the_identity():
    h = torch.randn(2, 40, 40)
    q = checks.householder_q(h, torch.zeros(2, 40), blocked=True)
    assert torch.equal(q, torch.eye(40, dtype=torch.float64).expand(2, 40, 40))


def test_the_harness_recheck_checks_each_output_on_its_own_with_the_spec_product(monkeypatch):
    """The timing process repeats the contest's recheck (one output at a time, the float32 product), not the
    checker's batched one: what it leaves in that process is part of what the contest times."""
    from tracker.workloads import get_workload

    workload = get_workload("qr_v2")
    xs = [generate(Case(3, 20, 1, seed)) for seed in (1, 2, 3)]
    outs = [torch.geqrf(x.clone()) for x in xs]
    real, batches = torch.linalg.householder_product, []

    def counted(h, tau):
        batches.append(h.shape[0])
        return real(h, tau)

    monkeypatch.setattr(torch.linalg, "householder_product", counted)
    workload.harness_recheck(xs, outs)
    assert batches == [3, 3, 3]
    batches.clear()
    workload.check_outputs(xs, outs)  # the checker's: all outputs in one pass
    assert batches == [9]
    batches.clear()
    wrong = (outs[0][0], outs[0][1] * 2)
    workload.harness_recheck(xs, [wrong, outs[1], outs[2]])  # the harness stops at the first failure
    assert batches == [3]
    # With the batch larger than a chunk the checker goes a chunk at a time, the harness's recheck still at once.
    monkeypatch.setattr(checks, "CHUNK_BYTES", 2 * 8 * 20 * 20)
    batches.clear()
    workload.check_outputs(xs, outs)
    assert batches == [2, 2, 2, 2, 1]
    batches.clear()
    workload.harness_recheck(xs, outs)
    assert batches == [3, 3, 3]


@pytest.mark.parametrize("blocked", [False, True])
def test_a_batch_judged_in_chunks_gets_the_verdicts_of_one_pass(monkeypatch, blocked):
    """The gates judge a large batch a chunk at a time (a 640x512 batch at once took ~12 GiB beside the kernel):
    every verdict, message, blamed matrix and residual is the one-pass one, failures in a later chunk included."""
    a = generate(Case(11, 24, 1, 909))
    h, tau = torch.geqrf(a.clone())
    wrong_r, wrong_q, inf_q, inf_p = h.clone(), tau.clone(), tau.clone(), a.clone()
    wrong_r[9, 5, 7] += 0.25  # R off in matrix 9 (the third chunk of four)
    wrong_q[6, 3] = 1.9  # Q not orthogonal... and R no longer its factor: the factor gate speaks first
    inf_q[10, 0] = float("inf")  # Q from H, tau not finite in the last chunk only
    inf_p[7, 2, 2] = float("inf")  # Q fine, Q^T A not finite (A itself is not checked for finiteness)
    outputs = [(h, tau), (wrong_r, tau), (h, wrong_q), (h, inf_q), (h, tau)]
    inputs = [a, a, a, a, inf_p]

    def judged(chunk_matrices: int | None, one_pass: bool = False) -> list[tuple]:
        if chunk_matrices is not None:
            monkeypatch.setattr(checks, "CHUNK_BYTES", chunk_matrices * 8 * 24 * 24)
        results = [
            checks.check_outputs([x], [o], blocked=blocked, one_pass=one_pass)
            for x, o in zip(inputs, outputs, strict=True)
        ]
        return [(r.passed, r.message, r.matrix_idx, r.residuals, r.worst_residuals) for r in results]

    whole = judged(None)
    assert [w[0] for w in whole] == [True, False, False, False, False]
    assert [w[2] for w in whole[1:]] == [9, 6, 10, 7]
    assert judged(2, one_pass=True) == whole  # the harness's recheck in the worker: the batch at once
    for size in (1, 3, 4):
        chunked = judged(size)
        for one, other in zip(whole, chunked, strict=True):
            assert one[:3] == other[:3]
            for mine, theirs in ((one[3], other[3]), (one[4], other[4])):
                assert set(mine) == set(theirs)
                for key in mine:
                    assert theirs[key] == pytest.approx(mine[key], rel=1e-9), key
