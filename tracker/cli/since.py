"""`since`: what changed since a time (new runs, new bests, regressions, failures, verdicts), for agent loops."""

from __future__ import annotations

import argparse
import json

from tracker.analysis.summaries import OVERALL, parse_since, since_summary
from tracker.cli.common import print_columns, readable_store, time_columns
from tracker.common.jsonfields import clean
from tracker.common.text import counted
from tracker.store import Store


def since_doc(args: argparse.Namespace) -> dict:
    """What `since --json` prints."""
    when = parse_since(args.when)
    readable_store(args.store)
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


def _all(row: dict) -> bool:
    return True


# The sections of the table output: the summary's key, a title, which of its rows, the columns (key, header). A run's
# geomean (case OVERALL) is never read as a case's mean: the new bests are two sections.
SECTIONS = (
    ("runs", "Runs", _all, [("run_id", "run"), ("variant", "variant"), ("status", "status"), ("suite", "suite"),
                            ("gpu", "gpu"), ("geomean_us", "geomean")]),
    ("new_bests", "New best means (a case faster than every earlier passed run of its problem, suite and GPU)",
     lambda r: r["case"] != OVERALL,
     [("case", "case"), ("suite", "suite"), ("gpu", "gpu"), ("run_id", "run"), ("mean_us", "mean"),
      ("previous_best_us", "previous best")]),
    ("new_bests", "New best geomeans (a run's geomean below every earlier one of its problem, suite and GPU)",
     lambda r: r["case"] == OVERALL,
     [("suite", "suite"), ("gpu", "gpu"), ("run_id", "run"), ("mean_us", "geomean"),
      ("previous_best_us", "previous best")]),
    ("regressions", "Regressions (change points at the new runs, as `regressions --path` finds them)", _all,
     [("case", "case"), ("path", "kernel file"), ("run_id", "run"), ("baseline_run", "baseline run"),
      ("baseline_us", "before"), ("mean_us", "after"), ("factor", "factor")]),
    ("failures", "Failures", _all, [("run_id", "run"), ("variant", "variant"), ("status", "status"),
                                    ("error", "error")]),
    ("verdicts", "Verdicts", _all, [("run_id", "run"), ("variant", "variant"), ("verdict", "verdict"),
                                    ("reason", "reason")]),
    ("dead_ends", "Dead ends (rejected variants of these runs' families)", _all,
     [("variant", "variant"), ("family", "family"), ("run_id", "run"), ("reason", "reason"),
      ("assumption", "assumption")]),
    ("closer_to_gate", "Closer to a gate than the parent (worst scaled residual / the gate's tolerance)", _all,
     [("run_id", "run"), ("variant", "variant"), ("parent_variant", "parent"), ("gate", "gate"), ("case", "case"),
      ("ratio", "residual/gate"), ("parent_ratio", "parent's")]),
)  # fmt: skip


def cmd_since(args: argparse.Namespace) -> int:
    when = parse_since(args.when)
    summary = since_doc(args)
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"since {when.isoformat(timespec='seconds')}: {counted(len(summary['runs']), 'run')}")
    for key, title, keep, cols in SECTIONS:
        rows = [r for r in summary[key] if keep(r)]
        if not rows:
            continue
        print(f"\n{title}:")
        times = [(header, [r[k] for r in rows]) for k, header in cols if k.endswith("_us")]
        scaled = dict(zip([h for h, _ in times], time_columns(times), strict=True))  # one unit for the section
        print_columns([scaled[h] if h in scaled else _column(k, [r[k] for r in rows], h) for k, h in cols])
    return 0


def _column(name: str, values: list, header: str) -> tuple[str, list[str]]:
    """A table column that is not a time: ratios to three places, text cut to 80 characters."""
    if name.endswith("ratio") or name == "factor":
        return header, ["-" if v is None else f"{v:.3f}" for v in values]
    return header, ["-" if v is None else str(v)[:80] for v in values]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("since", parents=[common], help="what changed since a time: 30m, 2h, 1d or an ISO timestamp")
    p.add_argument(
        "when", nargs="?", default="24h", help="a duration (30m, 2h, 1d) or an ISO time (default %(default)s)"
    )
    p.set_defaults(func=cmd_since)
