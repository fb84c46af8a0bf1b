"""A run's summary: the JSON document `run --json` prints, and its table for people."""

from __future__ import annotations

import json
from typing import Any

from tracker.cli.common import fmt_us, print_cases
from tracker.common.jsonfields import parse_flags
from tracker.common.vocabulary import CASE_STATS


def run_summary(outcome) -> dict[str, Any]:
    run = outcome.record.run
    return {
        "run_id": run["run_id"],
        "status": run["status"],
        "suite": run["suite"],
        "problem": run.get("problem"),
        "mode": run["mode"],
        "gpu": run.get("gpu"),
        "geomean_us": run.get("geomean_us"),
        "error": run.get("error"),
        "warnings": run.get("warnings"),
        "flags": parse_flags(run.get("flags"))[0],
        "compile_s": run.get("compile_s"),
        "shared_device": run.get("shared_device"),
        "side_file": str(outcome.pending.path) if outcome.pending else None,
        # Outside the store's side folder nothing brings the run in by itself: the whole record goes along.
        "record": json.loads(outcome.record.to_json()) if outcome.pending and outcome.pending.fallback else None,
        "unreadable_side_files": [{"path": str(p), "why": why} for p, why in outcome.flushed.unreadable],
        "cases": [
            {
                "case_idx": c["case_idx"],
                "spec": c["spec"],
                "passed": c["passed"],
                "message": c.get("message") or "",
                **{k: c.get(k) for k in CASE_STATS},
            }
            for c in outcome.record.cases
        ],
    }


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
