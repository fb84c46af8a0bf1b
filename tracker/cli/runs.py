"""`list`, `show` and `verdict`: read recorded runs and judge them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tracker.cli.common import clean, fmt_us, print_cases, print_table, resolve
from tracker.store import VERDICTS, queries


def cmd_list(args: argparse.Namespace) -> int:
    df = queries.list_runs(args.store, limit=args.limit) if Path(args.store).exists() else None
    cols = [
        "run_id",
        "variant",
        "path",
        "status",
        "problem",
        "suite",
        "mode",
        "gpu",
        "geomean_us",
        "started_at",
        "family",
    ]
    records = [] if df is None else [{c: clean(r[c]) for c in cols} for r in df.to_dict("records")]
    if args.json:
        print(json.dumps(records))
        return 0
    if not records:
        print(f"no runs in {args.store}")
        return 0
    rows = [
        [
            r["run_id"],
            r["variant"],
            r["status"],
            r["suite"],
            r["mode"],
            r["gpu"] or "-",
            fmt_us(r["geomean_us"]),
            (r["started_at"] or "")[:19],
        ]
        for r in records
    ]
    print_table(
        rows,
        ["run", "variant", "status", "suite", "mode", "gpu", "geomean_us", "started"],
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    run_id = resolve(args.store, args.run)
    run = {k: clean(v) for k, v in queries.get_run(args.store, run_id).items()}
    cases = [
        {k: clean(v) for k, v in row.items()} for row in queries.case_results(args.store, run_id).to_dict("records")
    ]
    if args.json:
        print(json.dumps({**run, "cases": cases}))
        return 0
    for key in (
        "run_id",
        "variant",
        "path",
        "status",
        "problem",
        "suite",
        "mode",
        "seed",
        "gpu",
        "device",
        "torch",
        "triton",
        "started_at",
        "git_commit",
        "git_branch",
        "git_dirty",
        "family",
        "parent_run",
        "note",
        "error",
        "warnings",
    ):
        if run.get(key) is not None:
            print(f"{key:11} {run[key]}")
    print_cases(cases)
    print(f"geomean {fmt_us(run.get('geomean_us'))} us")
    return 0


def cmd_verdict(args: argparse.Namespace) -> int:
    from tracker.store import add_verdict

    run_id = resolve(args.store, args.run)
    add_verdict(args.store, run_id, args.verdict, args.reason or "")
    print(json.dumps({"run_id": run_id, "verdict": args.verdict}) if args.json else f"{run_id}: {args.verdict}")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("list", parents=[common], help="list runs, newest first")
    p.add_argument("--limit", type=int)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", parents=[common], help="show one run with its cases")
    p.add_argument("run")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("verdict", parents=[common], help="record a verdict on a run")
    p.add_argument("run")
    p.add_argument("verdict", choices=VERDICTS)
    p.add_argument("--reason")
    p.set_defaults(func=cmd_verdict)
