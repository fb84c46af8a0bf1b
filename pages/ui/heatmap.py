"""The leaderboard's heatmap: cells coloured by their ratio to the best in the column (pandas Styler, no
matplotlib)."""

from __future__ import annotations

import math

import pandas as pd


def leaderboard_frame(table: pd.DataFrame, cases: list[str]) -> pd.DataFrame:
    """The displayed columns: variant and geomean, then one column per case (what the board is for, so they come
    before the identity columns), then a run link, runs (finished, and of those passed), family and path."""
    out = pd.DataFrame({"variant": table["variant"].to_numpy(), "geomean (µs)": table["best_geomean_us"].to_numpy()})
    for case in cases:
        out[case] = table[case].to_numpy()
    out["run"] = ("run?id=" + table["best_run"].fillna(table["latest_run"])).to_numpy()
    out["runs"] = table["runs"].to_numpy()
    out["passed"] = table["passed"].to_numpy()
    out["family"] = table["family"].to_numpy()
    out["path"] = table["path"].to_numpy()
    return out


def colour(ratio: float) -> str:
    """Green at the column's best, through yellow at 1.5x, to red at 2x and beyond."""
    if ratio is None or (isinstance(ratio, float) and math.isnan(ratio)):
        return ""
    x = min(max(math.log2(ratio), 0.0), 1.0)  # 0 at the best, 1 at twice as slow
    hue = 120 * (1 - x)
    return f"background-color: hsl({hue:.0f}, 70%, 82%); color: #111"


def style(shown: pd.DataFrame, ratio: pd.DataFrame, cases: list[str]):
    """A Styler colouring each case cell by its ratio (same row order as `shown`)."""
    css = pd.DataFrame("", index=shown.index, columns=shown.columns)
    for case in cases:
        css[case] = [colour(r) for r in ratio[case].to_numpy()]
    # The Styler's text is what the table shows: one decimal, and a blank where a variant has no passed result.
    numbers = {c: "{:,.1f}" for c in ("geomean (µs)", *cases)}
    return shown.style.apply(lambda _: css, axis=None).format(numbers, na_rep="")
