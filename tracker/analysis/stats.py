"""Statistics: A-vs-B comparison per case, over runs, and change points along a history.

Pure numpy/scipy on plain data; times are microseconds. Nothing here touches the store.

Methods (see docs/method.md):

* A vs B per case: ``ratio`` is mean_b / mean_a, as ``asv compare`` shows it. The decision uses robust
  statistics so that a few wild samples cannot flip it: a two-sided Mann-Whitney U test on the raw samples,
  the ratio of medians as the effect size. With too few samples for the rank test to reach alpha (the
  contest's stop rule often stops a stable case after 3 repetitions), Welch's t-test on the means and the
  ratio of means decide instead. The CI is that of the ratio of means (Welch, delta method on the log).
  A case is "faster"/"slower" only if p < alpha, |effect| >= min_effect, and the ratio of means (the ratio
  shown) also moves by >= min_effect the same way; otherwise "same". So a mark never contradicts its ratio.
* Over runs: geometric mean of the per-case ratios (cases with a ratio on both sides); its CI comes from a
  joint bootstrap of the means of every included case.
* History: piecewise-constant fit of log(mean) minimising the L1 distance to segment medians plus a penalty
  per segment (the idea of asv's step detection, written here as an exact dynamic programme). The penalty
  is ``_PENALTY_SCALE * sigma * log(n + 1)``, sigma being a robust relative noise level taken from the
  scatter of consecutive means and from the per-run samples. Interior one-run segments that stick out
  beyond both neighbours are outliers, not two steps; steps smaller than min_effect are merged away.
"""

from __future__ import annotations

import heapq
import itertools
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tracker.common.vocabulary import DEFAULT_WORKLOAD

__all__ = [
    "CaseComparison",
    "CaseData",
    "ChangePoint",
    "HistoryPoint",
    "RunComparison",
    "compare_case",
    "compare_runs",
    "detect_changes",
    "PairedCase",
    "paired_case",
]

_BOOTSTRAP_REPS = 2000
_SEED = 0x5EED
# Relative noise below this is timer resolution, not signal; also keeps the penalty positive.
_NOISE_FLOOR = 1e-4
# Chosen by simulation: flat gaussian series of 5..300 points stay step-free in >~97% of seeds even with
# min_effect=0, while a step of ~5 sigma in 12 points is still found.
_PENALTY_SCALE = 3.0


# ----------------------------------------------------------------------------------------------- A vs B


@dataclass(frozen=True)
class CaseComparison:
    case: str
    mean_a: float | None
    mean_b: float | None
    ratio: float | None  # mean_b / mean_a (>1: B is slower)
    ci_low: float | None  # CI (1 - alpha) of the ratio of means (Welch, delta method)
    ci_high: float | None
    p_value: float | None  # two-sided Mann-Whitney U
    verdict: str  # faster | slower | same | n/a
    mark: str  # "-" faster, "+" slower, "~" within noise, "x" not comparable
    reason: str


@dataclass(frozen=True)
class CaseData:
    samples: Sequence[float]
    passed: bool = True


@dataclass(frozen=True)
class RunComparison:
    cases: list[CaseComparison]
    geomean_ratio: float | None
    geomean_ci: tuple[float, float] | None
    comparable: bool
    reason: str


_MARKS = {"faster": "-", "slower": "+", "same": "~", "n/a": "x"}


def _finite(samples: Sequence[float] | None) -> np.ndarray:
    # NaN/inf come from broken timers or crashed repetitions; they carry no timing information.
    x = np.asarray([] if samples is None else samples, dtype=float).ravel()
    return x[np.isfinite(x)]


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if x.size else None


def _seed(*parts: str) -> int:
    # crc32, unlike hash(), is stable across processes, so results are reproducible.
    return _SEED ^ zlib.crc32("\0".join(parts).encode())


def _scipy_stats():
    """scipy.stats, imported on first use: it takes about a second, and most commands (run, list) never test."""
    from scipy import stats

    return stats


def _mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(np.concatenate([a, b])) == 0:
        return 1.0  # all values tied: no evidence of any difference (scipy would divide by zero)
    return float(_scipy_stats().mannwhitneyu(a, b, alternative="two-sided").pvalue)


