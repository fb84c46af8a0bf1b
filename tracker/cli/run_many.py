"""`run` of several variants (paths, folders, --glob, --pending) one after the other, with a summary."""

from __future__ import annotations

import argparse
import json
import sys

from tracker.capture.record import run_summary
from tracker.cli.common import fmt_us, print_columns, time_column


def run_many(args: argparse.Namespace, requests: list) -> int:
    """Run the requests (tracker.cli.run.run_requests) one after the other, a line each, then the summary."""
    from tracker.capture.runner import run_variant
    from tracker.cli.deadends import dead_end_warnings

    dead_end_warnings(args, [r.path for r in requests if r.recorded_path is None])  # not --pending's snapshots
    summaries = []
    for i, req in enumerate(requests, 1):
        outcome = run_variant(req)
        summary = {"variant": req.name, "path": outcome.record.run.path, **run_summary(outcome)}
        summaries.append(summary)
        print(
            f"[{i}/{len(requests)}] {req.name}: {summary['status']} run {summary['run_id']} "
            f"geomean {fmt_us(summary['geomean_us'])}" + (f" ({summary['error']})" if summary["error"] else ""),
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(summaries, default=str))
    else:
        if summaries:
            print_columns(
                [
                    ("variant", [s["variant"] for s in summaries]),
                    ("run", [s.get("run_id") or "-" for s in summaries]),
                    ("status", [s["status"] for s in summaries]),
                    time_column("geomean", [s.get("geomean_us") for s in summaries]),
                    ("error", [(s.get("error") or "")[:70] for s in summaries]),
                ]
            )
    ok = all(s["status"] in ("passed", "skipped") for s in summaries)
    return 0 if ok else 1
