"""`run`: run a kernel variant against a suite in a worker process and record it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tracker.cli.common import UsageError, fmt_us, parse_cases, print_cases
from tracker.store import NotAStoreError, StoreLockedError, queries


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
    from tracker.capture.progress import ProgressFile, TerminalBar
    from tracker.capture.runner import RunRequest, run_variant

    single = len(args.path) == 1 and not args.glob and not args.pending and Path(args.path[0]).is_file()
    if not single:
        from tracker.cli.run_many import run_many

        return run_many(args)
    suite = args.suite
    if suite is None:
        from tracker.capture.envinfo import gpu_available

        suite = "qr_v2" if args.device != "cpu" and gpu_available() else "smoke"
        if suite == "smoke":
            print("no GPU: running the CPU smoke suite (--suite qr_v2 to insist)", file=sys.stderr)
    req = RunRequest(
        path=args.path[0],
        suite=suite,
        mode=args.mode,
        cases=parse_cases(args.cases),
        seed=args.seed,
        timeout=args.timeout,
        family=args.family,
        parent=args.parent,
        note=args.note,
        profile=args.profile,
        store=args.store,
        trigger=args.trigger,
        device=args.device,
        name=_unique_name(args.path[0], args.store),
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


def _unique_name(path: str, store: str) -> str | None:
    """The variant's name from its path, told apart from other paths of the same name already in the store."""
    from tracker.capture.naming import unique_names
    from tracker.capture.register import recorded_path

    if not Path(path).is_file():
        return None
    rel = recorded_path(Path(path))[0]
    try:
        taken = {v["name"]: v["path"] for v in queries.variant_index(store)} if Path(store).exists() else {}
    except (StoreLockedError, NotAStoreError):  # the run itself copes with a busy store (side file)
        taken = {}
    return unique_names([rel], taken)[rel]


def _print_run(summary: dict[str, Any]) -> None:
    print_cases(summary["cases"])
    print(
        f"run {summary['run_id']}: {summary['status']} on {summary['gpu'] or '?'}, suite {summary['suite']}, "
        f"mode {summary['mode']}, geomean {fmt_us(summary['geomean_us'])} us"
    )
    for key in ("error", "warnings"):
        if summary.get(key):
            print(f"{key}: {summary[key]}")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from tracker.capture.runner import DEFAULT_TIMEOUT_S
    from tracker.workloads.qr_v2.suites import MODES, SUITES

    p = sub.add_parser(
        "run",
        parents=[common],
        help="run a kernel variant against a suite and record it",
    )
    p.add_argument("path", nargs="*", help="kernel files defining custom_kernel(data) -> (H, tau), or folders of them")
    p.add_argument("--glob", help="also every file matching this pattern (** allowed)")
    p.add_argument("--pending", action="store_true", help="every registered variant with no run in this context")
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