def _welch(a: np.ndarray, b: np.ndarray, level: float) -> tuple[float, float, float]:
    """Welch's t-test on the means, and the CI of the ratio of means (delta method on the log ratio).

    Returns (p, ci_low, ci_high). Used for the CI always, and for the decision when there are too few
    samples for a rank test: the contest's stop rule often ends a stable case after 3 repetitions.
    """
    ma, mb = float(a.mean()), float(b.mean())
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    se_log = math.sqrt(va / ma**2 + vb / mb**2)
    if se_log == 0:
        return (1.0 if ma == mb else 0.0), mb / ma, mb / ma
    df_den = (va / ma**2) ** 2 / (a.size - 1) + (vb / mb**2) ** 2 / (b.size - 1)
    df = (va / ma**2 + vb / mb**2) ** 2 / df_den if df_den > 0 else float(a.size + b.size - 2)
    t = (math.log(mb) - math.log(ma)) / se_log
    t_dist = _scipy_stats().t
    p = float(2 * t_dist.sf(abs(t), df))
    half = float(t_dist.ppf(0.5 + level / 2, df)) * se_log
    return p, mb / ma * math.exp(-half), mb / ma * math.exp(half)


def compare_case(
    case: str,
    a: Sequence[float],
    b: Sequence[float],
    *,
    passed_a: bool = True,
    passed_b: bool = True,
    min_effect: float = 0.02,
    alpha: float = 0.05,
) -> CaseComparison:
    """Compare one case's samples of run A and run B (times in microseconds)."""
    xa, xb = _finite(a), _finite(b)
    mean_a, mean_b = _mean(xa), _mean(xb)

    def result(verdict: str, reason: str, **kw: float | None) -> CaseComparison:
        fields: dict[str, float | None] = {"ratio": None, "ci_low": None, "ci_high": None, "p_value": None}
        fields.update(kw)
        return CaseComparison(case, mean_a, mean_b, **fields, verdict=verdict, mark=_MARKS[verdict], reason=reason)

    failed = [side for side, ok in (("A", passed_a), ("B", passed_b)) if not ok]
    if failed:
        return result("n/a", "failed in " + " and ".join(failed))
    empty = [side for side, x in (("A", xa), ("B", xb)) if not x.size]
    if empty:
        return result("n/a", "no valid samples in " + " and ".join(empty))
    if min(np.median(xa), np.median(xb), mean_a, mean_b) <= 0:
        return result("n/a", "non-positive times")
    ratio = mean_b / mean_a
    n_a, n_b = xa.size, xb.size
    if n_a < 2 or n_b < 2:
        return result("n/a", f"too few samples ({n_a} vs {n_b})", ratio=ratio)

    welch_p, lo, hi = _welch(xa, xb, 1 - alpha)
    # The rank test is robust to outliers but cannot reach alpha with very few samples (its smallest
    # two-sided p is 2 / C(n_a + n_b, n_a)); then Welch's test on the means decides.
    if 2 / math.comb(n_a + n_b, n_a) < alpha:
        test, p = "U", _mann_whitney_p(xa, xb)
        effect = float(np.median(xb) / np.median(xa)) - 1
        what = "median"
    else:
        test, p, effect, what = "t", welch_p, ratio - 1, "mean"
    stat = {"ratio": ratio, "ci_low": lo, "ci_high": hi, "p_value": p}
    # The mark never contradicts the ratio shown beside it: besides a significant test, the ratio of means
    # itself must move by at least min_effect, in the same direction as the test's effect (the medians').
    mean_effect = ratio - 1
    mean_note = f" (mean {mean_effect:+.1%})" if what == "median" else ""
    if p >= alpha:
        verdict, why = "same", f"{test} p={p:.2g}, {what} {effect:+.1%}{mean_note}"
    elif abs(effect) < min_effect or abs(mean_effect) < min_effect:
        verdict, why = "same", f"{test} p={p:.2g}, {what} {effect:+.1%}{mean_note} < {min_effect:.1%}"
    elif (effect > 0) != (mean_effect > 0):
        verdict, why = "same", f"{test} p={p:.2g}, median {effect:+.1%} and mean {mean_effect:+.1%} disagree"
    else:
        verdict, why = ("slower" if effect > 0 else "faster"), f"{test} p={p:.2g}, {what} {effect:+.1%}{mean_note}"
    return result(verdict, why, **stat)


