"""`run --gpus/--cluster`: hand the run requests to the scale-out queue and report each run as it is recorded."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tracker.cli.common import UsageError


def run_queue_cli(args: argparse.Namespace, requests: list, bar) -> int:
    from tracker.capture.progress import QueueProgress
    from tracker.capture.record import queue_status, run_summary
    from tracker.cli.summary import print_run

    try:
        from tracker.capture import scaleout
    except ImportError as exc:
        hint = "pip install -r requirements.txt"
        raise UsageError(f"--gpus/--cluster need dask and distributed ({exc}); {hint}") from None
    if not args.cluster:
        try:
            scaleout.parse_gpus(args.gpus)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    total = sum(len(r.cases or r.suite_cases()) for r in requests)
    progress = QueueProgress([bar], total)

    def on_result(outcome) -> None:
        run = outcome.record.run
        print(f"recorded {run.variant} run {run.run_id}: {run.status}", file=sys.stderr)

    def on_event(msg: dict[str, Any]) -> None:
        if msg["event"] == "queue_submitted":
            print(f"{msg['runs']} run(s) queued on the Dask scheduler at {msg['address']}", file=sys.stderr)
        progress(msg)

    lost = None
    try:
        outcomes = scaleout.run_queue(
            requests,
            gpus=args.gpus,
            cluster=args.cluster,
            on_event=on_event,
            on_result=on_result,
        )
    except scaleout.SchedulerLost as exc:
        lost, outcomes = str(exc), exc.outcomes
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot reach the Dask scheduler at {args.cluster}: {exc}") from None
    finally:
        if bar is not None:
            bar.close()
    summaries = [run_summary(o) for o in outcomes]
    status = queue_status([s["status"] for s in summaries]) if not lost else "crashed"
    if args.json:
        print(json.dumps(summaries[0] if len(summaries) == 1 else summaries, default=str))
    else:
        for summary in summaries:
            print_run(summary)
    if lost:
        print(f"error: {lost} (the runs finished before were recorded; the others as crashed)", file=sys.stderr)
    return 0 if status == "passed" else 1
