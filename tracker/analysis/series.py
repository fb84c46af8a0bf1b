"""Store data as tracker.analysis.stats input, and its results: per-case samples, comparisons, change points.

Pure functions (no Plotly, no Streamlit, no store access); regression_table shapes the change points for a page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tracker.analysis.stats import (
    CaseData,
    ChangePoint,
    HistoryPoint,
    PairedCase,
    RunComparison,
    compare_runs,
    detect_changes,
    paired_case,
)
from tracker.common.lazy import pd

# ---------------------------------------------------------------------------------------------------- run


def is_num(x: Any) -> bool:
    """A usable number: not None, not NaN (also pandas' NA)."""
    return x is not None and not (isinstance(x, float) and math.isnan(x)) and not pd.isna(x)


def samples_by_case(cases: pd.DataFrame, samples: pd.DataFrame) -> dict[str, list[float]]:
    """Samples per case label, in case order."""
    groups = {k: g["time_us"].tolist() for k, g in samples.groupby("case_idx")} if not samples.empty else {}
    records = cases.to_dict("records")
    return {label: groups.get(c["case_idx"], []) for label, c in zip(case_labels(records), records, strict=True)}


def case_labels(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each case row's name across runs: its label (or spec); two cases with one label (different seeds) are
    kept apart by their index."""
    out: list[str] = []
    for c in records:
        label = c.get("label") or c["spec"]
        out.append(f"{label} #{c['case_idx']}" if label in out else label)
    return out


def session_pair(run_a: Mapping[str, Any], run_b: Mapping[str, Any]) -> str | None:
    """The A/B session (`tracker ab`) two runs belong to on opposite sides, or None."""
    pair = run_a.get("pair_id")
    if not isinstance(pair, str) or pair != run_b.get("pair_id") or run_a.get("pair_side") == run_b.get("pair_side"):
        return None
    return pair


def rows_by_label(cases: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """A run's case rows by their names across runs (case_labels)."""
    records = cases.to_dict("records")
    return dict(zip(case_labels(records), records, strict=True))


def case_notes(
    cases_a: pd.DataFrame, cases_b: pd.DataFrame, note: Callable[[Mapping[str, Any], Mapping[str, Any]], str | None]
) -> list[dict[str, str]]:
    """Per case both runs have, in A's order: {case, note} where `note(row A, row B)` has something to say."""
    b = rows_by_label(cases_b)
    out = []
    for label, row in rows_by_label(cases_a).items():
        said = note(row, b[label]) if label in b else None
        if said:
            out.append({"case": label, "note": said})
    return out


# ------------------------------------------------------------------------------------------------ compare


def case_data(bundle: Mapping[str, Any]) -> dict[str, CaseData]:
    """A run's cases as tracker.analysis.stats input: samples and pass/fail per case label."""
    cases = bundle["cases"]
    per_case = samples_by_case(cases, bundle["samples"])
    records = cases.to_dict("records")
    passed = {label: bool(c["passed"]) for label, c in zip(case_labels(records), records, strict=True)}
    return {label: CaseData(tuple(per_case[label]), passed[label]) for label in per_case}


def compare_bundles(a: Mapping[str, Any], b: Mapping[str, Any]) -> RunComparison:
    return compare_runs(
        case_data(a),
        case_data(b),
        gpu_a=a["run"].get("gpu"),
        gpu_b=b["run"].get("gpu"),
        **problem_args(a["run"], b["run"]),
    )


def problem_args(run_a: Mapping[str, Any], run_b: Mapping[str, Any]) -> dict[str, Any]:
    """compare_runs' problem arguments from two run rows (runs recorded before workloads were qr_v2)."""
    return {
        "problem_a": run_a.get("problem"),
        "problem_b": run_b.get("problem"),
        "problem_hash_a": run_a.get("problem_sha256"),
        "problem_hash_b": run_b.get("problem_sha256"),
    }


def paired_cases(pair: Mapping[str, pd.DataFrame], *, min_effect: float = 0.02) -> list[PairedCase]:
    """Per case of an A/B session (Store.pair_runs), in case order: the paired verdict on the per-round ratios
    of B's mean to A's, over the rounds in which both sides passed that case."""
    runs, cases = pair["runs"], pair["cases"]
    side = {r: (s, int(k)) for r, s, k in zip(runs["run_id"], runs["pair_side"], runs["pair_round"], strict=True)}
    means: dict[tuple[str, int, str], float] = {}
    labels: list[str] = []
    for run_id, label, ok, mean in zip(cases["run_id"], cases["label"], cases["passed"], cases["mean_us"], strict=True):
        if label not in labels:
            labels.append(label)
        if bool(ok) and is_num(mean) and mean > 0 and run_id in side:
            means[(side[run_id][0], side[run_id][1], label)] = float(mean)
    rounds = sorted({k for _, k in side.values()})
    out = []
    for label in labels:
        ratios = [means[("B", k, label)] / means[("A", k, label)] for k in rounds
                  if ("A", k, label) in means and ("B", k, label) in means]  # fmt: skip
        out.append(paired_case(label, ratios, min_effect=min_effect))
    return out


FIDELITY_TOLERANCE = 0.02  # how far the tracker may read from the contest before the paired test calls it off
READS = {"faster": "low", "slower": "high", "same": "same", "n/a": "n/a"}  # paired verdict -> tracker reads


def fidelity_cases(pair: Mapping[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """Per case of a fidelity session (side A: the contest's method, B: the tracker's; Store.pair_runs): the
    contest's min and max of its round means, the tracker's median of its round means, and whether it is inside;
    and the paired test on the per-round ratios tracker / contest (`reads`: low, high, same or n/a), which says
    whether the tracker is off by more than FIDELITY_TOLERANCE where the rounds' spread makes min..max a coin
    toss (launch-bound cases move 15% between processes)."""
    paired = {c.case: c for c in paired_cases(pair, min_effect=FIDELITY_TOLERANCE)}
    runs, cases = pair["runs"], pair["cases"]
    side = dict(zip(runs["run_id"], runs["pair_side"], strict=True))
    means: dict[tuple[str, str], list[float]] = {}
    labels: list[str] = []
    for run_id, label, ok, mean in zip(cases["run_id"], cases["label"], cases["passed"], cases["mean_us"], strict=True):
        if label not in labels:
            labels.append(label)
        if bool(ok) and is_num(mean) and run_id in side:
            means.setdefault((side[run_id], label), []).append(float(mean))
    out = []
    for label in labels:
        contest, tracker = means.get(("A", label), []), means.get(("B", label), [])
        lo, hi = (min(contest), max(contest)) if contest else (None, None)
        median = float(np.median(tracker)) if tracker else None
        inside = None if lo is None or median is None else lo <= median <= hi
        p = paired[label]
        out.append({"case": label, "contest_min_us": lo, "contest_max_us": hi, "contest_means_us": contest,
                    "tracker_median_us": median, "tracker_means_us": tracker, "inside": inside,
                    "ratio": p.ratio, "ci_low": p.ci_low, "ci_high": p.ci_high, "reads": READS[p.verdict],
                    "ratios": list(p.ratios)})  # fmt: skip
    return out


# -------------------------------------------------------------------------------------------- regressions


ABSENT = "absent"  # status of a case a run did not include


def history_points(hist: Mapping[str, pd.DataFrame]) -> dict[str, list[HistoryPoint]]:
    """Per case label, one HistoryPoint per run of the history (oldest first); failed runs are kept as such."""
    runs, cases, samples = hist["runs"], hist["cases"], hist["samples"]
    sample_map = {(r, c): s for r, c, s in zip(samples["run_id"], samples["case_idx"], samples["samples"], strict=True)}
    rows: dict[tuple[str, str], tuple[int, bool, float | None]] = {}
    for run_id, label, idx, ok, mean in zip(
        cases["run_id"], cases["label"], cases["case_idx"], cases["passed"], cases["mean_us"], strict=True
    ):
        rows.setdefault((run_id, label), (idx, bool(ok), float(mean) if is_num(mean) else None))
    labels: list[str] = list(dict.fromkeys(cases["label"]))
    out: dict[str, list[HistoryPoint]] = {label: [] for label in labels}
    for run_id, status in zip(runs["run_id"], runs["status"], strict=True):
        not_passed = status if status != "passed" else "failed"
        for label in labels:
            row = rows.get((run_id, label))
            if row is None:  # the run did not include this case (--cases): no result, not a failure
                out[label].append(HistoryPoint(run_id, None, (), ABSENT))
                continue
            idx, ok, mean = row
            got = sample_map.get((run_id, idx))
            out[label].append(
                HistoryPoint(
                    run_id,
                    mean,
                    got if got is not None else (),
                    "passed" if ok and status == "passed" else not_passed,
                )
            )
    return out


def without_samples(points: Mapping[str, Sequence[HistoryPoint]]) -> dict[str, list[HistoryPoint]]:
    return {label: [HistoryPoint(p.run_id, p.mean, (), p.status) for p in pts] for label, pts in points.items()}


def detect_all(points: Mapping[str, Sequence[HistoryPoint]]) -> dict[str, list[ChangePoint]]:
    return {label: detect_changes(label, pts) for label, pts in points.items()}


def run_before(points: Sequence[HistoryPoint], cp: ChangePoint) -> str | None:
    """The last good run before a change point: the A side of the compare that shows the change."""
    return next(
        (p.run_id for p in reversed(points[: cp.index]) if p.status == "passed" and p.mean is not None and p.mean > 0),
        None,
    )


def regression_table(
    changes: Mapping[str, Sequence[ChangePoint]],
    points: Mapping[str, Sequence[HistoryPoint]],
    runs: pd.DataFrame,
    *,
    kinds: Sequence[str] = ("regression",),
) -> pd.DataFrame:
    """Case, before, after, factor, the run that introduced it, and a compare link (last good run vs that run)."""
    info = runs.set_index("run_id")
    rows = []
    for label, cps in changes.items():
        pts = points[label]
        for cp in cps:
            if cp.kind not in kinds:
                continue
            before_run = run_before(pts, cp)
            meta = info.loc[cp.run_id] if cp.run_id in info.index else None
            rows.append(
                {
                    "case": label,
                    "kind": cp.kind,
                    "before (µs)": cp.before,
                    "after (µs)": cp.after,
                    "factor": cp.factor,
                    "run": cp.run_id,
                    "variant": None if meta is None else meta["variant"],
                    "started": None if meta is None else meta["started_at"],
                    "run before": before_run,
                    "compare": f"compare?a={before_run}&b={cp.run_id}" if before_run else None,
                }
            )
    df = pd.DataFrame(rows)
    if not df.empty:
        df = df.sort_values("factor", ascending=False, key=lambda s: (s.map(math.log)).abs()).reset_index(drop=True)
    return df


def coverage(cmp: Any, run_a: Mapping[str, Any], run_b: Mapping[str, Any]) -> dict[str, Any]:
    """What a comparison covers: the cases timed in both runs (the ones the geomean ratio is over), those timed in
    one only, and one line that says why when the runs' modes or case sets differ."""
    both = [c.case for c in cmp.cases if c.ratio is not None]
    only_a = [c.case for c in cmp.cases if c.mean_a is not None and c.mean_b is None]
    only_b = [c.case for c in cmp.cases if c.mean_b is not None and c.mean_a is None]
    untimed = [side for side, r in (("A", run_a), ("B", run_b)) if r.get("mode") == "test"]
    if untimed:
        what = "is a test run" if len(untimed) == 1 else "are test runs"
        line = (f"{' and '.join(untimed)} {what} (correctness cases, untimed): no case has timings in both, so "
                "there is no ratio; each run's checks are on its Run page (`show RUN`).")  # fmt: skip
    elif only_a or only_b or (run_a.get("suite"), run_a.get("mode")) != (run_b.get("suite"), run_b.get("mode")):
        line = (f"{len(both)} of {len(cmp.cases)} cases are timed in both runs ({run_a.get('suite')}/"
                f"{run_a.get('mode')} vs {run_b.get('suite')}/{run_b.get('mode')}); {len(only_a)} only in A, "
                f"{len(only_b)} only in B.")  # fmt: skip
    else:
        line = None
    named = ", ".join(both) if len(both) <= 4 else f"{len(both)} cases"
    over = (f"over {named}" if len(both) < len(cmp.cases)
            else "over its one case" if len(both) == 1 else f"over all {len(both)} cases")  # fmt: skip
    return {"both": both, "only_a": only_a, "only_b": only_b, "line": line, "ratio_over": over}