def _geomean_ci(pairs: list[tuple[np.ndarray, np.ndarray]], level: float, seed: int) -> tuple[float, float]:
    # Resample every case independently (samples of different cases are independent), recompute the
    # geometric mean of the ratios of means each time, take percentiles.
    rng = np.random.default_rng(seed)
    total = np.zeros(_BOOTSTRAP_REPS)
    for xa, xb in pairs:
        ma = xa[rng.integers(0, xa.size, (_BOOTSTRAP_REPS, xa.size))].mean(axis=1)
        mb = xb[rng.integers(0, xb.size, (_BOOTSTRAP_REPS, xb.size))].mean(axis=1)
        total += np.log(mb / ma)
    reps = np.exp(total / len(pairs))
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(reps, [tail, 100 - tail])
    return float(lo), float(hi)


def compare_runs(
    cases_a: Mapping[str, CaseData],
    cases_b: Mapping[str, CaseData],
    *,
    gpu_a: str | None,
    gpu_b: str | None,
    min_effect: float = 0.02,
    alpha: float = 0.05,
    problem_a: str | None = None,
    problem_b: str | None = None,
    problem_hash_a: str | None = None,
    problem_hash_b: str | None = None,
) -> RunComparison:
    """Compare two runs case by case; cases in the order of A, then those only in B.

    Runs of different problems (workloads) are never compared; one problem whose files changed between the runs
    is compared with a warning in the summary.
    """
    names = list(cases_a) + [name for name in cases_b if name not in cases_a]
    gpu_a_n = gpu_a.strip() if gpu_a else None
    gpu_b_n = gpu_b.strip() if gpu_b else None
    same_gpu = gpu_a_n == gpu_b_n
    gpu_reason = f"different GPU models: {gpu_a_n or 'unknown'} vs {gpu_b_n or 'unknown'}"
    problem_a, problem_b = problem_a or DEFAULT_WORKLOAD, problem_b or DEFAULT_WORKLOAD
    if problem_a != problem_b:
        same_gpu = False  # not comparable, for a stronger reason than the GPU
        gpu_reason = f"different problems: {problem_a} vs {problem_b}"
    changed = problem_hash_a and problem_hash_b and problem_hash_a != problem_hash_b

    rows: list[CaseComparison] = []
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for name in names:
        da, db = cases_a.get(name), cases_b.get(name)
        xa = _finite(da.samples if da else None)
        xb = _finite(db.samples if db else None)
        if da is None or db is None or not same_gpu:
            reason = "missing in A" if da is None else "missing in B" if db is None else gpu_reason
            rows.append(CaseComparison(name, _mean(xa), _mean(xb), None, None, None, None, "n/a", "x", reason))
            continue
        row = compare_case(name, xa, xb, passed_a=da.passed, passed_b=db.passed, min_effect=min_effect, alpha=alpha)
        rows.append(row)
        if row.ratio is not None:
            pairs.append((xa, xb))

    if not same_gpu:
        return RunComparison(rows, None, None, False, gpu_reason)
    ratios = [row.ratio for row in rows if row.ratio is not None]
    if not ratios:
        return RunComparison(rows, None, None, False, "no case comparable on both sides")
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    ci = None
    # A case with a single sample has no spread to resample; a CI would then be falsely narrow.
    if all(xa.size >= 2 and xb.size >= 2 for xa, xb in pairs):
        ci = _geomean_ci(pairs, 1 - alpha, _seed(*names))
    counts = {v: sum(row.verdict == v for row in rows) for v in ("slower", "faster", "same", "n/a")}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    if changed:
        summary += (
            f"; warning: the problem's files differ between the runs ({problem_hash_a[:8]}, {problem_hash_b[:8]})"
        )
    return RunComparison(rows, geomean, ci, True, summary)


# ------------------------------------------------------------------------------------ change points


@dataclass(frozen=True)
class HistoryPoint:
    run_id: str
    mean: float | None  # None or NaN for failed/timeout/crashed runs
    samples: Sequence[float] = ()
    status: str = "passed"  # passed | failed | timeout | crashed


@dataclass(frozen=True)
class ChangePoint:
    case: str
    index: int  # index in the full input list of the first run after the change
    run_id: str
    before: float  # median of the run means of the segment before
    after: float  # median of the run means of the segment after
    factor: float  # after / before
    kind: str  # "regression" (slower) | "improvement"


