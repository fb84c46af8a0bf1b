"""Whether two sides of a comparison ran in the same GPU state: warnings from the stored per-case NVML columns.

A difference between two runs is the kernels' only if the device ran both at the same clocks and did not slow
either down; a GPU that idles at a low clock between launch-bound calls, or hits its power or thermal limit,
moves the timings by more than the effects Compare looks for. Pure functions over stored rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracker.analysis.series import case_notes, is_num, rows_by_label, run_before
from tracker.analysis.stats import ChangePoint, HistoryPoint
from tracker.common.lazy import pd
from tracker.store.schema import SLOWDOWNS

CLOCK_TOLERANCE = 0.05  # medians this far apart are two clock states (boost steps are ~15 MHz of ~1,980)
CLOCKS = (("sm_mhz", "SM clock"), ("mem_mhz", "memory clock"))


def slowdowns(row: Mapping[str, Any]) -> list[str]:
    """The throttle reasons of one case that lowered its clocks under load (power, thermal, hardware)."""
    text = row.get("throttle")
    return [n for n in text.split(",") if n in SLOWDOWNS] if isinstance(text, str) else []


def state_note(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """Why the GPU state of two case rows makes their comparison doubtful, or None (also when unsampled): a clock
    difference, or throttling (of both sides alike: said once, as such, not as a difference)."""
    slow = {side: slowdowns(row) for side, row in (("A", a), ("B", b))}
    if slow["A"] and slow["A"] == slow["B"]:
        parts = [f"both throttled ({', '.join(slow['A'])})"]
    else:
        parts = [f"{side} throttled ({', '.join(s)})" for side, s in slow.items() if s]
    for column, name in CLOCKS:
        ma, mb = a.get(f"{column}_median"), b.get(f"{column}_median")
        if is_num(ma) and is_num(mb) and abs(ma - mb) > CLOCK_TOLERANCE * max(ma, mb):
            parts.append(f"{name} {ma:,.0f} vs {mb:,.0f} MHz (median)")
    return "; ".join(parts) or None


def compare_notes(cases_a: pd.DataFrame, cases_b: pd.DataFrame) -> list[dict[str, str]]:
    """Per case both runs have, in A's order: {case, note} where their GPU states differ or either throttled."""
    return case_notes(cases_a, cases_b, state_note)


def change_point_note(
    cp: ChangePoint, points: Sequence[HistoryPoint], states: Mapping[tuple[str, str], Mapping[str, Any]]
) -> str | None:
    """The GPU-state note between a change point's run and the last good run before it (what Compare opens)."""
    before = run_before(points, cp)
    if before is None:
        return None
    a, b = states.get((before, cp.case)), states.get((cp.run_id, cp.case))
    return state_note(a, b) if a is not None and b is not None else None


def states_by_run_case(rows: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """{(run_id, case label): row} from Store.gpu_states."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for run_id, group in rows.groupby("run_id", sort=False):
        for label, row in rows_by_label(group).items():
            out[(str(run_id), label)] = row
    return out


def change_point_runs(
    changes: Mapping[str, Iterable[ChangePoint]], points: Mapping[str, Sequence[HistoryPoint]]
) -> tuple[str, ...]:
    """The runs change_point_notes reads: each change point's run and the last good run before it (so a page
    reads the GPU state of a handful of runs, not of its whole history)."""
    runs = {cp.run_id for cps in changes.values() for cp in cps}
    runs |= {r for label, cps in changes.items() for cp in cps if (r := run_before(points[label], cp)) is not None}
    return tuple(sorted(runs))


def change_point_notes(
    changes: Mapping[str, Iterable[ChangePoint]],
    points: Mapping[str, Sequence[HistoryPoint]],
    states: Mapping[tuple[str, str], Mapping[str, Any]],
) -> dict[tuple[str, str], str]:
    """{(case, run_id): note} for the change points whose two sides ran in different GPU states."""
    out = {}
    for label, cps in changes.items():
        for cp in cps:
            note = change_point_note(cp, points[label], states)
            if note:
                out[(label, cp.run_id)] = note
    return out
