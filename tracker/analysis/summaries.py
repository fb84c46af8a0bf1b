"""Summaries over many runs: what changed since a time, the per-case leaderboard, the lineage tree.

Pure functions over the frames that tracker.store.Store's reads return; the CLI and the dashboard share them.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

import numpy as np

from tracker.analysis.series import detect_all, history_points, run_before
from tracker.common.errors import InputError
from tracker.common.lazy import pd
from tracker.common.vocabulary import DEFAULT_WORKLOAD

FAILURES = ("failed", "crashed", "timeout", "cancelled")
OVERALL = "overall"  # the case of a new best that is a run's geomean, not one case's mean
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """`30m`, `2h`, `1d`, `1w` back from now, or an ISO timestamp (UTC unless it says otherwise)."""
    now = now or dt.datetime.now(dt.UTC)
    m = _DURATION.match(text or "")
    if m:
        try:
            return now - dt.timedelta(**{_UNITS[m.group(2).lower()]: float(m.group(1))})
        except OverflowError:  # more than datetime reaches back (year 1)
            raise InputError(f"since {text!r} is out of range: it reaches back before the year 1") from None
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except (AttributeError, ValueError):
        raise InputError(f"since takes a duration like 30m, 2h, 1d or an ISO timestamp, not {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _clean(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if value is pd.NaT:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def _records(df: pd.DataFrame, cols: list[str]) -> list[dict[str, Any]]:
    return [{c: _clean(r[c]) for c in cols} for r in df.to_dict("records")]


def _best(row: dict[str, Any], case: str, value: float, before: Any) -> dict[str, Any]:
    keys = ("problem", "suite", "mode", "gpu", "run_id")
    return {"case": case, **{k: row[k] for k in keys}, "mean_us": value, "previous_best_us": before}


def since_summary(activity: dict[str, pd.DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """{runs, new_bests, regressions, failures, verdicts} from Store.since_activity.

    new_bests: per case (problem, suite, mode, GPU, case) a passed mean below every earlier one, and per context a
    geomean below every earlier one (case "overall"). regressions: the change points of kind regression that the
    Regressions view finds in a kernel file's history (tracker.analysis.series.detect_all) at one of the new runs:
    `baseline_run` the last good run before it, `mean_us`/`baseline_us` the levels after and before."""
    runs, cases = activity["runs"], activity["cases"]
    out: dict[str, list[dict[str, Any]]] = {
        "runs": _records(runs, ["run_id", "variant", "path", "status", "suite", "mode", "gpu", "geomean_us",
                                "started_at", "error"]),
    }  # fmt: skip
    bests: list[dict[str, Any]] = []
    # a best is a ranked result (passed, by the tracker's own method: store.reads.ranked_sql)
    timed = cases[cases["ranked"].fillna(False).astype(bool) & cases["mean_us"].notna()]
    if not timed.empty:
        idx = timed.groupby(["problem", "suite", "mode", "gpu", "label"], dropna=False)["mean_us"].idxmin()
        for row in timed.loc[idx].to_dict("records"):
            before = row["best_before_us"]
            if before is None or pd.isna(before) or row["mean_us"] < before:
                bests.append(_best(row, row["label"], row["mean_us"], before))
    geo = runs[runs["ranked"].fillna(False).astype(bool) & runs["geomean_us"].notna()]
    # per problem too (an older store's unrecorded problem is the built-in one): another's geomean is no baseline
    geo = geo.assign(problem=geo["problem"].fillna(DEFAULT_WORKLOAD))
    if not geo.empty:
        prior = activity["best_geomean"]
        for row in geo.loc[
            geo.groupby(["problem", "suite", "mode", "gpu"], dropna=False)["geomean_us"].idxmin()
        ].to_dict("records"):
            match = prior[
                (prior["problem"] == row["problem"]) & (prior["suite"] == row["suite"]) & (prior["mode"] == row["mode"])
                & ((prior["gpu"] == row["gpu"]) | (prior["gpu"].isna() & pd.isna(row["gpu"])))
            ]  # fmt: skip
            before = match["best_before_us"].min() if not match.empty else None
            if before is None or pd.isna(before) or row["geomean_us"] < before:
                bests.append(_best(row, OVERALL, row["geomean_us"], before))
    out["new_bests"] = [{k: _clean(v) for k, v in b.items()} for b in bests]
    regressions = []
    new = set(runs["run_id"])
    for path, hist in activity["histories"]:
        points = history_points(hist)
        for label, cps in detect_all(points).items():
            for cp in cps:
                if cp.kind == "regression" and cp.run_id in new:
                    regressions.append({"run_id": cp.run_id, "baseline_run": run_before(points[label], cp),
                                        "path": path, "case": label, "mean_us": cp.after, "baseline_us": cp.before,
                                        "factor": cp.factor})  # fmt: skip
    out["regressions"] = [{k: _clean(v) for k, v in r.items()} for r in regressions]
    failed = runs[runs["status"].isin(FAILURES)]
    out["failures"] = _records(failed, ["run_id", "variant", "path", "status", "error"])
    out["verdicts"] = _records(activity["verdicts"], ["run_id", "variant", "verdict", "reason", "created_at"])
    return out


def leaderboard(data: dict[str, pd.DataFrame], *, sort: str = "geomean") -> dict[str, pd.DataFrame]:
    """Pivot Store.leaderboard_cells: `table` one row per variant, one column per case (best passed mean, µs),
    `ratio` the same cells divided by the best in each column, `runs` the run of each cell, and `cases` the
    column order. Sorted by best geomean (else by the geometric mean of the ratios over the cases it has) or
    by the case named in `sort`."""
    variants, cells = data["variants"], data["cells"]
    if variants.empty:
        empty = pd.DataFrame()
        return {"table": empty, "ratio": empty, "runs": empty, "cases": []}
    order = cells.groupby("label")["case_idx"].min().sort_values().index.tolist() if not cells.empty else []
    means = cells.pivot(index="variant_sha256", columns="label", values="best_us").reindex(columns=order)
    run_ids = cells.pivot(index="variant_sha256", columns="label", values="run_id").reindex(columns=order)
    base = variants.set_index("variant_sha256")
    means = means.reindex(base.index)
    ratio = means / means.min(axis=0)
    logs = np.log(ratio.to_numpy(dtype=float))
    have = (~np.isnan(logs)).sum(axis=1)
    mean_log = np.divide(np.nansum(logs, axis=1), have, out=np.full(len(have), np.inf), where=have > 0)
    score = pd.Series(np.exp(mean_log), index=ratio.index)  # rows without any result score inf (last)
    key = base["best_geomean_us"].fillna(math.inf) if sort == "geomean" else means.get(sort, score)
    ordered = pd.DataFrame({"k": key, "s": score}).sort_values(["k", "s"]).index
    table = base.loc[
        ordered, ["variant", "path", "family", "runs", "passed", "best_geomean_us", "best_run", "latest_run"]
    ]
    table = table.join(means.loc[ordered])
    return {"table": table, "ratio": ratio.loc[ordered], "runs": run_ids.reindex(ordered), "cases": order}


def lineage_tree(nodes: pd.DataFrame) -> pd.DataFrame:
    """The nodes in depth-first order (children by time) with `depth` and the parent's name and best run.

    A parent outside the selection (another family) makes its child a root; a cycle is cut where it closes."""
    if nodes.empty:
        return nodes.assign(depth=[], parent_variant=[], parent_run=[])
    by_sha = nodes.set_index("sha256")
    children: dict[str | None, list[str]] = {}
    for row in nodes.to_dict("records"):
        parent = row["parent"] if isinstance(row["parent"], str) and row["parent"] in by_sha.index else None
        if parent == row["sha256"]:
            parent = None
        children.setdefault(parent, []).append(row["sha256"])
    order: list[tuple[str, int]] = []
    visited: set[str] = set()
    stack = [(sha, 0) for sha in reversed(children.get(None, []))]
    while stack:
        sha, depth = stack.pop()
        if sha in visited:
            continue
        visited.add(sha)
        order.append((sha, depth))
        stack += [(c, depth + 1) for c in reversed(children.get(sha, []))]
    order += [(sha, 0) for sha in by_sha.index if sha not in visited]  # parts of a cycle
    out = by_sha.loc[[sha for sha, _ in order]].reset_index()
    out["depth"] = [d for _, d in order]
    parents = out["parent"].where(out["parent"].isin(by_sha.index))
    out["parent_variant"] = parents.map(by_sha["variant"])
    best_or_latest = by_sha["best_run"].fillna(by_sha["latest_run"])
    out["parent_run"] = parents.map(best_or_latest)
    return out


def lineage_path(nodes: pd.DataFrame, sha256: str) -> list[str]:
    """The source hashes from the root of `sha256`'s lineage down to it (Store.lineage_nodes' parent links):
    the one line of descent a history follows, so siblings never make one series. A cycle stops the walk."""
    parent = dict(zip(nodes["sha256"], nodes["parent"], strict=True))
    path: list[str] = []
    sha: str | None = sha256
    while isinstance(sha, str) and sha not in path:
        path.append(sha)
        sha = parent.get(sha)
    return path[::-1]


def path_leaves(nodes: pd.DataFrame) -> list[str]:
    """The variants a lineage path can end at: those with a passed timed run, the most recently run first."""
    timed = nodes[nodes["last_timed_at"].notna()].sort_values("last_timed_at", ascending=False, kind="stable")
    return timed["sha256"].tolist()