def _noise_level(y: np.ndarray, points: list[HistoryPoint]) -> float:
    """Relative (log-scale) standard deviation of one run's mean."""
    parts = [_NOISE_FLOOR]
    if y.size >= 4:
        # Consecutive differences: a step or an outlier spoils only one or two of them, the median
        # ignores those. For iid gaussian noise, median|d| = 0.6745 * sqrt(2) * sigma.
        parts.append(float(np.median(np.abs(np.diff(y)))) / (0.6745 * math.sqrt(2)))
    sems = []
    for p in points:
        s = _finite(p.samples)
        if s.size >= 2 and s.mean() > 0:
            sems.append(float(s.std(ddof=1) / s.mean() / math.sqrt(s.size)))
    if sems:
        # Within-run error is a lower bound for run-to-run noise; the median is robust to odd runs.
        parts.append(float(np.median(sems)))
    return max(parts)


def _l1_segments(y: np.ndarray, penalty: float) -> list[int]:
    """Start indices of the partition minimising sum |y - segment median| + penalty per segment.

    Exact optimal partitioning, O(n^2 log n): for each end j the candidate last segments y[i:j] are
    grown leftwards with a two-heap running median that also keeps the sums of both halves.
    """
    n = y.size
    best = [0.0] + [math.inf] * n
    start = [0] * (n + 1)
    for j in range(1, n + 1):
        lo: list[float] = []  # max-heap (negated) of the lower half, holds the extra element
        hi: list[float] = []  # min-heap of the upper half
        s_lo = s_hi = 0.0
        for i in range(j - 1, -1, -1):
            v = float(y[i])
            if lo and v > -lo[0]:
                heapq.heappush(hi, v)
                s_hi += v
            else:
                heapq.heappush(lo, -v)
                s_lo += v
            if len(lo) > len(hi) + 1:
                m = -heapq.heappop(lo)
                s_lo -= m
                heapq.heappush(hi, m)
                s_hi += m
            elif len(hi) > len(lo):
                m = heapq.heappop(hi)
                s_hi -= m
                heapq.heappush(lo, -m)
                s_lo += m
            # Sum of |v - median| = (upper half) - (lower half), the middle element contributes 0.
            cost = s_hi - s_lo + (-lo[0] if len(lo) > len(hi) else 0.0)
            total = best[i] + cost + penalty
            if total < best[j]:
                best[j], start[j] = total, i
    starts = []
    j = n
    while j > 0:
        j = start[j]
        starts.append(j)
    return starts[::-1]


def detect_changes(case: str, history: Sequence[HistoryPoint], *, min_effect: float = 0.02) -> list[ChangePoint]:
    """Steps in one case's history (oldest first); indices refer to the full ``history``.

    A step at the newest run is reported at once (it cannot yet be told from an outlier; later runs
    will tell). Elsewhere a single deviating run is an outlier and never a change point.
    """
    # Only passed runs with a usable mean take part; failures and timeouts are inconclusive.
    keep = [
        k
        for k, p in enumerate(history)
        if p.status == "passed" and p.mean is not None and math.isfinite(p.mean) and p.mean > 0
    ]
    if len(keep) < 2:
        return []
    means = np.array([history[k].mean for k in keep], dtype=float)
    y = np.log(means)  # timing noise and effects are multiplicative
    sigma = _noise_level(y, [history[k] for k in keep])
    starts = _l1_segments(y, _PENALTY_SCALE * sigma * math.log(y.size + 1))
    segs = [list(range(s, e)) for s, e in zip(starts, starts[1:] + [y.size], strict=True)]

    # A one-run segment inside the series: beyond both neighbours it is an excursion (outlier run,
    # dropped); between them it is a run in transition (joins the closer neighbour).
    k = 1
    while k < len(segs) - 1:
        if len(segs[k]) != 1:
            k += 1
            continue
        v = y[segs[k][0]]
        left, right = float(np.median(y[segs[k - 1]])), float(np.median(y[segs[k + 1]]))
        if min(left, right) <= v <= max(left, right):
            if abs(v - left) <= abs(v - right):
                segs[k - 1] += segs.pop(k)
            else:
                segs[k] = segs.pop(k) + segs[k]  # pop first: segs[k] is then the right neighbour
        else:
            segs.pop(k)
        k = 1  # neighbours changed; rescan

    # Merge the smallest too-small step until every step is at least min_effect.
    while len(segs) > 1:
        levels = [float(np.median(means[s])) for s in segs]
        small = [
            (abs(math.log(b / a)), k)
            for k, (a, b) in enumerate(itertools.pairwise(levels))
            if abs(b / a - 1) < min_effect
        ]
        if not small:
            break
        k = min(small)[1]
        segs[k] += segs.pop(k + 1)

    # A step with one run on a side rests on that run alone: where the two runs either side have samples, it
    # stands only where comparing them (what `compare` shows of the pair) finds a difference, not noise.
    k = 0
    while k < len(segs) - 1:
        a, b = history[keep[segs[k][-1]]], history[keep[segs[k + 1][0]]]
        lone = min(len(segs[k]), len(segs[k + 1])) == 1
        if lone and compare_case(case, a.samples, b.samples, min_effect=min_effect).verdict == "same":
            segs[k] += segs.pop(k + 1)
            k = 0
        else:
            k += 1

    changes = []
    for prev, seg in itertools.pairwise(segs):
        before, after = float(np.median(means[prev])), float(np.median(means[seg]))
        idx = keep[seg[0]]
        changes.append(
            ChangePoint(
                case=case,
                index=idx,
                run_id=history[idx].run_id,
                before=before,
                after=after,
                factor=after / before,
                kind="regression" if after > before else "improvement",
            )
        )
    return changes


