"""`list`, `show` and `verdict`: read recorded runs and judge them."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys

from tracker.capture.devicelock import queue
from tracker.capture.ncu_pass import MAX_KERNELS
from tracker.cli.common import (
    UsageError,
    fmt_us,
    known_family,
    positive_int,
    print_cases,
    print_columns,
    readable_store,
    resolve,
    time_column,
    time_columns,
)
from tracker.cli.queue import queue_lines
from tracker.common.jsonfields import clean, parse_flags, parse_stalls, stalls_text
from tracker.common.text import counted, short_kernel
from tracker.common.vocabulary import REPORT_NOT_HERE, RUN_STATUSES
from tracker.store import VERDICTS, Store
from tracker.variants.scan import describe

CLI_KERNEL_WIDTH = 70  # a profiled kernel's short name in `show` (`--json` has the full name)


def list_doc(args: argparse.Namespace) -> list[dict]:
    """What `list --json` prints (also the MCP tool list_runs)."""
    readable_store(args.store)  # a missing store is an error, as for every other read (`run` creates one)
    known_family(args.store, getattr(args, "family", None))  # a misspelt family: exit 2 naming the known ones
    since = None
    if getattr(args, "since", None):
        from tracker.analysis.summaries import parse_since

        try:
            since = parse_since(args.since, dt.datetime.now(dt.UTC))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    df = Store(args.store).list_runs(limit=args.limit, search=args.search, since=since,
                           **{k: getattr(args, k, None) for k in ("family", "status", "variant")})  # fmt: skip
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
    return [{c: clean(r[c]) for c in cols} for r in df.to_dict("records")]


def cmd_list(args: argparse.Namespace) -> int:
    records = list_doc(args)
    if args.json:
        print(json.dumps(records))
        return 0
    for line in queue_lines(queue()):  # who holds a device, who waits: `queue --json` for agents
        print(line)
    if not records:
        total = Store(args.store).count_runs()
        filtered = any(getattr(args, k) for k in ("search", "family", "status", "variant", "since"))
        print(f"no runs match these filters ({counted(total, 'run')} in {args.store})" if filtered and total else
              f"no runs in {args.store}")  # fmt: skip
        return 0
    print_columns(
        [
            ("run", [r["run_id"] for r in records]),
            ("variant", [r["variant"] for r in records]),
            ("status", [r["status"] for r in records]),
            ("suite", [r["suite"] for r in records]),
            ("mode", [r["mode"] for r in records]),
            ("gpu", [r["gpu"] or "-" for r in records]),
            time_column("geomean", [r["geomean_us"] for r in records]),
            ("started", [(r["started_at"] or "")[:19] for r in records]),
        ]
    )
    return 0


def show_doc(args: argparse.Namespace) -> dict:
    """What `show --json` prints: the run's row, its cases and its evidence."""
    run_id = resolve(args.store, args.run)
    run = {k: clean(v) for k, v in Store(args.store).get_run(run_id).items()}
    cases = [{k: clean(v) for k, v in row.items()} for row in Store(args.store).case_results(run_id).to_dict("records")]
    evidence = [
        {k: clean(v) for k, v in row.items()} for row in Store(args.store).run_evidence(run_id).to_dict("records")
    ]
    run["flags"] = parse_flags(run.get("flags"))[0]  # a malformed stored value shows as none
    kernels = [{k: clean(v) for k, v in row.items()}
               for row in Store(args.store).profile_top_kernels(run_id).to_dict("records")]  # fmt: skip
    return {**run, "cases": cases, "evidence": evidence, "profile_kernels": kernels,
            "ncu": ncu_doc(args.store, run_id)}  # fmt: skip


