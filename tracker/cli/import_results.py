"""`import-results`: a run measured elsewhere (the contest's result stream) recorded for a variant and GPU."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tracker.cli.common import UsageError, fmt_us
from tracker.common.vocabulary import RUN_MODES
from tracker.store import Store


def cmd_import_results(args: argparse.Namespace) -> int:
    from tracker.variants.contest_results import build_import

    log = Path(args.log)
    if not log.is_file():
        raise UsageError(f"no result stream at {args.log}")
    if not Path(args.variant).is_file():
        raise UsageError(f"no variant file at {args.variant}")
    record = build_import(log.read_text(errors="replace"), args.variant, gpu=args.gpu, mode=args.mode, note=args.note)
    pending = Store(args.store).finish_run(record)
    run = record.run
    if pending:
        print(f"store {args.store}: {pending.reason}; saved to {pending.path}", file=sys.stderr)
    if args.json:
        keys = ("run_id", "variant", "path", "status", "suite", "mode", "gpu", "geomean_us", "error")
        print(json.dumps({k: getattr(run, k) for k in keys} | {"cases": len(record.cases)}, default=str))
    else:
        print(f"run {run.run_id}: {run.status} · {run.variant} on {run.gpu} ({run.mode}), "
              f"{len(record.cases)} cases, geomean {fmt_us(run.geomean_us)}")  # fmt: skip
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("import-results", parents=[common], help="import the contest's result stream as a run")
    p.add_argument("log", help="file with the harness's `key: value` lines")
    p.add_argument("--variant", required=True, help="the kernel file that was measured")
    p.add_argument("--gpu", required=True, help='GPU model it ran on, e.g. "NVIDIA B200"')
    p.add_argument(
        "--mode",
        default="leaderboard",
        choices=RUN_MODES,
        help="the contest mode the log came from (default %(default)s)",
    )
    p.add_argument("--note", help="one-line note stored with the run")
    p.set_defaults(func=cmd_import_results)
