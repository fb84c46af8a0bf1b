"""Timing cross-checks: flags for a case whose reported time is less than its work can take, than the same
call takes on fresh inputs of the same shapes, or whose inputs took the kernel's process far longer to make than
the checker.

The kernel's process measures its own time (CUDA events or the CPU clock), so a kernel that patches the timer,
forges its events or does the work outside the timed window can report what it likes. Three checks lean on the
checker's clock or on nothing at all: a floor from the work (no device computes a case's FLOPs or moves its bytes
faster than tracker.workloads.base.PEAKS, far above any GPU's peak), the checker's wall clock between repetitions
(it cannot be shorter than the kernel's real time; a reported time far below it on a long repetition is
suspicious), and the checker's time to make the fresh inputs that the kernel's process made inside a timed window.
They catch gross forgeries: hidden work smaller than the noise between repetitions is not seen.
"""

from __future__ import annotations

from typing import Any

from tracker.capture.evidence import FRESH_PASS
from tracker.workloads.base import floor_us

GAP_FACTOR = 20.0  # the checker's wall time per call this many times the reported time ...
GAP_MIN_US = 20_000.0  # ... on a repetition of at least this long (launch-bound cases are mostly overhead)
# Slower than any copy of outputs to the checker (pinned on a GPU: ~50 GB/s each way; a CPU's memcpy: several GB/s),
# so what is left of a gap is not hand-off.
HANDOFF_BYTES_PER_S = 2e9
# The harness's recheck that the timing process runs after each repetition (on a GPU) takes this many times what the
# checker measured it to take, at most: both processes share the device meanwhile.
RECHECK_MARGIN = 2.0
FRESH_FACTOR = 10.0  # a call on fresh inputs (other values) this many times slower than the loop's median ...
FRESH_MIN_US = 10.0  # ... and by at least this much
# Making a call's fresh inputs took the kernel's process more than MADE_MARGIN times what it took the checker, and
# the excess is FRESH_FACTOR times the loop's median and at least MADE_MIN_US for all the call's inputs. On a CPU the
# two processes share the cores and the scheduler's stalls reach tens of ms, so only more than that is seen there.
MADE_MARGIN = 2.0
MADE_MIN_US = {"cuda": 1_000.0, "cpu": 50_000.0}


def flags(cases: list[dict[str, Any]], mode: str, device: str) -> list[dict[str, Any]]:
    """Flags (the static scan's shape) for cases whose timings the work or the wall clock contradict."""
    if mode == "test":
        return []
    out = []
    for case in cases:
        mean, best = case.get("mean_us"), case.get("best_us")
        if mean is None or not case.get("passed"):
            continue
        floor = floor_us(case.get("flops"), case.get("bytes"), device)
        if best is not None and best < floor:
            out.append({
                "code": "timing-below-work", "line": 0, "severity": "hack",
                "message": f"case {case['case_idx']}: a repetition reported {best:.3g} us per call, less than the "
                           f"{floor:.3g} us its work takes at any device's peak: the timing cannot be real",
            })  # fmt: skip
        fresh, median = case.get("fresh_us"), case.get("median_us")
        if fresh and median is not None and fresh > FRESH_FACTOR * median and fresh - median > FRESH_MIN_US:
            out.append({
                "code": "identity-cache", "line": 0, "severity": "hack",
                "message": f"case {case['case_idx']}: a call on fresh inputs of the same shapes took {fresh:.3g} us "
                           f"per call against {median:.3g} us in the loop over the same input objects: the kernel "
                           "seems to reuse results it keyed by the input (its object or its values)",
            })  # fmt: skip
        wall = case.get("wall_us")
        if wall and wall > GAP_FACTOR * mean and wall * (case.get("inputs") or 1) > GAP_MIN_US:
            out.append({
                "code": "timing-gap", "line": 0, "severity": "hack",
                "message": f"case {case['case_idx']}: the checker saw {wall:.3g} us per call between repetitions "
                           f"against {mean:.3g} us reported: work may happen outside the timed window",
            })  # fmt: skip
    return out


