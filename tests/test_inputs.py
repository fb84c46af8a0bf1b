"""Suites and inputs: the qr_v2 tables of the spec, the smoke suite, and each case's recipe and defining property.

`spec_generate` below is an independent transcription of the input recipe in docs/workload-qr_v2.md, draw for
draw; the tracker's generator must match it bit for bit on the CPU (on a GPU the same draws give the contest's
inputs).
"""

from __future__ import annotations

import math

import pytest
import torch

from tracker.common.vocabulary import RUN_MODES
from tracker.workloads.qr_v2 import inputs
from tracker.workloads.qr_v2.suites import QR_V2, SMOKE, SUITES, Case, cases_for, get_suite, hidden_seed

EPS32 = 1.1920929e-07
F32 = torch.float32

# ------------------------------------------------------------------------------------ the spec, transcribed

SPEC_TESTS = """
20x32 c1 53124; 40x176 c1 3321; 40x352 c1 1200; 16x512 c2 32523; 4x1024 c2 4327; 1x4096 c1 75342;
16x512 c4 32524; 16x512 c0 32525 rankdef; 16x512 c0 32526 clustered; 16x512 c0 32527 band;
16x512 c0 32528 rowscale; 16x512 c0 32529 nearcollinear; 4x1024 c4 4328; 4x1024 c0 4329 rankdef;
4x1024 c0 4330 nearrank; 4x1024 c0 4331 clustered; 2x2048 c2 224466; 2x2048 c0 224467 rankdef;
1x4096 c0 75343 upper; 16x512 c2 32530 mixed; 4x1024 c2 4332 mixed; 2x2048 c2 224468 mixed
"""
# (batch, n, cond, seed, case, inputs per repetition): the spec's benchmark table.
SPEC_BENCHMARKS = [
    (20, 32, 1, 43214, "dense", 50),
    (40, 176, 1, 423011, "dense", 50),
    (40, 352, 1, 123456, "dense", 13),
    (640, 512, 2, 1029, "dense", 1),
    (60, 1024, 2, 75342, "dense", 1),
    (8, 2048, 1, 224466, "dense", 2),
    (2, 4096, 1, 32412, "dense", 2),
    (640, 512, 2, 770001, "mixed", 1),
    (60, 1024, 2, 770002, "mixed", 1),
    (640, 512, 0, 770003, "rankdef", 1),
    (640, 512, 0, 770004, "clustered", 1),
    (60, 1024, 0, 770005, "nearrank", 1),
]


def _spec_tests() -> list[tuple[int, int, float, int, str]]:
    out = []
    for item in SPEC_TESTS.replace("\n", " ").split(";"):
        parts = item.split()
        batch, n = map(int, parts[0].split("x"))
        out.append((batch, n, float(parts[1][1:]), int(parts[2]), parts[3] if len(parts) > 3 else "dense"))
    return out


def _colscale(a, cond):
    if cond > 0:
        return a * torch.logspace(0.0, -cond, a.shape[-1], dtype=F32)
    return a


