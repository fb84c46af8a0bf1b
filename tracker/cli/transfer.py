"""`export` and `import`: move runs between stores as Parquet folders."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tracker.cli.common import UsageError, path_arg, readable_store, resolve
from tracker.store import Store


def cmd_export(args: argparse.Namespace) -> int:
    from tracker.store.transfer import export_runs

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out} is an existing file; give a folder (new or existing)")
    if not out.parent.is_dir():
        raise UsageError(f"--out {args.out}: folder {out.parent} does not exist")
    readable_store(args.store)
    run_ids = [resolve(args.store, r) for r in args.runs] if args.runs else None
    count = export_runs(args.store, args.out, run_ids)
    if args.json:
        print(json.dumps({"exported": count, "out": str(out)}))
    print(f"exported {count} run(s) to {args.out}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from tracker.store.transfer import check_export, import_runs
    from tracker.store.validate import read_export
    from tracker.workloads.qr_v2.suites import SUITES

    for folder in args.folders:  # every folder is checked, files and rows, before any is written: all or nothing
        check_export(folder)
        read_export(folder, SUITES)
    Store(args.store).check(write=True)
    added = sum(import_runs(args.store, folder, SUITES) for folder in args.folders)
    flushed = Store(args.store).flush_pending()  # prints a line per side file it keeps, and why
    print(
        f"imported {added} new run(s) into {args.store}"
        + (f", wrote {len(flushed.written)} pending" if flushed.written else "")
        + (f"; {len(flushed.unreadable)} side file(s) could not be read and were kept" if flushed.unreadable else ""),
        file=sys.stderr,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "imported": added,
                    "pending_written": flushed.written,
                    "unreadable_side_files": [{"path": str(p), "why": why} for p, why in flushed.unreadable],
                    "store": args.store,
                }
            )
        )
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("export", parents=[common], help="export runs as Parquet files into a folder")
    p.add_argument("runs", nargs="*", help="run ids (default: all finished runs)")
    p.add_argument(
        "--out", required=True, type=path_arg, help="folder to write the Parquet files into (created if missing)"
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", parents=[common], help="import runs from export folders")
    p.add_argument(
        "folders", nargs="*", type=path_arg, help="export folders; none: only write runs waiting in side files"
    )
    p.set_defaults(func=cmd_import)
