"""The context (GPU, suite, mode, family) a page or command opens on: one that has runs to show.

Every page and `leaderboard`/`lineage` take their choices from here, so a new run in another context (a CPU smoke
run beside H200 runs) never leaves a view on a combination without data. Choices are listed with the most
recently passed first (whole runs before runs of chosen cases); the first is the default, except that a preferred
value (the sidebar's GPU) comes first wherever it has runs."""

from __future__ import annotations

from typing import Any

from tracker.common.lazy import pd
from tracker.common.vocabulary import TIMED_MODES


def choices(
    contexts: pd.DataFrame,
    column: str,
    *,
    modes: tuple[str, ...] | None = None,
    prefer: str | None = None,
    loose: tuple[str, ...] = (),
    min_passed: int = 1,
    **fixed: Any,
) -> list[str]:
    """The values of `column` (gpu, suite, mode, family, problem) among the contexts of Store.run_contexts
    that match `fixed` (None: any) and `modes`: those with `min_passed` passed runs first (a history needs two
    points), ordered by their latest whole passed run (with a geomean), then by their latest passed run, then the
    others; `prefer` first when it is among them. Keys in `loose` are dropped from `fixed` when keeping them leaves
    nothing (a registered family without runs yet)."""
    for key in loose:
        if fixed.get(key) is not None and not choices(contexts, column, modes=modes, **fixed):
            fixed = {**fixed, key: None}
    rows = contexts
    if modes is not None:
        rows = rows[rows["mode"].isin(modes)]
    for key, value in fixed.items():
        if value is not None:
            rows = rows[rows[key] == value]
    rows = rows[rows[column].notna()]
    if rows.empty:
        return []
    agg = rows.groupby(column).agg(
        passed=("passed", "sum"), whole=("last_whole", "max"), last=("last_passed", "max"), runs=("runs", "sum")
    )
    agg["has_passed"] = agg["passed"] >= min_passed
    # Whole runs first: a GPU with a few newer runs of chosen cases (no geomean) would open the Leaderboard on
    # nothing to rank and the Experiments chart on no point.
    agg = agg.sort_values(["has_passed", "whole", "last", "runs"], ascending=False, na_position="last", kind="stable")
    out = [str(v) for v in agg.index]
    if prefer in out:
        out.remove(prefer)
        out.insert(0, prefer)
    return out


def default_context(
    contexts: pd.DataFrame,
    *,
    modes: tuple[str, ...] | None = TIMED_MODES,
    loose: tuple[str, ...] = (),
    **given: str | None,
) -> dict[str, str | None]:
    """GPU, then suite, problem and mode: a given value where there is one (None when the store has no such runs),
    else the first of the choices under the values given and those picked before. With modes=None and
    loose=("family",), a family's context as the Lineage page picks it (`lineage`, `variants`)."""
    out: dict[str, str | None] = {}
    for column in ("gpu", "suite", "problem", "mode"):
        others = {k: v for k, v in given.items() if k != column and k not in out}
        options = choices(contexts, column, modes=modes, loose=loose, **out, **others)
        wanted = given.get(column)
        out[column] = (wanted if wanted in options else None) if wanted is not None else next(iter(options), None)
    return out