# -------------------------------------------------------------------------------------------- paired A/B


@dataclass(frozen=True)
class PairedCase:
    """A case of an interleaved A/B session (`tracker ab`): judged on the per-round ratios, so the machine's drift
    between rounds, which moves A and B together, cancels."""

    case: str
    rounds: int  # rounds in which both sides passed and timed the case
    ratio: float | None  # geometric mean of the per-round ratios mean_b / mean_a (>1: B is slower)
    ci_low: float | None  # CI (1 - alpha) of that ratio: Student's t on the log ratios
    ci_high: float | None
    p_value: float | None  # two-sided one-sample t-test of the log ratios against 0
    verdict: str  # faster | slower | same | n/a
    mark: str
    reason: str
    ratios: tuple[float, ...] = ()

    @property
    def single_round_ratio(self) -> float | None:
        """Where only one round timed the case (a session cut early), that round's ratio: not a verdict, but what
        the session saw. None otherwise."""
        return self.ratios[0] if self.ratio is None and len(self.ratios) == 1 else None


def paired_case(case: str, ratios: Sequence[float], *, min_effect: float = 0.02, alpha: float = 0.05) -> PairedCase:
    """A paired t-test on log(mean_b / mean_a) over the rounds: faster or slower only when it is significant
    and the geometric-mean ratio moves by at least min_effect; with fewer than 2 rounds, not comparable."""
    x = np.log(_finite(ratios))
    got = tuple(float(r) for r in np.exp(x))
    if x.size < 2:
        return PairedCase(case, int(x.size), None, None, None, None, "n/a", _MARKS["n/a"],
                          "fewer than 2 rounds timed on both sides", got)  # fmt: skip
    m, sd = float(x.mean()), float(x.std(ddof=1))
    ratio = math.exp(m)
    if sd == 0.0:  # identical rounds: the interval is the point
        p, lo, hi = (0.0 if m != 0 else 1.0), ratio, ratio
    else:
        se = sd / math.sqrt(x.size)
        t_dist = _scipy_stats().t
        p = float(2 * t_dist.sf(abs(m) / se, df=x.size - 1))
        half = float(t_dist.ppf(1 - alpha / 2, df=x.size - 1)) * se
        lo, hi = math.exp(m - half), math.exp(m + half)
    if p >= alpha:
        verdict, reason = "same", f"paired t over {x.size} rounds: p = {p:.3g}"
    elif abs(ratio - 1) < min_effect:
        verdict, reason = "same", f"significant (p = {p:.3g}) but under the {min_effect:.0%} minimum effect"
    else:
        verdict = "slower" if ratio > 1 else "faster"
        reason = f"paired t over {x.size} rounds: p = {p:.3g}"
    return PairedCase(case, int(x.size), ratio, lo, hi, p, verdict, _MARKS[verdict], reason, got)