def ncu_doc(store: str, run_id: str) -> dict:
    """A run's Nsight Compute profile as `show --json` and the MCP tool give it: per case the report's path (beside
    the store) or why there is none; per kernel its metrics, stalls as {reason: warp cycles per issued instruction}."""
    here = Store(store)
    found = here.ncu_profile(run_id)
    cases = [{k: clean(v) for k, v in r.items()} for r in found["cases"].to_dict("records")]
    for c in cases:  # a path only where the file is here (an import may come without a report too large to move)
        kept = here.ncu_report_file(run_id, c.get("report"))
        c["report_path"] = str(kept) if kept is not None else None
    kernels = [{k: clean(v) for k, v in r.items()} for r in found["kernels"].to_dict("records")]
    for k in kernels:
        k["stalls"] = parse_stalls(k.get("stalls"))
    return {"profiled": bool(cases), "cases": cases, "kernels": kernels}


def _pct(value) -> str:
    return "-" if value is None else f"{value:.1f}%"


def ncu_text(doc: dict) -> str:
    """The Nsight Compute profile as plain lines, one per kernel, for people and agents (show, the MCP tool)."""
    if not doc["profiled"]:
        return "Nsight Compute: not profiled (run with --ncu where ncu is installed)"
    lines = [f"Nsight Compute: {len(doc['cases'])} case(s), one call each (its first {MAX_KERNELS} kernels); stalls "
             "in warp cycles per issued instruction"]  # fmt: skip
    for c in doc["cases"]:
        head = f"case {c['case_idx']}: {c['kernels'] or 0} kernel(s)"
        if c.get("report"):
            head += f", report {c['report_path']}" if c["report_path"] else f", report {c['report']} {REPORT_NOT_HERE}"
        lines.append(head + (f"; error: {c['error']}" if c.get("error") else ""))
        for k in (k for k in doc["kernels"] if k["case_idx"] == c["case_idx"]):
            us = "-" if k["duration_us"] is None else f"{k['duration_us']:.2f} us"
            smem = f"{k['static_smem_bytes'] or 0}+{k['dynamic_smem_bytes'] or 0} B"
            stalls = stalls_text(k["stalls"])
            name = short_kernel(k["kernel"], CLI_KERNEL_WIDTH) or "?"
            lines.append(
                f"  #{k['kernel_idx']} {name}: {us}, occupancy {_pct(k['occupancy_pct'])}, "
                f"SM {_pct(k['sm_pct'])}, memory {_pct(k['memory_pct'])}, {k['registers'] or '-'} regs/thread, "
                f"smem {smem}/block, block {k['block_size'] or '-'}, grid {k['grid_size'] or '-'}; stalls: {stalls}"
            )
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    if args.source:  # the file exactly as the run ran it, e.g. `show RUN --source > again.py` to run it again
        run_id = resolve(args.store, args.run)
        source = Store(args.store).run_bundle(run_id)["source"]
        if source is None:
            print(f"the store holds no source for run {run_id}", file=sys.stderr)
            return 1
        sys.stdout.write(source)
        return 0
    doc = show_doc(args)
    if args.json:
        print(json.dumps(doc))
        return 0
    run, cases, evidence = doc, doc["cases"], doc["evidence"]
    shown = {key: _show_value(run[key]) for key in SHOW_KEYS if run.get(key) is not None}
    if isinstance(run.get("started_at"), str):  # to the second, as every table shows it (--json keeps it exact)
        shown["started_at"] = re.sub(r"\.\d+(?=[+-]\d\d:\d\d$|$)", "", run["started_at"])
    if run["flags"]:
        shown["flags"] = describe(run["flags"])
    width = max(map(len, shown))  # the longest key (shared_device) sets the column: every value starts in it
    for key, value in shown.items():
        print(f"{key:{width}}  {value}")
    print_cases(cases)
    print(f"geomean {fmt_us(run.get('geomean_us'))}")
    if doc["profile_kernels"]:  # the profile's top kernels over all cases (the Run page has them per case)
        ks = doc["profile_kernels"]
        print("profile: top kernels by device time, summed over the cases")
        print_columns(
            [
                ("kernel", [short_kernel(k["kernel"], CLI_KERNEL_WIDTH) for k in ks]),
                ("calls", [k["calls"] for k in ks]),
                *time_columns([("device", [k["device_us"] for k in ks]), ("self", [k["self_us"] for k in ks])]),
                ("cases", [k["cases"] for k in ks]),
            ]
        )
    if doc["ncu"]["profiled"]:
        print(ncu_text(doc["ncu"]))
    for e in evidence:  # what a failed check kept (python -m tracker recheck judges it again)
        rep = "first pass" if e["repetition"] == -1 else f"repetition {e['repetition']}"
        print(
            f"evidence case {e['case_idx']}: {rep}, input {e['input_idx']}, matrix {e['matrix_idx']}, "
            f"factor_res {fmt_res(e['factor_res'])}, orth_res {fmt_res(e['orth_res'])}, {e['arrays_bytes'] or 0} bytes"
        )
    log = (run.get("log_tail") or "").strip().splitlines()
    if log:  # what the worker and the kernel printed: tracebacks, the kernel's own prints, the timing order
        print(f"log, its last {min(len(log), SHOW_LOG_LINES)} of {len(log)} lines (--json: log_tail)")
        for line in log[-SHOW_LOG_LINES:]:
            print(f"  {line[:SHOW_LOG_WIDTH]}")
    return 0


