"""`run` of several variants: paths, folders, --glob and --pending, one after the other, with a summary."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tracker.cli.common import UsageError, fmt_us, parse_cases, print_table
from tracker.cli.summary import run_summary
from tracker.store import queries


def _gpu_name() -> str | None:
    """The GPU model runs here are recorded under (torch's name, read in a subprocess), or None without one."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.get_device_name(0))"], capture_output=True, text=True
    )
    return out.stdout.strip() or None if out.returncode == 0 else None


def _targets(args: argparse.Namespace, suite: str, gpu: bool) -> list[dict[str, Any]]:
    """What to run: {path, name} for files, plus {source, recorded_path, commit, name, family} for --pending."""
    from tracker.capture.naming import unique_names
    from tracker.capture.register import find_variant_files, recorded_path

    targets: list[dict[str, Any]] = []
    if args.path or args.glob:
        files = find_variant_files(args.path, args.glob)
        exists = Path(args.store).exists()
        taken = {v["name"]: v["path"] for v in queries.variant_index(args.store)} if exists else {}
        rels = {str(f): recorded_path(f)[0] for f in files}
        names = unique_names(rels.values(), taken)
        targets += [{"path": str(f), "name": names[rels[str(f)]]} for f in files]
    if args.pending:
        if not Path(args.store).exists():
            raise UsageError(f"--pending: no store at {args.store}")
        gpu_name = (_gpu_name() if gpu else None) or "CPU"
        df = queries.pending_variants(args.store, suite=suite, mode=args.mode, gpu=gpu_name, family=args.family)
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


def run_many(args: argparse.Namespace) -> int:
    from tracker.capture.envinfo import gpu_available
    from tracker.capture.record import device_problem
    from tracker.capture.runner import RunRequest, run_variant

    gpu = args.device != "cpu" and gpu_available()
    problem = device_problem(args.device, gpu)
    if problem:  # said once, before any target starts
        raise UsageError(problem)
    suite = args.suite or ("qr_v2" if gpu else "smoke")
    targets = _targets(args, suite, gpu)
    from tracker.cli.deadends import dead_end_warnings

    dead_end_warnings(args, [t["path"] for t in targets if t.get("path")])
    summaries = []
    for i, target in enumerate(targets, 1):
        tmp = None
        path = target.get("path")
        if path is None:  # a registered snapshot: run a copy with the same file name
            tmp = Path(tempfile.mkdtemp(prefix="kernelbeam-src-"))
            path = str(tmp / Path(target["recorded_path"] or "submission.py").name)
            Path(path).write_text(target["source"])
        req = RunRequest(
            path=path, suite=suite, mode=args.mode, cases=parse_cases(args.cases), seed=args.seed,
            timeout=args.timeout, family=args.family or target.get("family"), note=args.note, profile=args.profile,
            ncu=args.ncu, store=args.store, trigger=args.trigger, device=args.device, name=target["name"],
            recorded_path=target.get("recorded_path"), commit=target.get("commit"), gpu_present=gpu,
            sandbox=not args.no_sandbox,
        )  # fmt: skip
        try:
            req.validate()
            outcome = run_variant(req)
        except ValueError as exc:
            print(f"[{i}/{len(targets)}] {target['name']}: error: {exc}", file=sys.stderr)
            summaries.append({"variant": target["name"], "status": "error", "error": str(exc), "run_id": None})
            continue
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        summary = {"variant": target["name"], "path": outcome.record.run["path"], **run_summary(outcome)}
        summaries.append(summary)
        print(
            f"[{i}/{len(targets)}] {target['name']}: {summary['status']} run {summary['run_id']} "
            f"geomean {fmt_us(summary['geomean_us'])} us" + (f" ({summary['error']})" if summary["error"] else ""),
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(summaries, default=str))
    else:
        rows = [[s["variant"], s.get("run_id") or "-", s["status"], fmt_us(s.get("geomean_us")),
                 (s.get("error") or "")[:70]] for s in summaries]  # fmt: skip
        if rows:
            print_table(rows, ["variant", "run", "status", "geomean_us", "error"])
    ok = all(s["status"] in ("passed", "skipped") for s in summaries)
    return 0 if ok else 1
