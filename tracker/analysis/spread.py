"""Where two runs' means differ by how far each mean sits above its best repetition, not by the best itself.

On a launch-bound case the host's pace decides how far a run's mean sits above its fastest repetition, and that
pace moves from one process to the next. fused_wy's 20x32 read means of 21 to 36 µs in H200 runs of one source
while its best repetition stayed at 19-22 µs. So two runs of different sessions can differ there by far more
than their code does, with a confidence interval that shrinks with each run's own samples and never sees it.
Over the shipped fused_wy runs (153 pairs a case, one GPU model), this note fell on 20x32 in 36 pairs, on one
640x512 case in 12 (bimodal between processes) and on no other case. Pure functions over stored case rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tracker.analysis.series import case_notes, is_num
from tracker.common.lazy import pd

# The two sides' distances of mean above best differ by at least this factor, and by more than their bests do.
SPREAD_FACTOR = 1.10


def spread_note(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """Why the mean ratio of two case rows says more about the two processes than the kernels, or None."""
    values = [row.get(key) for row in (a, b) for key in ("mean_us", "best_us")]
    if not all(is_num(v) and v > 0 for v in values):
        return None
    mean_a, best_a, mean_b, best_b = values
    above_a, above_b = mean_a / best_a, mean_b / best_b
    apart, bests = math.log(above_b / above_a), math.log(best_b / best_a)
    if abs(apart) < math.log(SPREAD_FACTOR) or abs(apart) <= abs(bests):
        return None
    return (
        f"B/A {mean_b / mean_a:.3f} in the means but {best_b / best_a:.3f} in the best repetitions: A's mean sits "
        f"{above_a:.2f}x above its best, B's {above_b:.2f}x. That distance moves between processes on a "
        "launch-bound case; tracker ab pairs the two in one session"
    )


def compare_notes(cases_a: pd.DataFrame, cases_b: pd.DataFrame) -> list[dict[str, str]]:
    """Per case both runs have, in A's order: {case, note} where the means differ mostly by their spread."""
    return case_notes(cases_a, cases_b, spread_note)
