"""`run`: run a kernel variant against a suite in a worker process and record it."""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tracker.capture import outlook
from tracker.capture.record import run_summary
from tracker.cli.common import FRESH_COMPILE_HELP, UsageError, int64, parse_cases, path_arg, positive_seconds
from tracker.cli.deadends import dead_end_warnings
from tracker.cli.summary import print_run
from tracker.store import Store


def _single(args: argparse.Namespace) -> bool:
    return len(args.path) == 1 and not args.glob and not args.pending and Path(args.path[0]).is_file()


def run_requests(args: argparse.Namespace) -> list:
    """The validated requests of `run`, built here for every route (one file, many files, --glob, --pending, the
    queue, the dashboard's jobs, the MCP server): parents resolved, the store writable, the "no GPU" notice said
    once. A UsageError for bad input."""
    from tracker.capture.envinfo import gpu_available
    from tracker.capture.runner import RunRequest
    from tracker.variants.register import resolve_parent, unique_name_in_store
    from tracker.workloads import get_workload

    if not (args.path or args.glob or args.pending):
        raise UsageError("run needs a kernel file or folder (or --glob PATTERN, or --pending)")
    if args.pending and (args.gpus or args.cluster):
        raise UsageError("--pending runs one after the other; run it without --gpus/--cluster")
    try:
        workload = get_workload(args.problem)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    gpu_present = None  # probed only where it decides something: the default suite, --pending's GPU, --device cuda
    if args.cluster and args.device == "cuda":
        gpu_present = True  # the cluster's GPUs, not ours
    elif args.device != "cpu" and (args.suite is None or args.pending or args.device == "cuda"):
        gpu_present = gpu_available()
    suite = args.suite or workload.default_suite(bool(gpu_present))
    if _single(args):
        targets = [{"path": args.path[0], "name": unique_name_in_store(args.path[0], args.store)}]
    else:
        targets = _targets(args, suite, bool(gpu_present))
    common = dict(
        suite=suite, mode=args.mode, cases=parse_cases(args.cases), seed=args.seed, timeout=args.timeout,
        compile_timeout=args.compile_timeout, note=args.note, profile=args.profile, ncu=args.ncu, store=args.store,
        device=args.device, problem=args.problem, sandbox=not args.no_sandbox, compile_cache=not args.fresh_compile,
        method=args.method, gpu_present=gpu_present if args.device == "cuda" else None,
    )  # fmt: skip
    reqs = [
        RunRequest(
            path=t.get("path") or _snapshot_copy(t),
            family=args.family or t.get("family"),
            name=t["name"],
            recorded_path=t.get("recorded_path"),
            commit=t.get("commit"),
            **common,
        )
        for t in targets
    ]
    try:
        for req in reqs:
            req.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    Store(args.store).check(write=True)
    if args.parent:
        parent = resolve_parent(args.store, args.parent, reqs[0].suite, reqs[0].mode)
        for r in reqs:
            r.parent = parent
    full = workload.default_suite(True)
    if args.suite is None and suite != full:  # said once, when the input is known to be good
        print(f"no GPU: running the CPU smoke suite (--suite {full} to insist)", file=sys.stderr)
    return reqs


_SNAPSHOTS: list[Path] = []


def _snapshot_copy(target: dict[str, Any]) -> str:
    """A registered snapshot (--pending) as a file to run: a temp copy with its recorded file name, removed when
    this process ends (the request may run much later, in a queue)."""
    if not _SNAPSHOTS:
        _SNAPSHOTS.append(Path(tempfile.mkdtemp(prefix="kernelbeam-src-")))
        atexit.register(shutil.rmtree, _SNAPSHOTS[0], True)
    folder = Path(tempfile.mkdtemp(dir=_SNAPSHOTS[0]))
    path = folder / Path(target["recorded_path"] or "submission.py").name
    path.write_text(target["source"])
    return str(path)


def _gpu_name() -> str | None:
    """The GPU model runs here are recorded under (torch's name, read in a subprocess), or None without one."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.get_device_name(0))"], capture_output=True, text=True
    )
    return out.stdout.strip() or None if out.returncode == 0 else None


def _targets(args: argparse.Namespace, suite: str, gpu: bool) -> list[dict[str, Any]]:
    """What to run: {path, name} for files, plus {source, recorded_path, commit, name, family} for --pending."""
    from tracker.variants.naming import unique_names
    from tracker.variants.register import find_variant_files, recorded_path

    targets: list[dict[str, Any]] = []
    if args.path or args.glob:
        files = find_variant_files(args.path, args.glob)
        exists = Path(args.store).exists()
        taken = Store(args.store).name_paths() if exists else {}
        rels = {str(f): recorded_path(f)[0] for f in files}
        names = unique_names(rels.values(), taken)
        targets += [{"path": str(f), "name": names[rels[str(f)]]} for f in files]
    if args.pending:
        if not Path(args.store).exists():
            raise UsageError(f"--pending: no store at {args.store}")
        gpu_name = (_gpu_name() if gpu else None) or "CPU"
        df = Store(args.store).pending_variants(suite=suite, mode=args.mode, gpu=gpu_name, family=args.family)
        for row in df.to_dict("records"):
            targets.append(
                {"source": row["source"], "recorded_path": row["path"], "commit": row["commit"], "name": row["name"],
                 "family": row["family"]}
            )  # fmt: skip
    if not targets and (args.path or args.glob):  # a folder without kernels: a mistake, not an empty queue
        named = ", ".join([*args.path, *([f"--glob {args.glob!r}"] if args.glob else [])])
        raise UsageError(
            f"no kernel files in {named} (a folder needs submission.py files or .py files defining custom_kernel)"
        )
    if not targets:  # --pending with nothing left to run in this context
        print("nothing to run", file=sys.stderr)
    return targets


def cmd_run(args: argparse.Namespace) -> int:
    from tracker.capture.progress import TerminalBar
    from tracker.capture.runner import run_variant

    reqs = run_requests(args)
    if not _single(args) and not (args.gpus or args.cluster):
        from tracker.cli.run_many import run_many

        return run_many(args, reqs)
    req = reqs[0]
    dead_ends = dead_end_warnings(args, [r.path for r in reqs])
    warning = outlook.timeout_warning("this source", req, outlook.earlier_seconds(req))
    if warning:
        print(warning, file=sys.stderr)
    bar = TerminalBar() if not args.quiet else None
    if args.gpus or args.cluster:
        from tracker.cli.scaleout import run_queue_cli

        return run_queue_cli(args, reqs, bar)
    outcome = run_variant(req, bar)
    if bar is not None:
        bar.close()
    summary = {**run_summary(outcome), "dead_ends": dead_ends}
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


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from tracker.capture.runner import DEFAULT_COMPILE_TIMEOUT_S, DEFAULT_TIMEOUT_S
    from tracker.common.vocabulary import RUN_MODES
    from tracker.workloads import get_workload

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
        choices=RUN_MODES,
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
        help="seconds for the kernel's import and its first call (Triton JIT, load_inline builds), counted from "
        "the import: the worker's own start is not in it (default: %(default)s)",
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
    p.add_argument("--fresh-compile", action="store_true", help=FRESH_COMPILE_HELP)
    p.add_argument(
        "--gpus",
        help="run the files as a queue on a local Dask cluster, one worker per GPU: all, N (N CPU workers "
        "without GPUs) or ids like 0,2",
    )
    p.add_argument("--cluster", help="run the queue on the Dask scheduler at this address (tcp://HOST:PORT)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run)
