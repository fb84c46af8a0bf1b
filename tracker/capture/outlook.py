"""How long a run should take, from the store's earlier passed runs of the same source, suite, mode, method and
cases, said before it starts: a session's expected length (`ab`, `fidelity`), and a warning where --timeout is
shorter than such runs took, before the device time is spent on runs that will be cut."""

from __future__ import annotations

import statistics
from pathlib import Path

from tracker.capture.progress import fmt_seconds
from tracker.capture.record import RunRequest
from tracker.common.gitinfo import source_hash
from tracker.common.text import counted
from tracker.store import Store

TIMEOUT_MARGIN = 1.1  # a timeout within 10% of what such runs took is too tight to trust


def earlier_seconds(req: RunRequest) -> list[tuple[float, float]]:
    """(wall seconds, seconds after compiling) of the earlier passed runs like this one, newest first; [] when there
    are none or the store cannot be read now. Advice only: whatever the store is (busy, old, damaged), the run
    itself goes ahead and meets the store's own errors where it writes."""
    try:
        cases = req.cases or list(range(len(req.suite_cases())))
        sha = source_hash(Path(req.path).read_text())
        return Store(req.store).passed_run_seconds(sha, req.suite, req.mode, req.method, cases)
    except Exception:  # noqa: BLE001 - see above
        return []


def _span(seconds: list[float]) -> str:
    low, high = min(seconds), max(seconds)
    took = f"{low:.3g} s" if f"{low:.3g}" == f"{high:.3g}" else f"{low:.3g}-{high:.3g} s"
    return f"{took} ({counted(len(seconds), 'earlier run')})"


def timeout_warning(label: str, req: RunRequest, earlier: list[tuple[float, float]]) -> str | None:
    """A warning when the earlier runs' time after compiling (what --timeout bounds) reaches the timeout."""
    timed = [t for _, t in earlier]
    if timed and req.timeout < TIMEOUT_MARGIN * statistics.median(timed):
        return (
            f"warning: {label} ran {_span(timed)} after compiling with these cases; --timeout {req.timeout:g} s will "
            "likely cut it: raise --timeout or run fewer --cases"
        )
    return None


def session_lines(sides: dict[str, RunRequest], rounds: int) -> list[str]:
    """What a session of `rounds` rounds (one run of each side a round) should take, per side and in all when every
    side has run before, and a warning per side whose earlier runs took about its --timeout or longer."""
    parts, warnings, total, known = [], [], 0.0, True
    for side, req in sides.items():
        earlier = earlier_seconds(req)
        known = known and bool(earlier)
        if earlier:
            wall = statistics.median(w for w, _ in earlier)
            total += rounds * wall
            parts.append(f"side {side} about {wall:.0f} s a run ({len(earlier)} earlier)")
        else:
            parts.append(f"side {side} not run with these cases before")
        warning = timeout_warning(f"side {side}", req, earlier)
        if warning:
            warnings.append(warning)
    runs = rounds * len(sides)
    head = f"{runs} runs" + (f", about {fmt_seconds(total)}" if known else "")  # minutes alone read "about 0 min"
    return [f"{head}: {', '.join(parts)}", *warnings]
