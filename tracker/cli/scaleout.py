"""`run --gpus/--cluster`: hand the run requests to the scale-out queue and report each run as it is recorded."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tracker.cli.common import UsageError


class QueueProgress:
    """Folds the queue's task messages into one run-like progress stream (all cases of all runs)."""

    def __init__(self, sinks: list, total: int) -> None:
        self.sinks = [s for s in sinks if s is not None]
        self.total = total
        self.start = time.monotonic()

    def __call__(self, msg: dict[str, Any]) -> None:
        kind = msg["event"]
        if kind not in ("case_start", "case_done", "env"):
            return
        name = msg.get("variant", "?")
        event = {**msg, "total": self.total, "elapsed_s": time.monotonic() - self.start}
        if "spec" in msg:
            event["spec"] = f"{name}: {msg['spec']}"
        for sink in self.sinks:
            sink(event)


def queue_status(statuses: list[str]) -> str:
    """One status for the whole queue: passed only if every run passed, else the first other one."""
    return next((s for s in statuses if s != "passed"), "passed")


def run_queue_cli(args: argparse.Namespace, requests: list, bar, pfile, cancel_file: Path | None) -> int:
    from tracker.cli.summary import print_run, run_summary

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
    progress = QueueProgress([bar, pfile], total)

    def on_result(outcome) -> None:
        run = outcome.record.run
        print(f"recorded {run['variant']} run {run['run_id']}: {run['status']}", file=sys.stderr)

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
            should_cancel=(lambda: cancel_file.exists()) if cancel_file else None,
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
    if pfile is not None:
        first = next((s for s in summaries if s["status"] == status), summaries[0] if summaries else None)
        pfile.finish(status, first["run_id"] if first else None, lost or (first or {}).get("error"))
    if args.json:
        print(json.dumps(summaries[0] if len(summaries) == 1 else summaries, default=str))
    else:
        for summary in summaries:
            print_run(summary)
    if lost:
        print(f"error: {lost} (the runs finished before were recorded; the others as crashed)", file=sys.stderr)
    return 0 if status == "passed" else 1
