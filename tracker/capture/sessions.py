"""Sessions of runs on one device, round by round: two variants (`ab`, the Benchmark page's A/B jobs) or one
variant under two timing methods (`fidelity`). Per round one run of each side, A then B in even rounds and B then
A in odd ones, so neither side always runs second on a device the other just warmed."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

from tracker.capture import outlook, stopping
from tracker.capture.runner import RunOutcome, RunRequest, run_variant


def interleave(
    requests: dict[str, dict[str, Any]],
    rounds: int,
    on_event: Callable[[str, int, dict[str, Any]], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    first_round: int = 0,
) -> list[RunOutcome]:
    """The session's runs, in order, rounds first_round.. (a continued session goes on from its stored rounds);
    on_event(side, round, event) sees each run's events. Once should_cancel says so, the current run is recorded
    as cancelled and no further run starts."""
    outcomes: list[RunOutcome] = []
    last = first_round + rounds
    for k in range(first_round, last):
        for side in ("A", "B") if k % 2 == 0 else ("B", "A"):
            hook = None if on_event is None else (lambda event, s=side, r=k: on_event(s, r, event))
            outcome = run_variant(RunRequest(**requests[side], pair_round=k), hook, should_cancel)
            outcomes.append(outcome)
            print(f"round {k + 1}/{last}: {side} {outcome.run_id} {outcome.status}", file=sys.stderr)
            if should_cancel is not None and should_cancel():
                return outcomes
    return outcomes


def run_session(requests: dict[str, dict[str, Any]], rounds: int, first_round: int = 0) -> bool:
    """interleave() in the main thread of a command, after saying how long it should take (tracker.capture.outlook).
    False when a SIGTERM ended the session early (its runs so far are stored, the current one as cancelled), so the
    caller can still report what the rounds done say."""
    try:
        with stopping.session():  # before the outlook: a user who reads it and stops the session gets its report
            for line in outlook.session_lines({side: RunRequest(**req) for side, req in requests.items()}, rounds):
                print(line, file=sys.stderr)
            interleave(requests, rounds, first_round=first_round)
    except SystemExit as exc:
        if exc.code != 128 + signal.SIGTERM:
            raise
        return False
    return True
