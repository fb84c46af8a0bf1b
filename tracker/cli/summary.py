"""A run's summary for people: the table of what `run --json` prints (tracker.capture.record.run_summary)."""

from __future__ import annotations

from typing import Any

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
    split = summary.get("time")
    if split:
        print(
            f"time in the cases: {split['cases_s']:.1f} s, of which timed {split['timed_s']:.1f} s, checking the "
            f"outputs {split['checking_s']:.1f} s"
            + (f" beside the harness's recheck {split['recheck_s']:.1f} s" if split.get("recheck_s") else "")
            + f", the rest {split['rest_s']:.1f} s (warm-up, first pass, handing outputs over)"
        )
    for flag in summary.get("flags") or []:
        print(f"flag: {flag['code']} (line {flag['line']}): {flag['message']}")
    if summary.get("shared_device"):
        print("warning: the device was shared with other work during this run (timings may be contended)")
