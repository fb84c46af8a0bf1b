"""Unit tests for tracker.analysis.stats on synthetic, seeded samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracker.analysis.stats import (
    CaseData,
    HistoryPoint,
    compare_case,
    compare_runs,
    detect_changes,
)


def noisy(mean: float, n: int, rel: float, seed: int) -> np.ndarray:
    return mean * (1 + rel * np.random.default_rng(seed).standard_normal(n))


def history(means, statuses=None) -> list[HistoryPoint]:
    statuses = statuses or ["passed"] * len(means)
    return [
        HistoryPoint(f"r{i}", None if m is None else float(m), status=s)
        for i, (m, s) in enumerate(zip(means, statuses, strict=True))
    ]


# ------------------------------------------------------------------------------------------ compare_case


def test_identical_samples_are_same():
    a = noisy(100, 30, 0.005, 1)
    c = compare_case("c", a, a.copy())
    assert (c.verdict, c.mark) == ("same", "~")
    assert c.ratio == pytest.approx(1.0)
    assert c.p_value == pytest.approx(1.0)
    assert c.ci_low <= 1 <= c.ci_high


def test_all_values_identical_does_not_crash():
    c = compare_case("c", [50.0] * 10, [50.0] * 10)
    assert c.verdict == "same" and c.p_value == 1.0 and c.ci_low == c.ci_high == 1.0


def test_single_sample_per_side_is_not_comparable():
    c = compare_case("c", [100.0], [110.0])
    assert (c.verdict, c.mark) == ("n/a", "x")
    assert "too few samples" in c.reason
    assert c.ratio == pytest.approx(1.1) and c.p_value is None and c.ci_low is None


def test_too_few_samples_for_the_rank_test_fall_back_to_welch():
    # 3 vs 3: the rank test's smallest two-sided p is 0.1, so Welch's t-test on the means decides
    # (the contest's stop rule often ends a stable case after 3 repetitions).
    c = compare_case("c", [100.0, 100.1, 100.2], [200.0, 200.1, 200.2])
    assert c.verdict == "slower" and c.reason.startswith("t p=")
    assert compare_case("c", [100.0, 100.1, 100.2], [100.5, 100.3, 100.4]).verdict == "same"  # +0.3% < 2%
    # 4 vs 4 can reach p < 0.05 with the rank test.
    c = compare_case("c", [100, 100.1, 100.2, 100.3], [200, 200.1, 200.2, 200.3])
    assert c.verdict == "slower" and c.reason.startswith("U p=")


@pytest.mark.parametrize(("b_value", "verdict"), [(105.0, "slower"), (95.0, "faster"), (101.0, "same")])
def test_zero_variance_both_sides(b_value, verdict):
    c = compare_case("c", [100.0] * 10, [b_value] * 10)
    assert c.verdict == verdict
    assert c.ratio == pytest.approx(b_value / 100)


def test_five_percent_slower_and_faster():
    a, b = noisy(100, 30, 0.005, 2), noisy(105, 30, 0.005, 3)
    slower = compare_case("c", a, b)
    assert (slower.verdict, slower.mark) == ("slower", "+")
    assert slower.p_value < 1e-6
    assert 1.04 < slower.ci_low < slower.ratio < slower.ci_high < 1.06
    assert slower.reason.startswith("U p=") and "median +" in slower.reason
    faster = compare_case("c", b, a)
    assert (faster.verdict, faster.mark) == ("faster", "-")
    assert faster.ci_high < 1


def test_one_percent_below_min_effect_is_same():
    a, b = noisy(100, 30, 0.005, 4), noisy(101, 30, 0.005, 5)
    c = compare_case("c", a, b, min_effect=0.02)
    assert c.p_value < 0.05  # the difference is real ...
    assert c.verdict == "same"  # ... but too small to matter
    assert compare_case("c", a, b, min_effect=0.005).verdict == "slower"


def test_heavy_outliers_do_not_create_or_flip_a_verdict():
    a, b = noisy(100, 30, 0.005, 6), noisy(100, 30, 0.005, 7)
    b_out = b.copy()
    b_out[0] = 10_000.0  # one 100x sample
    c = compare_case("c", a, b_out)
    assert c.verdict == "same"
    assert c.ratio > 3  # the mean ratio is skewed; the verdict is not
    assert c.ci_low < 1 < c.ci_high  # and the CI of the ratio of means widens rather than claiming a change

    slow = noisy(105, 30, 0.005, 8)
    a_out = a.copy()
    a_out[:2] = 20_000.0  # A's mean now far above B's
    c = compare_case("c", a_out, slow)
    # The medians say slower, the ratio of means says faster: the mark must not contradict the ratio shown.
    assert c.p_value < 0.05 and c.ratio < 1
    assert c.verdict == "same" and c.mark == "~"
    assert "disagree" in c.reason  # the reason explains why no change is claimed


def test_bimodal_samples_report_both_effects():
    # Two timing modes; B sits in the slow mode more often: ranks differ (p < 0.05), the median jumps a
    # whole mode (+10%) while the mean moves +3.6%; the reason shows both so the reader sees the modes.
    a = [100.0] * 9 + [110.0] * 7
    b = [100.0] * 3 + [110.0] * 13
    c = compare_case("c", a, b)
    assert c.p_value < 0.05 and c.verdict == "slower"
    assert "median +10.0%" in c.reason and "(mean +3.6%)" in c.reason
    assert 1 < c.ci_low < c.ratio < c.ci_high


def test_nan_and_inf_samples_are_dropped():
    a, b = noisy(100, 30, 0.005, 9), noisy(105, 30, 0.005, 10)
    dirty = np.concatenate([b, [np.nan, np.inf, -np.inf]])
    c = compare_case("c", a, dirty)
    assert c.verdict == "slower" and math.isfinite(c.mean_b)
    assert c.mean_b == pytest.approx(b.mean())
    empty = compare_case("c", [np.nan, np.nan], b)
    assert empty.verdict == "n/a" and empty.reason == "no valid samples in A"


@pytest.mark.parametrize(
    ("pa", "pb", "reason"),
    [
        (False, True, "failed in A"),
        (True, False, "failed in B"),
        (False, False, "failed in A and B"),
    ],
)
def test_failed_case_is_not_comparable(pa, pb, reason):
    a, b = noisy(100, 30, 0.005, 11), noisy(150, 30, 0.005, 12)
    c = compare_case("c", a, b, passed_a=pa, passed_b=pb)
    assert (c.verdict, c.mark, c.reason) == ("n/a", "x", reason)
    assert c.ratio is None and c.p_value is None


def test_deterministic():
    a, b = noisy(100, 20, 0.02, 13), noisy(103, 20, 0.02, 14)
    assert compare_case("c", a, b) == compare_case("c", a, b)


@pytest.mark.parametrize(("noise", "n"), [(0.005, 30), (0.01, 10), (0.02, 10)])
def test_a_a_false_positive_rate(noise, n):
    draws = 200
    hits = 0
    for seed in range(draws):
        rng = np.random.default_rng(1000 + seed)
        a = 100 * (1 + noise * rng.standard_normal(n))
        b = 100 * (1 + noise * rng.standard_normal(n))
        hits += compare_case("c", a, b).verdict != "same"
    assert hits / draws <= 0.02


def test_power_at_five_percent():
    found = sum(
        compare_case("c", noisy(100, 30, 0.005, 2 * s), noisy(105, 30, 0.005, 2 * s + 1)).verdict == "slower"
        for s in range(50)
    )
    assert found == 50


# ------------------------------------------------------------------------------------------ compare_runs


def test_compare_runs_geomean_and_order():
    a = {
        "x": CaseData(noisy(100, 30, 0.005, 20)),
        "y": CaseData(noisy(200, 30, 0.005, 21)),
    }
    b = {
        "y": CaseData(noisy(180, 30, 0.005, 22)),
        "x": CaseData(noisy(110, 30, 0.005, 23)),
    }
    r = compare_runs(a, b, gpu_a="NVIDIA H200", gpu_b="NVIDIA H200")
    assert r.comparable
    assert [c.case for c in r.cases] == ["x", "y"]
    assert [c.verdict for c in r.cases] == ["slower", "faster"]
    expected = math.sqrt(r.cases[0].ratio * r.cases[1].ratio)
    assert r.geomean_ratio == pytest.approx(expected)
    assert r.geomean_ratio == pytest.approx(math.sqrt(1.1 * 0.9), rel=0.01)
    lo, hi = r.geomean_ci
    assert lo < r.geomean_ratio < hi and hi - lo < 0.01


def test_geomean_of_known_ratios():
    # Zero-variance cases: ratios exactly 2 and 0.5 -> geomean 1; 4 and 1 -> 2.
    a = {"p": CaseData([10.0] * 5), "q": CaseData([10.0] * 5)}
    r = compare_runs(a, {"p": CaseData([20.0] * 5), "q": CaseData([5.0] * 5)}, gpu_a=None, gpu_b=None)
    assert r.geomean_ratio == pytest.approx(1.0) and r.geomean_ci == pytest.approx((1.0, 1.0))
    r = compare_runs(
        a,
        {"p": CaseData([40.0] * 5), "q": CaseData([10.0] * 5)},
        gpu_a=None,
        gpu_b=None,
    )
    assert r.geomean_ratio == pytest.approx(2.0)


def test_missing_cases_keep_order_and_skip_geomean():
    a = {"x": CaseData(noisy(100, 30, 0.005, 30)), "only_a": CaseData([1.0, 2.0])}
    b = {"only_b": CaseData([1.0, 2.0]), "x": CaseData(noisy(100, 30, 0.005, 31))}
    r = compare_runs(a, b, gpu_a="H200", gpu_b="H200")
    assert [c.case for c in r.cases] == ["x", "only_a", "only_b"]
    assert [c.reason for c in r.cases[1:]] == ["missing in B", "missing in A"]
    assert all(c.verdict == "n/a" and c.mark == "x" for c in r.cases[1:])
    assert r.cases[0].verdict == "same"
    assert r.geomean_ratio == pytest.approx(r.cases[0].ratio)


def test_failed_case_excluded_from_geomean():
    a = {"x": CaseData([10.0] * 5), "bad": CaseData([10.0] * 5)}
    b = {"x": CaseData([20.0] * 5), "bad": CaseData([1000.0] * 5, passed=False)}
    r = compare_runs(a, b, gpu_a="H200", gpu_b="H200")
    assert r.cases[1].reason == "failed in B"
    assert r.geomean_ratio == pytest.approx(2.0)


def test_different_gpu_models_are_not_comparable():
    a = {"x": CaseData(noisy(100, 30, 0.005, 40))}
    b = {"x": CaseData(noisy(300, 30, 0.005, 41))}
    r = compare_runs(a, b, gpu_a="NVIDIA H200", gpu_b="CPU")
    assert not r.comparable
    assert r.reason == "different GPU models: NVIDIA H200 vs CPU"
    assert r.geomean_ratio is None and r.geomean_ci is None
    assert all(c.verdict == "n/a" and c.mark == "x" for c in r.cases)
    assert not compare_runs(a, b, gpu_a="NVIDIA H200", gpu_b=None).comparable


def test_single_sample_cases_give_geomean_without_ci():
    r = compare_runs({"x": CaseData([10.0])}, {"x": CaseData([12.0])}, gpu_a="g", gpu_b="g")
    assert r.cases[0].verdict == "n/a"
    assert r.geomean_ratio == pytest.approx(1.2) and r.geomean_ci is None


# ---------------------------------------------------------------------------------------- detect_changes


def test_flat_noisy_series_has_no_change_points():
    flagged = sum(bool(detect_changes("c", history(noisy(100, 12, 0.005, seed)))) for seed in range(500))
    assert flagged == 0


def test_noise_near_min_effect_rarely_flags():
    # 2% noise with a 2% minimum effect: the penalty, not the merge, must keep this quiet.
    flagged = sum(bool(detect_changes("c", history(noisy(100, 12, 0.02, seed)))) for seed in range(300))
    assert flagged / 300 <= 0.05


def test_five_percent_step_found_once_at_the_right_index():
    for seed in range(200):
        means = noisy(100, 12, 0.005, seed)
        means[6:] *= 1.05
        changes = detect_changes("c", history(means))
        assert len(changes) == 1, seed
        cp = changes[0]
        assert (cp.index, cp.run_id, cp.kind) == (6, "r6", "regression")
        assert cp.factor == pytest.approx(1.05, abs=0.015)
        assert cp.factor == pytest.approx(cp.after / cp.before)


def test_improvement_step():
    means = noisy(100, 12, 0.005, 50)
    means[4:] *= 0.9
    (cp,) = detect_changes("c", history(means))
    assert (cp.index, cp.kind) == (4, "improvement") and cp.factor < 1


def test_tiny_inputs():
    assert detect_changes("c", []) == []
    assert detect_changes("c", history([100.0])) == []
    assert detect_changes("c", history([100.0, 100.0])) == []
    (cp,) = detect_changes("c", history([100.0, 110.0]))
    assert (cp.index, cp.factor) == (1, pytest.approx(1.1))
    assert detect_changes("c", history([100.0, 101.0])) == []  # below min_effect


def test_all_identical_values():
    assert detect_changes("c", history([42.0] * 20)) == []


@pytest.mark.parametrize("where", [1, 5, 10])
def test_single_outlier_run_is_not_two_steps(where):
    means = noisy(100, 12, 0.005, 60)
    means[where] *= 3
    assert detect_changes("c", history(means)) == []


def test_outlier_between_two_levels_gives_one_step_after_it():
    means = np.r_[noisy(100, 6, 0.005, 61), 300.0, noisy(110, 6, 0.005, 62)]
    (cp,) = detect_changes("c", history(means))
    assert cp.index == 7 and cp.factor == pytest.approx(1.1, abs=0.01)


def test_two_run_excursion_is_reported():
    means = noisy(100, 12, 0.005, 63)
    means[5:7] *= 1.5
    assert [(c.index, c.kind) for c in detect_changes("c", history(means))] == [
        (5, "regression"),
        (7, "improvement"),
    ]


def test_multiple_steps():
    means = noisy(100, 24, 0.005, 70)
    means[8:] *= 1.05
    means[16:] *= 0.9
    changes = detect_changes("c", history(means))
    assert [(c.index, c.kind) for c in changes] == [
        (8, "regression"),
        (16, "improvement"),
    ]
    assert changes[1].before == pytest.approx(changes[0].after)


def test_inconclusive_runs_are_skipped_but_indices_are_full():
    means = list(noisy(100, 12, 0.005, 80))
    statuses = ["passed"] * 12
    means[6:] = [m * 1.05 for m in means[6:]]
    # The run at the change is a timeout (no mean), another crashed with a wild mean, one failed.
    means[6], statuses[6] = None, "timeout"
    means[3], statuses[3] = 500.0, "crashed"
    means[9], statuses[9] = float("nan"), "failed"
    (cp,) = detect_changes("c", history(means, statuses))
    assert (cp.index, cp.run_id) == (7, "r7")
    assert detect_changes("c", history([None, 100.0], ["timeout", "passed"])) == []


def test_samples_raise_the_noise_level():
    # Each run is very noisy internally: a 4% step in the means is not significant.
    rng = np.random.default_rng(90)
    pts = []
    for i in range(12):
        s = (100 if i < 6 else 104) * (1 + 0.2 * rng.standard_normal(5))
        pts.append(HistoryPoint(f"r{i}", 100.0 if i < 6 else 104.0, samples=list(s)))
    assert detect_changes("c", pts) == []
    quiet = [HistoryPoint(p.run_id, p.mean) for p in pts]
    assert len(detect_changes("c", quiet)) == 1


def test_a_step_resting_on_one_run_stands_only_where_comparing_the_two_runs_finds_it():
    """`regressions` called a step at one run a change where `compare` of the same two runs said "~ same" (its
    mean moved by a few slow samples, its median did not): a step with a single run on a side is kept only where
    the compare of the runs either side finds the difference too."""
    rng = np.random.default_rng(7)

    def run(run_id, level, spread=0.002, slow=()):
        samples = [*(level * (1 + spread * rng.standard_normal(20 - len(slow)))), *slow]
        return HistoryPoint(run_id, float(np.mean(samples)), samples=samples)

    flat = [run(f"r{i}", 100.0) for i in range(8)]
    outliers = run("last", 100.0, slow=(136.0, 138.0))  # mean +3.6%, median unchanged
    assert compare_case("c", flat[-1].samples, outliers.samples).verdict == "same"
    assert detect_changes("c", [*flat, outliers]) == []
    step = run("last", 104.0)
    assert compare_case("c", flat[-1].samples, step.samples).verdict == "slower"
    assert [(c.run_id, c.kind) for c in detect_changes("c", [*flat, step])] == [("last", "regression")]
    # a series without samples (imported means) keeps the means' verdict
    assert len(detect_changes("c", [HistoryPoint(p.run_id, p.mean) for p in [*flat, step]])) == 1
