"""CLI commands over the statistics: `compare A B` (per case, asv-style marks) and `regressions` (change points)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from tracker.analysis.series import problem_args
from tracker.cli.common import UsageError, print_table, resolve
from tracker.store import queries


def _fmt(value: Any, spec: str = ",.1f") -> str:
    return "-" if value is None else format(value, spec)


def cmd_compare(args: argparse.Namespace) -> int:
    from tracker.analysis.series import case_data
    from tracker.analysis.stats import compare_runs

    ids = [resolve(args.store, r) for r in (args.a, args.b)]
    bundles = [queries.run_bundle(args.store, run_id) for run_id in ids]
    if any(b is None for b in bundles):
        raise UsageError("run vanished from the store while reading it")
    a, b = bundles
    cmp = compare_runs(
        case_data(a),
        case_data(b),
        gpu_a=a["run"].get("gpu"),
        gpu_b=b["run"].get("gpu"),
        min_effect=args.min_effect,
        **problem_args(a["run"], b["run"]),
    )
    if args.json:
        doc = {"a": ids[0], "b": ids[1], **asdict(cmp)}
        print(json.dumps(doc, default=str))
        return 0
    print(
        f"A {ids[0]} {a['run']['variant']} ({a['run'].get('gpu')})  vs  B {ids[1]} {b['run']['variant']} "
        f"({b['run'].get('gpu')})"
    )
    rows = [
        [
            c.mark,
            c.case,
            _fmt(c.mean_a),
            _fmt(c.mean_b),
            _fmt(c.ratio, ".3f"),
            f"{c.ci_low:.3f}-{c.ci_high:.3f}" if c.ci_low is not None else "-",
            c.reason,
        ]
        for c in cmp.cases
    ]
    print_table(rows, ["", "case", "A mean_us", "B mean_us", "B/A", "95% CI", "why"])
    ci = f" (95% CI {cmp.geomean_ci[0]:.3f}-{cmp.geomean_ci[1]:.3f})" if cmp.geomean_ci else ""
    print(f"geomean ratio B/A: {_fmt(cmp.geomean_ratio, '.3f')}{ci}; {cmp.reason}")
    print("marks: - faster, + slower, ~ within noise, x not comparable", file=sys.stderr)
    return 0


def cmd_regressions(args: argparse.Namespace) -> int:
    from tracker.analysis.series import detect_all, history_points

    if bool(args.family) == bool(args.path):
        raise UsageError("give exactly one of --family F or --path P")
    scope = {"family": args.family, "path": args.path}
    contexts = queries.history_contexts(args.store, **scope)
    if args.suite:
        contexts = contexts[contexts["suite"] == args.suite]
    found: list[dict[str, Any]] = []
    for problem, suite, gpu in zip(contexts["problem"], contexts["suite"], contexts["gpu"], strict=True):
        hist = queries.case_history(args.store, **scope, suite=suite, gpu=gpu, last=None, problem=problem)
        for changes in detect_all(history_points(hist)).values():
            for cp in changes:
                if args.all or cp.kind == "regression":
                    found.append({"problem": problem, "suite": suite, "gpu": gpu, **asdict(cp)})
    if args.json:
        print(json.dumps(found, default=str))
        return 0
    if not found:
        print("no change points found")
        return 0
    rows = [
        [
            c["kind"],
            c["case"],
            c["suite"],
            c["gpu"],
            _fmt(c["before"]),
            _fmt(c["after"]),
            _fmt(c["factor"], ".3f"),
            c["run_id"],
        ]
        for c in found
    ]
    print_table(rows, ["kind", "case", "suite", "gpu", "before_us", "after_us", "factor", "first run after"])
    return 0


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("compare", parents=[common], help="compare two runs case by case")
    p.add_argument("a", help="run id (or unique prefix) of the baseline")
    p.add_argument("b", help="run id (or unique prefix) of the candidate")
    p.add_argument("--min-effect", type=float, default=0.02, help="smallest change that counts (default 0.02)")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("regressions", parents=[common], help="change points per case along a family or file")
    p.add_argument("--family")
    p.add_argument("--path", help="kernel file path as recorded")
    p.add_argument("--suite", help="only this suite")
    p.add_argument("--all", action="store_true", help="also list improvements")
    p.set_defaults(func=cmd_regressions)
