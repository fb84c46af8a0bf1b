"""Where a variant's geomean goes: per case its weight in the log-geomean, the best mean any variant with a passed
run reached there (and which), the ratio to it, and the geomean that best-per-case would give."""

from __future__ import annotations

import math
from typing import Any

from tracker.common.errors import InputError
from tracker.common.lazy import pd


def _clean(x: Any) -> Any:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return x.item() if hasattr(x, "item") else x


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def case_gaps(data: dict[str, pd.DataFrame], variant: str | None = None) -> dict[str, Any]:
    """From Store.leaderboard_cells: the gaps of `variant` (default: the one with the best passed geomean).

    Each variant's cell on a case is its best passed mean there (as on the Leaderboard). The best per case is taken
    over variants that have at least one passed run. `log_share` is the case's part of the sum of log means (µs),
    i.e. of the log-geomean; `gap_share` its part of log(geomean / best-per-case geomean): where the time to win
    back is. Raises ValueError for an unknown variant or when no variant has passed."""
    variants, cells = data["variants"], data["cells"]
    passed = variants[variants["best_geomean_us"].notna()] if not variants.empty else variants
    if passed.empty:
        raise InputError("no variant has a passed run of every case (a geomean) in this suite, mode and GPU")
    if variant is None:
        row = passed.loc[passed["best_geomean_us"].idxmin()]
    else:
        match = variants[variants["variant"] == variant]
        if match.empty:
            names = ", ".join(sorted(map(str, variants["variant"]))[:20])
            raise InputError(f"no variant {variant!r} in this suite, mode and GPU; variants: {names}")
        row = match.iloc[0]
    sha = row["variant_sha256"]
    names = variants.set_index("variant_sha256")["variant"]
    pool = cells[cells["variant_sha256"].isin(set(passed["variant_sha256"]))]
    order = pool.groupby("label")["case_idx"].min().sort_values().index.tolist()
    best = pool.loc[pool.groupby("label")["best_us"].idxmin()].set_index("label")
    own = cells[cells["variant_sha256"] == sha].set_index("label")
    cases = []
    for label in order:
        b = best.loc[label]
        mine = own.loc[label] if label in own.index else None
        mean = _clean(float(mine["best_us"])) if mine is not None else None
        ratio = mean / float(b["best_us"]) if mean else None
        cases.append(
            {
                "case_idx": int(b["case_idx"]),
                "case": label,
                "mean_us": mean,
                "run_id": mine["run_id"] if mine is not None else None,
                "best_us": float(b["best_us"]),
                "best_variant": names.get(b["variant_sha256"]),
                "best_run": b["run_id"],
                "ratio_to_best": ratio,
            }
        )
    complete = all(c["mean_us"] for c in cases)
    logs = [math.log(c["mean_us"]) for c in cases] if complete else []
    gaps = [math.log(c["ratio_to_best"]) for c in cases] if complete else []
    for i, c in enumerate(cases):
        c["log_share"] = logs[i] / sum(logs) if logs and sum(logs) else None
        c["gap_share"] = gaps[i] / sum(gaps) if gaps and sum(gaps) > 0 else None
    geomean = _geomean([c["mean_us"] for c in cases]) if complete else None
    ideal = _geomean([c["best_us"] for c in cases])
    return {
        "variant": row["variant"],
        "best_run": _clean(row["best_run"]),
        "best_geomean_us": _clean(row["best_geomean_us"]),
        "cells_geomean_us": geomean,  # of the cells above, which may come from different runs
        "best_per_case_geomean_us": ideal,
        "ratio_to_best_per_case": geomean / ideal if geomean and ideal else None,
        "missing_cases": [c["case"] for c in cases if not c["mean_us"]],
        "cases": cases,
    }
