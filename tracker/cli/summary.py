"""A run's summary: the JSON document `run --json` prints, and its table for people."""

from __future__ import annotations

from typing import Any

from tracker.capture.record import run_summary  # noqa: F401 - the summary is the capture layer's; printed here
from tracker.cli.common import fmt_us, print_cases


def print_run(summary: dict[str, Any]) -> None:
    print_cases(summary["cases"])
    print(
        f"run {summary['run_id']}: {summary['status']} on {summary['gpu'] or '?'}, suite {summary['suite']}, "
        f"mode {summary['mode']}, geomean {fmt_us(summary['geomean_us'])}"
    )
    for key in ("error", "warnings"):
        if summary.get(key):
            print(f"{key}: {summary[key]}")
    for flag in summary.get("flags") or []:
        print(f"flag: {flag['code']} (line {flag['line']}): {flag['message']}")
    if summary.get("shared_device"):
        print("warning: the device was shared with other work during this run (timings may be contended)")
