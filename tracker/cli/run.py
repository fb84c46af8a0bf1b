"""`run`: run a kernel variant against a suite in a worker process and record it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tracker.cli.common import UsageError, int64, parse_cases, path_arg, positive_seconds
from tracker.cli.deadends import dead_end_warnings
from tracker.cli.summary import print_run, run_summary
from tracker.store import NotAStoreError, StoreLockedError, check_store, queries


def _single(args: argparse.Namespace) -> bool:
    return len(args.path) == 1 and not args.glob and not args.pending and Path(args.path[0]).is_file()


def run_requests(args: argparse.Namespace) -> list:
    """The validated requests of `run` (one file, or the files of a queue), parents resolved; the store writable."""
    from tracker.capture.runner import RunRequest
    from tracker.workloads import get_workload

    try:
        workload = get_workload(args.problem)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    single = _single(args)
    suite = args.suite
    if suite is None:
        from tracker.capture.envinfo import gpu_available

        suite = workload.default_suite(args.device != "cpu" and gpu_available())
        if suite == "smoke":
            full = workload.default_suite(True)
            print(f"no GPU: running the CPU smoke suite (--suite {full} to insist)", file=sys.stderr)
    if single:
        targets = [{"path": args.path[0], "name": _unique_name(args.path[0], args.store)}]
    else:  # a queue of files (folders and --glob expanded as `run` of many does)
        from tracker.capture.envinfo import gpu_available
        from tracker.cli.run_many import _targets

        if args.pending:
            raise UsageError("--pending runs one after the other; run it without --gpus/--cluster")
        targets = _targets(args, suite, args.device != "cpu" and gpu_available())
    reqs = [
        RunRequest(
            path=t["path"],
            suite=suite,
            mode=args.mode,
            cases=parse_cases(args.cases),
            seed=args.seed,
            timeout=args.timeout,
            compile_timeout=args.compile_timeout,
            family=args.family,
            parent=args.parent,
            note=args.note,
            profile=args.profile,
            ncu=args.ncu,
            store=args.store,
            trigger=args.trigger,
            device=args.device,
            problem=args.problem,
            name=t["name"],
            sandbox=not args.no_sandbox,
            method=args.method,
            gpu_present=True if args.cluster and args.device == "cuda" else None,  # the cluster's GPUs, not ours
        )
        for t in targets
    ]
    try:
        for req in reqs:
            req.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_store(args.store, write=True)
    if args.parent:
        for r in reqs:
            r.parent = _resolve_parent(args.store, args.parent)
    if args.suite is None and suite == "smoke":  # said only once the input is known to be good
        print("no GPU: running the CPU smoke suite (--suite qr_v2 to insist)", file=sys.stderr)
    return reqs


def cmd_run(args: argparse.Namespace) -> int:
    from tracker.capture.progress import ProgressFile, TerminalBar
    from tracker.capture.runner import run_variant

    if not (args.path or args.glob or args.pending):
        raise UsageError("run needs a kernel file or folder (or --glob PATTERN, or --pending)")
    if not _single(args) and not (args.gpus or args.cluster):
        from tracker.cli.run_many import run_many

        return run_many(args)
    reqs = run_requests(args)
    req = reqs[0]
    dead_ends = dead_end_warnings(args, [r.path for r in reqs])
    bar = TerminalBar() if not args.quiet else None
    pfile = ProgressFile(args.progress_file) if args.progress_file else None
    cancel_file = Path(args.cancel_file) if args.cancel_file else None

    def on_event(event: dict[str, Any]) -> None:
        for sink in (bar, pfile):
            if sink is not None:
                sink(event)

    if args.gpus or args.cluster:
        from tracker.cli.scaleout import run_queue_cli

        return run_queue_cli(args, reqs, bar, pfile, cancel_file)
    outcome = run_variant(req, on_event, (lambda: cancel_file.exists()) if cancel_file else None)
    if bar is not None:
        bar.close()
    summary = {**run_summary(outcome), "dead_ends": dead_ends}
    if pfile is not None:
        pfile.finish(outcome.status, outcome.run_id, summary["error"])
    if args.json:
        print(json.dumps(summary, default=str))
    else:
        print_run(summary)
    if outcome.pending:
        print(
            f"store {args.store}: {outcome.pending.reason}. The run was saved to {outcome.pending.path}; "
            + (
                f"copy it into {args.store}.pending/ once the store can be written, then run "
                f"`python -m tracker import --store {args.store}`."
                if outcome.pending.fallback
                else f"the next run or `python -m tracker import --store {args.store}` writes it into the store."
            ),
            file=sys.stderr,
        )
    return 0 if outcome.status == "passed" else 1


def _resolve_parent(store: str, text: str) -> str:
    """A run id, a unique prefix of one, or a variant name (its newest run), as the full run id."""
    run_id = queries.resolve_run_id(store, text) or queries.latest_run_of_variant(store, text)
    if run_id is None:
        raise UsageError(f"--parent {text!r} is not a run in {store}, nor a variant with runs there")
    return run_id


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


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from tracker.capture.runner import DEFAULT_COMPILE_TIMEOUT_S, DEFAULT_TIMEOUT_S
    from tracker.workloads import get_workload
    from tracker.workloads.base import MODES

    p = sub.add_parser(
        "run",
        parents=[common],
        help="run a kernel variant against a suite and record it",
    )
    p.add_argument(
        "path",
        nargs="*",
        type=path_arg,
        help="kernel files defining custom_kernel(data) -> (H, tau), or folders of them",
    )
    p.add_argument("--glob", help="also every file matching this pattern (** allowed)")
    p.add_argument("--pending", action="store_true", help="every registered variant with no run in this context")
    p.add_argument(
        "--suite",
        help=f"a suite of the workload (qr_v2: {', '.join(get_workload().suites)}; a problem folder: its name or "
        "smoke); default: the full suite with a GPU, smoke without one",
    )
    p.add_argument(
        "--problem",
        metavar="DIR",
        help="a GPU Mode problem folder (task.yml, reference.py, task.py) to judge the kernel by; default: qr_v2",
    )
    p.add_argument(
        "--method",
        default="tracker",
        choices=("tracker", "contest"),
        help="tracker: the tracker's own loop, checker and every sample (default); contest: the --problem folder's "
        "own eval.py, laid out from its task.yml `files:` as the contest's runner does, and what it reports",
    )
    p.add_argument(
        "--mode",
        default="benchmark",
        choices=MODES,
        help="test: correctness only; benchmark: contest timing; leaderboard: longer timing (default %(default)s)",
    )
    p.add_argument("--cases", help="only these case numbers, e.g. 3,7")
    p.add_argument(
        "--seed",
        type=int64,
        help="hidden seed: transforms every case seed as the contest does",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        help="seconds for the timed work, after import and the first call; past it the run is recorded as "
        "timeout (default: %(default)s)",
    )
    p.add_argument(
        "--compile-timeout",
        type=positive_seconds,
        default=DEFAULT_COMPILE_TIMEOUT_S,
        help="seconds for import and the first call: Triton JIT, load_inline builds (default: %(default)s)",
    )
    p.add_argument("--family", help="variant family (e.g. the line of work this belongs to)")
    p.add_argument(
        "--parent",
        help="what this variant was derived from: a run id (or a unique prefix), or a variant name for its newest run",
    )
    p.add_argument("--note", help="one-line hypothesis or note (a new one acknowledges a dead-end warning)")
    p.add_argument("--force", action="store_true", help="run a variant that repeats a rejected one without warning")
    p.add_argument(
        "--profile",
        action="store_true",
        help="also profile one call per case with torch.profiler",
    )
    p.add_argument(
        "--ncu",
        action="store_true",
        help="also profile one call per case with Nsight Compute after the timed run (where ncu is installed; "
        "its time counts against --timeout): per kernel duration, occupancy, throughput, resources, stalls",
    )
    p.add_argument(
        "--device",
        default="auto",
        choices=("auto", "cpu", "cuda"),
        help="where the kernel runs: auto takes the GPU when there is one (default %(default)s)",
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the worker without bubblewrap (the kernel then reaches this user's files); recorded with the run",
    )
    p.add_argument(
        "--gpus",
        help="run the files as a queue on a local Dask cluster, one worker per GPU: all, N (N CPU workers "
        "without GPUs) or ids like 0,2",
    )
    p.add_argument("--cluster", help="run the queue on the Dask scheduler at this address (tcp://HOST:PORT)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--progress-file", help=argparse.SUPPRESS)
    p.add_argument("--cancel-file", help=argparse.SUPPRESS)
    p.add_argument("--trigger", default="cli", choices=("cli", "ui"), help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_run)
