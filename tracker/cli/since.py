"""`since`: what changed since a time (new runs, new bests, regressions, failures, verdicts), for agent loops."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tracker.analysis.summaries import parse_since, since_summary
from tracker.cli.common import print_columns, time_column
from tracker.common.jsonfields import clean
from tracker.store import Store


def since_doc(args: argparse.Namespace) -> dict:
    """What `since --json` prints."""
    when = parse_since(args.when)
    if not Path(args.store).exists():
        raise FileNotFoundError(f"no store at {args.store}")
    activity = Store(args.store).since_activity(when)
    families = sorted({f for f in activity["runs"]["family"] if isinstance(f, str)})
    dead = [{k: clean(v) for k, v in d.items()} for d in Store(args.store).dead_ends(families=families)]
    return {**since_summary(activity), "dead_ends": dead, "closer_to_gate": _closer_to_gate(args.store, activity)}


def _closer_to_gate(store: str, activity: dict) -> list[dict]:
    """New runs whose variant runs closer to a gate than its parent's (tracker.analysis.margins)."""
    from tracker.analysis.margins import closer_than_parent, gate_margins

    parents = Store(store).run_parents(list(activity["runs"]["run_id"]))
    if parents.empty:
        return []
    shas = sorted(set(parents["variant_sha256"]) | set(parents["parent_sha256"]))
    return closer_than_parent(parents, gate_margins(Store(store).gate_residuals(shas)))


def cmd_since(args: argparse.Namespace) -> int:
    when = parse_since(args.when)
    summary = since_doc(args)
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"since {when.isoformat(timespec='seconds')}: {len(summary['runs'])} runs")
    for key, cols in (
        ("runs", ["run_id", "variant", "status", "suite", "gpu", "geomean_us"]),
        ("new_bests", ["case", "run_id", "mean_us", "previous_best_us"]),
        ("regressions", ["case", "run_id", "baseline_run", "factor"]),
        ("failures", ["run_id", "variant", "status", "error"]),
        ("verdicts", ["run_id", "variant", "verdict", "reason"]),
        ("dead_ends", ["variant", "family", "run_id", "reason", "assumption"]),
        ("closer_to_gate", ["run_id", "variant", "parent_variant", "gate", "case", "ratio", "parent_ratio"]),
    ):
        if summary[key]:
            print(f"\n{key}:")
            print_columns([_column(c, [r[c] for r in summary[key]]) for c in cols])
    return 0


def _column(name: str, values: list) -> tuple[str, list[str]]:
    """A table column: times in one unit that its header names (`geomean (ms)`), ratios to three places."""
    if name.endswith("_us"):
        return time_column(name.removesuffix("_us").replace("_", " "), values)
    if name.endswith("ratio") or name == "factor":
        return name, ["-" if v is None else f"{v:.3f}" for v in values]
    return name, ["-" if v is None else str(v)[:80] for v in values]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("since", parents=[common], help="what changed since a time: 30m, 2h, 1d or an ISO timestamp")
    p.add_argument(
        "when", nargs="?", default="24h", help="a duration (30m, 2h, 1d) or an ISO time (default %(default)s)"
    )
    p.set_defaults(func=cmd_since)
