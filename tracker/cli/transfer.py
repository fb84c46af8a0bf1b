"""`export` and `import`: move runs between stores as Parquet folders."""

from __future__ import annotations

import argparse
import sys

from tracker.cli.common import resolve


def cmd_export(args: argparse.Namespace) -> int:
    from tracker.store.transfer import export_runs

    run_ids = [resolve(args.store, r) for r in args.runs] if args.runs else None
    count = export_runs(args.store, args.out, run_ids)
    print(f"exported {count} run(s) to {args.out}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from tracker.store import flush_pending
    from tracker.store.transfer import import_runs

    added = sum(import_runs(args.store, folder) for folder in args.folders)
    flushed = flush_pending(args.store)
    print(
        f"imported {added} new run(s) into {args.store}" + (f", wrote {len(flushed)} pending" if flushed else ""),
        file=sys.stderr,
    )
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("export", parents=[common], help="export runs as Parquet files into a folder")
    p.add_argument("runs", nargs="*", help="run ids (default: all finished runs)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", parents=[common], help="import runs from export folders")
    p.add_argument("folders", nargs="*", help="export folders; none: only write runs waiting in side files")
    p.set_defaults(func=cmd_import)
