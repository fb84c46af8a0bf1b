"""Command line: `python -m tracker run|list|show|compare|regressions|verdict|export|import`.

Every command that an agent uses has `--json`: one JSON document on stdout, progress and messages on stderr.
Exit codes: 0 success (for `run`: the run passed), 1 the run did not pass, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from tracker import queries
from tracker.store import DEFAULT_STORE, VERDICTS, NotAStoreError, StoreLockedError


class UsageError(Exception):
    pass


def _fmt_us(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.1f}"


def _print_table(rows: list[list[str]], headers: list[str]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def _clean(value: Any) -> Any:
    """JSON-safe scalars: NaN/NaT become null, timestamps become ISO strings."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "isoformat"):
        try:
            return value.isoformat()
        except ValueError:
            return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def _resolve(store: str, run: str) -> str:
    run_id = queries.resolve_run_id(store, run)
    if run_id is None:
        raise UsageError(f"no run matches {run!r} in {store} (give a run id or a unique prefix)")
    return run_id


def _parse_cases(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--cases takes case numbers separated by commas, like 3,7; got {text!r}") from None


def run_summary(outcome) -> dict[str, Any]:
    run = outcome.record.run
    return {
        "run_id": run["run_id"],
        "status": run["status"],
        "suite": run["suite"],
        "mode": run["mode"],
        "gpu": run.get("gpu"),
        "geomean_us": run.get("geomean_us"),
        "error": run.get("error"),
        "warnings": run.get("warnings"),
        "side_file": str(outcome.pending.path) if outcome.pending else None,
        "cases": [
            {
                "case_idx": c["case_idx"],
                "spec": c["spec"],
                "passed": c["passed"],
                "message": c.get("message") or "",
                "mean_us": c.get("mean_us"),
                "err_us": c.get("err_us"),
                "best_us": c.get("best_us"),
                "worst_us": c.get("worst_us"),
                "runs": c.get("runs"),
            }
            for c in outcome.record.cases
        ],
    }


def cmd_run(args: argparse.Namespace) -> int:
    from tracker.progress import ProgressFile, TerminalBar
    from tracker.runner import RunRequest, run_variant

    suite = args.suite
    if suite is None:
        from tracker.envinfo import gpu_available

        suite = "qr_v2" if args.device != "cpu" and gpu_available() else "smoke"
        if suite == "smoke":
            print("no GPU: running the CPU smoke suite (--suite qr_v2 to insist)", file=sys.stderr)
    req = RunRequest(
        path=args.path,
        suite=suite,
        mode=args.mode,
        cases=_parse_cases(args.cases),
        seed=args.seed,
        timeout=args.timeout,
        family=args.family,
        parent=args.parent,
        note=args.note,
        profile=args.profile,
        store=args.store,
        trigger=args.trigger,
        device=args.device,
    )
    try:
        req.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.parent and Path(args.store).exists() and queries.resolve_run_id(args.store, args.parent) is None:
        raise UsageError(f"--parent {args.parent!r} is not a run in {args.store}")
    bar = TerminalBar() if not args.quiet else None
    pfile = ProgressFile(args.progress_file) if args.progress_file else None
    cancel_file = Path(args.cancel_file) if args.cancel_file else None

    def on_event(event: dict[str, Any]) -> None:
        for sink in (bar, pfile):
            if sink is not None:
                sink(event)

    outcome = run_variant(req, on_event, (lambda: cancel_file.exists()) if cancel_file else None)
    if bar is not None:
        bar.close()
    summary = run_summary(outcome)
    if pfile is not None:
        pfile.finish(outcome.status, outcome.run_id, summary["error"])
    if args.json:
        print(json.dumps(summary, default=str))
    else:
        _print_run(summary)
    if outcome.pending:
        print(
            f"store {args.store}: {outcome.pending.reason}. The run was saved to {outcome.pending.path}; the next "
            f"run or `python -m tracker import --store {args.store}` writes it into the store.",
            file=sys.stderr,
        )
    return 0 if outcome.status == "passed" else 1


def _print_cases(cases: list[dict[str, Any]]) -> None:
    rows = [
        [
            c["case_idx"],
            c["spec"],
            "pass" if c["passed"] else "FAIL",
            _fmt_us(c.get("mean_us")),
            _fmt_us(c.get("err_us")),
            _fmt_us(c.get("best_us")),
            _clean(c.get("runs")) or "-",
            (c.get("message") or "")[:90],
        ]
        for c in cases
    ]
    _print_table(rows, ["#", "case", "ok", "mean_us", "err_us", "best_us", "runs", "message"])


def _print_run(summary: dict[str, Any]) -> None:
    _print_cases(summary["cases"])
    print(
        f"run {summary['run_id']}: {summary['status']} on {summary['gpu'] or '?'}, suite {summary['suite']}, "
        f"mode {summary['mode']}, geomean {_fmt_us(summary['geomean_us'])} us"
    )
    for key in ("error", "warnings"):
        if summary.get(key):
            print(f"{key}: {summary[key]}")


def cmd_list(args: argparse.Namespace) -> int:
    df = queries.list_runs(args.store, limit=args.limit) if Path(args.store).exists() else None
    cols = [
        "run_id",
        "variant",
        "path",
        "status",
        "suite",
        "mode",
        "gpu",
        "geomean_us",
        "started_at",
        "family",
    ]
    records = [] if df is None else [{c: _clean(r[c]) for c in cols} for r in df.to_dict("records")]
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
            _fmt_us(r["geomean_us"]),
            (r["started_at"] or "")[:19],
        ]
        for r in records
    ]
    _print_table(
        rows,
        ["run", "variant", "status", "suite", "mode", "gpu", "geomean_us", "started"],
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    run_id = _resolve(args.store, args.run)
    run = {k: _clean(v) for k, v in queries.get_run(args.store, run_id).items()}
    cases = [
        {k: _clean(v) for k, v in row.items()} for row in queries.case_results(args.store, run_id).to_dict("records")
    ]
    if args.json:
        print(json.dumps({**run, "cases": cases}))
        return 0
    for key in (
        "run_id",
        "variant",
        "path",
        "status",
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
    _print_cases(cases)
    print(f"geomean {_fmt_us(run.get('geomean_us'))} us")
    return 0


def cmd_verdict(args: argparse.Namespace) -> int:
    from tracker.store import add_verdict

    run_id = _resolve(args.store, args.run)
    add_verdict(args.store, run_id, args.verdict, args.reason or "")
    print(json.dumps({"run_id": run_id, "verdict": args.verdict}) if args.json else f"{run_id}: {args.verdict}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from tracker.transfer import export_runs

    run_ids = [_resolve(args.store, r) for r in args.runs] if args.runs else None
    count = export_runs(args.store, args.out, run_ids)
    print(f"exported {count} run(s) to {args.out}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from tracker.store import flush_pending
    from tracker.transfer import import_runs

    added = sum(import_runs(args.store, folder) for folder in args.folders)
    flushed = flush_pending(args.store)
    print(
        f"imported {added} new run(s) into {args.store}" + (f", wrote {len(flushed)} pending" if flushed else ""),
        file=sys.stderr,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    from tracker.runner import DEFAULT_TIMEOUT_S
    from tracker.suites import MODES, SUITES

    parser = argparse.ArgumentParser(prog="python -m tracker", description="KernelBeam: track GPU kernel variants.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=DEFAULT_STORE, help="DuckDB store (default: %(default)s)")
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "run",
        parents=[common],
        help="run a kernel variant against a suite and record it",
    )
    p.add_argument("path", help="kernel file defining custom_kernel(data) -> (H, tau)")
    p.add_argument("--suite", choices=sorted(SUITES), help="default: qr_v2 with a GPU, smoke without one")
    p.add_argument("--mode", default="benchmark", choices=MODES)
    p.add_argument("--cases", help="only these case numbers, e.g. 3,7")
    p.add_argument(
        "--seed",
        type=int,
        help="hidden seed: transforms every case seed as the contest does",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds for the whole run",
    )
    p.add_argument("--family", help="variant family (e.g. the line of work this belongs to)")
    p.add_argument("--parent", help="run id this variant was derived from")
    p.add_argument("--note", help="one-line hypothesis or note")
    p.add_argument(
        "--profile",
        action="store_true",
        help="also profile one call per case with torch.profiler",
    )
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--progress-file", help=argparse.SUPPRESS)
    p.add_argument("--cancel-file", help=argparse.SUPPRESS)
    p.add_argument("--trigger", default="cli", choices=("cli", "ui"), help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_run)

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

    p = sub.add_parser("export", parents=[common], help="export runs as Parquet files into a folder")
    p.add_argument("runs", nargs="*", help="run ids (default: all finished runs)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", parents=[common], help="import runs from export folders")
    p.add_argument("folders", nargs="*", help="export folders; none: only write runs waiting in side files")
    p.set_defaults(func=cmd_import)

    from tracker.cli_compare import add_compare_commands

    add_compare_commands(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (
        UsageError,
        ValueError,
        KeyError,
        FileNotFoundError,
        NotAStoreError,
        StoreLockedError,
    ) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        return 2