def made_per_call(verdicts: list[dict[str, Any]]) -> list[float]:
    """Microseconds per input the checker took to make the inputs of each of a case's calls on fresh inputs, in the
    order of those calls (none where it did not say: an old checker, or no call came)."""
    out = []
    for v in verdicts:
        seconds, inputs = v.get("made_s"), v.get("inputs")
        if v.get("rep") == FRESH_PASS and isinstance(seconds, int | float) and type(inputs) is int and inputs > 0:
            out.append(float(seconds) / inputs * 1e6)
    return out


def made_flags(events: list[dict[str, Any]], mode: str, device: str) -> list[dict[str, Any]]:
    """`hidden-work` for a passed case whose fresh inputs took the kernel's process far longer to make than they
    took the checker, in every call on fresh inputs: the inputs are made in the kernel's process, so a hook on the
    torch functions that make them can compute their outputs there, outside every timed call, and the call then
    only looks them up. The worker makes them inside the fresh calls' timed windows (`made_us`, its word, one per
    call), the checker makes the same ones on its own clock (`made_checker_us`, in the same order)."""
    if mode == "test":
        return []
    out = []
    for event in events:
        if event.get("event") != "case_done" or not event.get("passed"):
            continue
        made, checker, median = event.get("made_us"), event.get("made_checker_us"), event.get("median_us")
        if not isinstance(made, list) or not isinstance(checker, list) or not isinstance(median, int | float):
            continue
        pairs = [(m, c) for m, c in zip(made, checker, strict=False) if isinstance(m, int | float)]
        if not pairs:
            continue
        m, c = min(pairs, key=lambda p: p[0] - MADE_MARGIN * p[1])  # the call that says least: one stall is not it
        excess = m - MADE_MARGIN * c
        inputs = (event.get("case") or {}).get("inputs") or 1
        if excess > FRESH_FACTOR * median and excess * inputs > MADE_MIN_US["cuda" if device == "cuda" else "cpu"]:
            out.append({
                "code": "hidden-work", "line": 0, "severity": "hack",
                "message": f"case {event['case_idx']}: making the inputs of a call on fresh inputs took at least "
                           f"{m:.3g} us per call in the kernel's process against {c:.3g} us in the checker, "
                           f"while a call took {median:.3g} us: the kernel seems to compute while its inputs are made "
                           "(a hook on torch), outside the timed calls",
            })  # fmt: skip
    return out


def wall_per_call(verdicts: list[dict[str, Any]], inputs: int) -> float | None:
    """Median time between one repetition's outputs reaching the checker and the next's, less the checking (or
    the harness's recheck in the timing process, which runs meanwhile, as the checker timed it: `harness_recheck_s` of
    a case's first repetition) and a generous allowance for handing the outputs over: more than the repetition
    took, measured outside the kernel's process. Microseconds per call; None with fewer than two timed
    repetitions."""
    timed = sorted((v for v in verdicts if v.get("rep", -1) >= 0), key=lambda v: v["rep"])
    recheck = max((float(v.get("harness_recheck_s") or 0.0) for v in timed), default=0.0) * RECHECK_MARGIN
    gaps = []
    for a, b in zip(timed, timed[1:], strict=False):
        try:
            handoff = float(b.get("bytes") or 0) / HANDOFF_BYTES_PER_S
            busy = max(float(a["check_s"]), recheck)
            gaps.append(max(0.0, float(b["received_s"]) - float(a["received_s"]) - busy - handoff))
        except (KeyError, TypeError, ValueError):
            continue
    if not gaps:
        return None
    gaps.sort()
    median = gaps[len(gaps) // 2]
    return median / max(inputs, 1) * 1e6 if median > 0 else None  # 0: the allowance covered it all, no bound