def _spec_profile(name, a, cond, gen):
    batch, n = a.shape[0], a.shape[-1]
    if name == "dense":
        return _colscale(a, cond)
    if name == "upper":
        a = torch.triu(a)
        a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.25, n, dtype=F32))
        return _colscale(a, cond)
    if name == "rankdef":
        a = a.clone()
        a[:, :, max(1, 3 * n // 4) :] = 0.0
        return _colscale(a, cond)
    if name == "nearrank":
        r = max(1, 3 * n // 4)
        t = n - r
        if t > 0:
            noise = torch.randn((batch, n, t), dtype=F32, generator=gen)
            a = a.clone()
            a[:, :, r:] = a[:, :, :t] + 1e-5 * noise
        return _colscale(a, cond)
    if name == "clustered":
        scales = torch.ones(n, dtype=F32)
        scales[n // 2 :] = 4 * EPS32
        if n >= 8:
            scales[max(0, n // 2 - 2) : min(n, n // 2 + 2)] = torch.sqrt(torch.tensor(EPS32, dtype=F32))
        return a * scales
    if name == "band":
        bw = max(2, min(32, n // 32))
        i = torch.arange(n)
        a = torch.where((i[:, None] - i[None, :]).abs() > bw, torch.zeros((), dtype=F32), a)
        a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.5, n, dtype=F32))
        return _colscale(a, cond)
    if name == "nearcollinear":
        base = torch.randn((batch, n, 1), dtype=F32, generator=gen)
        noise = torch.randn((batch, n, n), dtype=F32, generator=gen)
        return _colscale(base.expand(batch, n, n) + 1e-4 * noise, cond)
    if name == "rowscale":
        return a * torch.logspace(0.0, -max(cond, 4), n, dtype=F32).reshape(1, n, 1)
    raise AssertionError(name)


MIXED_ORDER = ("dense", "rankdef", "nearrank", "clustered", "band", "rowscale", "nearcollinear")


def spec_generate(batch, n, cond, seed, case):
    """Returns (input, per-matrix profile names or None)."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn((batch, n, n), dtype=F32, generator=gen)
    if case != "mixed":
        return _spec_profile(case, a, cond, gen).contiguous(), None
    profile = torch.multinomial(torch.tensor([6.0, 1, 1, 1, 1, 1, 1]), batch, replacement=True, generator=gen)
    if batch >= 2:
        if not bool((profile == 0).any()):
            profile[torch.randint(0, batch, (1,), generator=gen)] = 0
        elif bool((profile == 0).all()):
            pos = torch.randint(0, batch, (1,), generator=gen)
            profile[pos] = torch.randint(1, 7, (1,), generator=gen)
    a = a.clone()
    for index, name in enumerate(MIXED_ORDER):
        mask = profile == index
        if bool(mask.any()):
            a[mask] = _spec_profile(name, a[mask], cond, gen)
    return a.contiguous(), [MIXED_ORDER[int(p)] for p in profile]


def gen(batch, n, cond, seed, case):
    return inputs.generate(Case(batch, n, cond, seed, case))


# --------------------------------------------------------------------------------------------------- suites


def test_qr_v2_tests_are_the_spec_table():
    got = [(c.batch, c.n, c.cond, c.seed, c.case) for c in QR_V2.tests]
    assert len(got) == 22
    assert got == _spec_tests()


def test_qr_v2_benchmarks_and_input_counts_are_the_spec_table():
    got = [(c.batch, c.n, c.cond, c.seed, c.case, c.input_count()) for c in QR_V2.benchmarks]
    assert len(got) == 12
    assert got == SPEC_BENCHMARKS
    assert [c.input_count() for c in QR_V2.benchmarks] == [50, 50, 13, 1, 1, 2, 2, 1, 1, 1, 1, 1]
    # the contest's formula, spelled out once: max(1, min(50, 256 MiB // (batch n^2 4)))
    assert Case(40, 352, 1, 0).input_count() == max(1, min(50, 268435456 // (40 * 352 * 352 * 4))) == 13


def test_modes_pick_tests_or_benchmarks_and_bad_names_are_refused():
    assert cases_for(QR_V2, "test") == QR_V2.tests
    assert cases_for(QR_V2, "benchmark") == cases_for(QR_V2, "leaderboard") == QR_V2.benchmarks
    assert set(RUN_MODES) == {"test", "benchmark", "leaderboard"}
    assert get_suite("smoke") is SMOKE and set(SUITES) >= {"qr_v2", "smoke"}
    with pytest.raises(ValueError, match="unknown suite 'nope'"):
        get_suite("nope")
    with pytest.raises(ValueError, match="unknown mode"):
        cases_for(SMOKE, "fast")


def test_smoke_covers_every_case_type_with_small_shapes():
    used = {c.case for c in SMOKE.tests}
    assert used == set(inputs.PROFILES) - {"diagonal"}  # diagonal is defined but unused, as in the contest
    assert "mixed" in used and "mixed" in {c.case for c in SMOKE.benchmarks}
    for c in SMOKE.tests + SMOKE.benchmarks:
        assert c.n <= 64 and c.batch * c.n * c.n <= 16384, c.spec
    assert all(c.input_count() == 4 for c in SMOKE.benchmarks)


def test_case_spec_and_label():
    c = Case(16, 512, 2, 32530, "mixed")
    assert c.spec == "16x512 c2 s32530 mixed"
    assert c.label == "16x512 c2 mixed"
    assert c.with_seed(7).seed == 7 and c.with_seed(7).label == c.label


# ------------------------------------------------------------------------------------------------- seeds


def test_hidden_seed_formula_with_a_worked_example():
    # a + (a+s)(a+s+1)//2: a=3, s=4 -> 3 + 7*8/2 = 31
    assert hidden_seed(3, 4) == 31
    assert hidden_seed(0, 0) == 0
    assert hidden_seed(53124, 1) == 53124 + 53125 * 53126 // 2 == 1411212499
    assert hidden_seed(1, 2) != hidden_seed(2, 1)  # not symmetric in case seed and run seed


def test_benchmark_inputs_use_seeds_seed_plus_42k():
    case = SMOKE.benchmarks[0]
    got = inputs.benchmark_inputs(case)
    assert len(got) == case.input_count() == 4
    for k, x in enumerate(got, start=1):
        assert torch.equal(x, inputs.generate(case, seed=case.seed + 42 * k))
    assert not torch.equal(got[0], inputs.generate(case))  # the case seed itself is not one of them
    big = QR_V2.benchmarks[2]  # 40x352, 13 inputs
    assert len(inputs.benchmark_inputs(Case(2, 8, 1, big.seed, inputs=big.input_count()))) == 13


def test_same_seed_same_tensor_different_seed_different_tensor():
    for case in ("dense", "mixed", "nearcollinear"):
        a = gen(5, 24, 2, 1234, case)
        assert torch.equal(a, gen(5, 24, 2, 1234, case))
        assert not torch.equal(a, gen(5, 24, 2, 1235, case))
    case = Case(4, 16, 1, 101)
    assert hidden_seed(101, 9) == 101 + 110 * 111 // 2 == 6206
    assert torch.equal(inputs.generate(case, seed=6206), inputs.generate(case.with_seed(6206)))
    assert not torch.equal(inputs.generate(case.with_seed(hidden_seed(101, 9))), inputs.generate(case))


# ------------------------------------------------------------------------------------------------ inputs


@pytest.mark.parametrize("case", sorted(inputs.PROFILES))
def test_generated_input_is_contiguous_float32_batch_n_n(case):
    a = gen(3, 20, 2, 77, case)
    assert a.shape == (3, 20, 20)
    assert a.dtype == torch.float32
    assert a.is_contiguous()
    assert a.device.type == "cpu"
    assert bool(torch.isfinite(a).all())


def test_unknown_case_type_is_refused():
    with pytest.raises(ValueError, match="unknown case type 'wobbly'"):
        gen(2, 8, 1, 1, "wobbly")


@pytest.mark.parametrize(
    "batch,n,cond,seed,case",
    [(c.batch, c.n, c.cond, c.seed, c.case) for c in SMOKE.tests + SMOKE.benchmarks]
    + [
        (3, 40, 3, 5, "upper"),
        (2, 33, 1.5, 6, "nearrank"),
        (2, 7, 0, 8, "clustered"),
        (2, 130, 1, 9, "band"),
        (4, 16, 0, 10, "nearcollinear"),
        (3, 16, 6, 11, "rowscale"),
        (16, 512, 2, 32530, "mixed"),  # a qr_v2 test case
        (1, 9, 2, 12, "mixed"),  # batch 1: no fix-up draws
    ],
)
def test_inputs_follow_the_spec_recipe_draw_for_draw(batch, n, cond, seed, case):
    expected, _ = spec_generate(batch, n, cond, seed, case)
    assert torch.equal(gen(batch, n, cond, seed, case), expected)


def _mixed_seed(batch, n, want):
    """A seed whose raw multinomial draw needs the given fix-up ('none dense', 'all dense', 'some dense')."""
    for seed in range(500):
        g = torch.Generator().manual_seed(seed)
        torch.randn((batch, n, n), generator=g)
        p = torch.multinomial(torch.tensor([6.0, 1, 1, 1, 1, 1, 1]), batch, replacement=True, generator=g)
        kind = "none dense" if not (p == 0).any() else "all dense" if (p == 0).all() else "some dense"
        if kind == want:
            return seed
    raise AssertionError(want)


@pytest.mark.parametrize("want", ["none dense", "all dense", "some dense"])
def test_mixed_fix_up_draws_match_the_spec(want):
    seed = _mixed_seed(3, 16, want)
    expected, profiles = spec_generate(3, 16, 2, seed, "mixed")
    assert torch.equal(gen(3, 16, 2, seed, "mixed"), expected)
    assert "dense" in profiles and any(p != "dense" for p in profiles)


def test_rankdef_columns_r_to_n_are_exactly_zero():
    for n, cond in ((32, 0), (33, 2), (4, 1)):
        a = gen(3, n, cond, 103, "rankdef")
        r = max(1, 3 * n // 4)
        assert bool((a[:, :, r:] == 0).all())
        assert bool((a[:, :, :r] != 0).all())
    assert max(1, 3 * 1 // 4) == 1 and bool((gen(2, 1, 0, 1, "rankdef") != 0).all())  # r >= 1


def test_band_is_zero_outside_the_band():
    for n in (64, 130, 2048 // 16):
        a = gen(2, n, 1, 106, "band")
        bw = max(2, min(32, n // 32))
        i = torch.arange(n)
        outside = (i[:, None] - i[None, :]).abs() > bw
        assert bool((a[:, outside] == 0).all())
        assert bool((a[:, ~outside] != 0).all())
    # the diagonal got linspace(1, 0.5) added before colscale
    base = torch.randn((2, 64, 64), generator=torch.Generator().manual_seed(5))
    a = gen(2, 64, 0, 5, "band")
    assert torch.equal(a.diagonal(dim1=-2, dim2=-1), base.diagonal(dim1=-2, dim2=-1) + torch.linspace(1.0, 0.5, 64))


def _base(batch, n, seed):
    return torch.randn((batch, n, n), dtype=F32, generator=torch.Generator().manual_seed(seed))


def test_clustered_column_scales():
    n = 32
    a, base = gen(3, n, 0, 105, "clustered"), _base(3, n, 105)
    scale = a / base  # exact up to one rounding
    sqrt_eps = math.sqrt(EPS32)
    expect = [1.0] * (n // 2 - 2) + [sqrt_eps] * 4 + [4 * EPS32] * (n // 2 - 2)
    assert torch.allclose(scale, torch.tensor(expect).expand_as(scale), rtol=1e-6, atol=0)
    # cond is ignored (no colscale) and small n has no sqrt(eps) cluster
    assert torch.equal(gen(3, n, 3, 105, "clustered"), a)
    small = gen(1, 6, 0, 4, "clustered") / _base(1, 6, 4)
    assert torch.allclose(small[0, 0], torch.tensor([1, 1, 1, 4 * EPS32, 4 * EPS32, 4 * EPS32]), rtol=1e-6)


def test_rowscale_scales_rows_by_logspace_max_cond_4():
    n = 32
    for cond, top in ((0, 4), (2, 4), (6, 6)):
        a, base = gen(3, n, cond, 107, "rowscale"), _base(3, n, 107)
        scale = torch.logspace(0.0, -top, n).view(1, n, 1)
        assert torch.equal(a, base * scale)
        row_norms = a.norm(dim=-1)
        assert bool((row_norms[:, -1] < row_norms[:, 0] * 10 ** (1 - top)).all())


def test_upper_is_upper_triangular_before_colscale():
    n, cond = 24, 2
    a, base = gen(3, n, cond, 102, "upper"), _base(3, n, 102)
    assert torch.equal(torch.tril(a, -1), torch.zeros_like(a))
    unscaled = torch.triu(base) + torch.diag(torch.linspace(1.0, 0.25, n))
    assert torch.equal(a, unscaled * torch.logspace(0.0, -cond, n))


def test_colscale_multiplies_columns_by_logspace_when_cond_positive():
    n = 16
    for cond in (1, 2.5, 4):
        a, base = gen(2, n, cond, 3, "dense"), _base(2, n, 3)
        assert torch.equal(a, base * torch.logspace(0.0, -cond, n))
        ratio = a[..., -1].norm() / base[..., -1].norm()
        assert ratio == pytest.approx(10**-cond, rel=1e-5)
    assert torch.equal(gen(2, n, 0, 3, "dense"), _base(2, n, 3))


def _cos_to_first(m):
    cols = m / m.norm(dim=0, keepdim=True)
    return (cols[:, :1].T @ cols).abs().squeeze(0)


def test_nearcollinear_columns_are_nearly_parallel():
    a = gen(4, 16, 0, 108, "nearcollinear")
    for m in a:
        assert float(_cos_to_first(m).min()) > 0.999
    dense = gen(4, 16, 0, 108, "dense")
    assert float(_cos_to_first(dense[0])[1:].max()) < 0.99  # a plain random matrix is not


def test_nearrank_trailing_columns_copy_leading_ones_plus_tiny_noise():
    n = 32
    a, base = gen(3, n, 0, 104, "nearrank"), _base(3, n, 104)
    r = 3 * n // 4
    assert torch.equal(a[:, :, :r], base[:, :, :r])
    diff = a[:, :, r:] - base[:, :, : n - r]
    assert 0 < float(diff.abs().max()) < 1e-4


def test_diagonal_case_is_signed_logspace_on_the_diagonal():
    a = gen(2, 8, 1, 9, "diagonal")
    d = a.diagonal(dim1=-2, dim2=-1)
    assert torch.equal(a, torch.diag_embed(d))
    assert torch.equal(d.abs(), torch.logspace(0.0, -2, 8).expand(2, 8))


def _stressed(m: torch.Tensor, cond: float) -> bool:
    """A matrix of the mixed case that is not a plain dense draw: zeros (rankdef, band), tiny columns after
    undoing colscale (clustered), strongly scaled rows (rowscale), or nearly parallel columns (nearrank,
    nearcollinear)."""
    n = m.shape[-1]
    if bool((m == 0).any()):
        return True
    unscaled = m / torch.logspace(0.0, -cond, n) if cond > 0 else m
    cols = unscaled.norm(dim=0)
    rows = m.norm(dim=1)
    if float(cols.min() / cols.max()) < 1e-3 or float(rows.min() / rows.max()) < 1e-3:
        return True
    unit = m / m.norm(dim=0, keepdim=True)
    gram = (unit.T @ unit).abs() - torch.eye(n)
    return float(gram.max()) > 0.999


@pytest.mark.parametrize("batch,n,cond,seed", [(12, 32, 2, 109), (8, 32, 2, 203), (16, 512, 2, 32530)])
def test_mixed_batch_has_a_dense_and_a_stressed_matrix(batch, n, cond, seed):
    a = gen(batch, n, cond, seed, "mixed")
    _, profiles = spec_generate(batch, n, cond, seed, "mixed")
    stressed = [_stressed(m, cond) for m in a]
    assert stressed == [p != "dense" for p in profiles]
    assert any(stressed) and not all(stressed)


def test_mixed_with_two_matrices_always_has_one_dense_and_one_stressed():
    for seed in range(40):
        a = gen(2, 16, 2, seed, "mixed")
        assert sorted(_stressed(m, 2) for m in a) == [False, True], seed