SHOW_LOG_LINES = 12
SHOW_LOG_WIDTH = 240
SHOW_KEYS = ("run_id", "variant", "path", "status", "problem", "suite", "mode", "seed", "gpu", "device", "sandbox",
             "torch", "triton", "started_at", "git_commit", "git_branch", "git_dirty", "family", "parent_run", "note",
             "error", "warnings", "compile_s", "compile_cache", "shared_device", "side_file")  # fmt: skip


def _show_value(value) -> str:
    """A run field as `show` prints it: yes/no for a flag (git_dirty, shared_device), floats to 4 significant digits
    (compile_s; --json keeps them exact)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, ".4g") if isinstance(value, float) else str(value)


def fmt_res(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def verdict_doc(args: argparse.Namespace) -> dict:
    """Record the verdict; what `verdict --json` prints."""
    from tracker.store import Store

    run_id = resolve(args.store, args.run)
    Store(args.store).check(write=True)
    Store(args.store).add_verdict(run_id, args.verdict, args.reason or "", args.assumption)
    return {"run_id": run_id, "verdict": args.verdict}


def cmd_verdict(args: argparse.Namespace) -> int:
    doc = verdict_doc(args)
    print(json.dumps(doc) if args.json else f"{doc['run_id']}: {doc['verdict']}")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("list", parents=[common], help="list runs, newest first")
    p.add_argument("--limit", type=positive_int, help="show at most this many runs (default: all)")
    p.add_argument("--search", help="only runs whose name, path, family, note, id or verdict reason contains this")
    p.add_argument("--family", help="only runs of this family")
    p.add_argument("--status", choices=RUN_STATUSES, help="only runs with this status")
    p.add_argument("--variant", help="only runs of the variant with this name (any name recorded for its content)")
    p.add_argument("--since", help="only runs started since: 30m, 2h, 1d, 1w or an ISO timestamp")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", parents=[common], help="show one run with its cases")
    p.add_argument("run", help="run id or a unique prefix of one, or a variant name (its newest run)")
    p.add_argument("--source", action="store_true", help="print only the source the run ran (as it was captured)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("verdict", parents=[common], help="record a verdict on a run")
    p.add_argument("run", help="run id or a unique prefix of one")
    p.add_argument("verdict", choices=VERDICTS, help="what was decided about the variant")
    p.add_argument("--reason", help="why, in a sentence")
    p.add_argument("--assumption", help="what the verdict rests on (for rejected: what would have to change to retry)")
    p.set_defaults(func=cmd_verdict)
