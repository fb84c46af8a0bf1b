"""The leaderboard's heatmap: cells coloured by their ratio to the best in the column (pandas Styler, no
matplotlib)."""

from __future__ import annotations

import math
import re
from collections import Counter

import pandas as pd

from pages.ui.tables import fmt_us


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


SHAPE = re.compile(r"(\d+)x(\d+)")  # a case label's first word, "640x512": batch x n


def case_headers(cases: list[str]) -> dict[str, str]:
    """Short column headers for the board's cases, so that its case columns fit a window (a whole label as
    "640x512 c2 dense (µs)" made only five of twelve visible at 1440 px): the case's shape, "640×512", and where
    several cases share a shape, its kind too (the label's last word, "640×512 mixed"), except the commonest kind
    (qr_v2's "dense"). A label that does not start with a shape (a problem folder's "size=1024"), or one whose short
    header would still be another's, keeps its whole label. The page puts the whole label in the column's help."""
    words = {c: str(c).split() for c in cases}
    shapes = {c: SHAPE.sub(r"\1×\2", w[0]) if w and SHAPE.fullmatch(w[0]) else None for c, w in words.items()}
    sharing = Counter(shapes.values())
    kinds = Counter(w[-1] for w in words.values() if len(w) > 1)
    commonest = kinds.most_common(1)[0][0] if kinds else None
    short = {}
    for c, shape in shapes.items():
        kind = words[c][-1] if len(words[c]) > 1 else None
        if shape is None:
            short[c] = str(c)
        elif sharing[shape] == 1 or kind in (None, commonest):
            short[c] = shape
        else:
            short[c] = f"{shape} {kind}"
    taken = Counter(short.values())
    return {c: h if taken[h] == 1 else str(c) for c, h in short.items()}


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
    # The Styler's text is what the table shows: whole µs from 100 µs on (fmt_us, as the other pages), so a column
    # is as narrow as its header; a blank where a variant has no passed result.
    numbers = {c: fmt_us for c in ("geomean (µs)", *cases)}
    return shown.style.apply(lambda _: css, axis=None).format(numbers, na_rep="")
