"""CLI commands over the statistics: `compare A B` (per case, asv-style marks) and `regressions` (change points)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from tracker.analysis.series import coverage, problem_args, session_pair
from tracker.cli.common import (
    UsageError,
    fraction,
    interval_text,
    known_family,
    print_columns,
    readable_store,
    resolve,
    time_columns,
)
from tracker.common.text import context_name, counted
from tracker.common.vocabulary import SHARED_DEVICE_NOTE
from tracker.store import Store

COMPARE_HELP = (
    "Per case: ratio = B mean / A mean (>1: B slower), with the 95% CI of that ratio. The mark: - faster, "
    "+ slower, ~ within noise, x not comparable. A case is faster or slower only when the test on the samples "
    "is significant (p < 0.05: Mann-Whitney U on the ranks, Welch's t on the means when there are too few samples) "
    "AND both the medians and the ratio of means move by at least --min-effect in the same direction; so a mark "
    "never contradicts the ratio printed beside it. A warning names the cases whose mean ratio comes mostly from "
    "how far each mean sits above its best repetition (launch-bound cases, between processes): pair those with ab."
)


def _fmt(value: Any, spec: str = ",.1f") -> str:
    return "-" if value is None else format(value, spec)


def _compare(args: argparse.Namespace):
    from tracker.analysis.series import case_data
    from tracker.analysis.stats import compare_runs

    ids = [resolve(args.store, r) for r in (args.a, args.b)]
    bundles = [Store(args.store).run_bundle(run_id) for run_id in ids]
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
    return ids, a, b, cmp


def compare_doc(args: argparse.Namespace) -> dict[str, Any]:
    """What `compare --json` prints."""
    ids, a, b, cmp = _compare(args)
    methods = [r["run"].get("method") or "tracker" for r in (a, b)]
    doc = {"a": ids[0], "b": ids[1], **asdict(cmp), "gpu_state": _state_notes(a, b), "methods": methods}
    doc["coverage"] = coverage(cmp, a["run"], b["run"])
    doc["pair"] = _pair(args, a, b)
    doc["spread"] = _spread_notes(a, b)
    doc["fidelity"] = _fidelity(args, a, b, methods)
    doc["shared_device"] = _shared_sides(a, b)
    return json.loads(json.dumps(doc, default=str))


def _shared_sides(a, b) -> list[str]:
    """The sides ("A", "B") that did not have their device to themselves: their timings may be contended."""
    return [side for side, r in (("A", a), ("B", b)) if r["run"].get("shared_device") is True]


def _pair_id(a, b) -> str | None:
    return session_pair(a["run"], b["run"])


def _pair(args, a, b) -> dict[str, Any] | None:
    """Two runs of one A/B session: the session's paired verdict, which judges the pair better than two runs."""
    from tracker.cli.ab import pair_doc

    pair_id = _pair_id(a, b)
    return None if pair_id is None else pair_doc(args.store, pair_id, args.min_effect)


def _fidelity(args, a, b, methods: list[str]) -> dict[str, Any] | None:
    """Two runs of one fidelity session (the contest's method against the tracker's): the session's table."""
    from tracker.cli.ab import fidelity_doc

    pair_id = _pair_id(a, b)
    if pair_id is None or sorted(methods) != ["contest", "tracker"]:
        return None
    return fidelity_doc(args.store, pair_id)


def _state_notes(a, b) -> list[dict[str, str]]:
    from tracker.analysis.gpustate import compare_notes

    return compare_notes(a["cases"], b["cases"])


def _spread_notes(a, b) -> list[dict[str, str]]:
    """Nothing for one A/B session's two runs: its paired verdict already cancels what differs between processes."""
    from tracker.analysis.spread import compare_notes

    return [] if _pair_id(a, b) is not None else compare_notes(a["cases"], b["cases"])


def cmd_compare(args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(compare_doc(args)))
        return 0
    ids, a, b, cmp = _compare(args)
    if ids[0] == ids[1]:
        print("note: A and B are the same run: every ratio is 1 and says nothing about noise", file=sys.stderr)
    print(
        f"A {ids[0]} {a['run']['variant']} ({a['run'].get('gpu')})  vs  B {ids[1]} {b['run']['variant']} "
        f"({b['run'].get('gpu')})"
    )
    cs = cmp.cases
    print_columns(
        [
            ("", [c.mark for c in cs]),
            ("case", [c.case for c in cs]),
            *time_columns([("A mean", [c.mean_a for c in cs]), ("B mean", [c.mean_b for c in cs])]),
            ("B/A", [_fmt(c.ratio, ".3f") for c in cs]),
            ("95% CI", [interval_text(c.ci_low, c.ci_high) for c in cs]),
            ("why", [c.reason for c in cs]),
        ]
    )
    ci = f" (95% CI {cmp.geomean_ci[0]:.3f}-{cmp.geomean_ci[1]:.3f})" if cmp.geomean_ci else ""
    # as on the Compare page: which cases the ratio covers, and why the runs' case sets differ
    cover = coverage(cmp, a["run"], b["run"])
    over = f" {cover['ratio_over']}" if cmp.geomean_ratio is not None else ""
    pair = _pair(args, a, b)
    # two runs of an A/B session: the session's paired verdict (printed below) judges them; this line is theirs alone
    these = "these two runs alone (unpaired), " if pair is not None else ""
    print(f"{these}geomean ratio B/A{over}: {_fmt(cmp.geomean_ratio, '.3f')}{ci}; {cmp.reason}")
    if cover["line"]:
        print(cover["line"])
    if pair is not None:
        from tracker.cli.ab import print_pair

        print_pair(pair)
    methods = [r["run"].get("method") or "tracker" for r in (a, b)]
    fidelity = _fidelity(args, a, b, methods)
    if fidelity is not None:
        from tracker.cli.ab import print_fidelity

        print_fidelity(fidelity)
    if methods[0] != methods[1]:
        print(f"warning: A was timed by the {methods[0]} method, B by the {methods[1]} method", file=sys.stderr)
    shared = _shared_sides(a, b)
    if shared:
        print(f"warning: {' and '.join(shared)} {SHARED_DEVICE_NOTE}", file=sys.stderr)
    for note in _state_notes(a, b):  # the machine, not the code, may explain these cases
        print(f"warning: GPU state on {note['case']}: {note['note']}", file=sys.stderr)
    for note in _spread_notes(a, b):  # two processes' host pace, not the code, may explain these cases
        print(f"warning: {note['case']}: {note['note']}", file=sys.stderr)
    print("marks: - faster, + slower, ~ within noise, x not comparable", file=sys.stderr)
    return 0


def _lineage_path(
    store: str, family: str, suite: str, gpu: str | None, to: str | None, problem: str | None = None
) -> list[tuple[str, str | None]] | None:
    """The one line of descent a family's history follows in a context, as on the Regressions page: (sha256, name;
    None for an ancestor of another family) from the root to `to` (a variant name or sha256 prefix), else to the
    variant run most recently (summaries.path_leaves); so a sibling's run is never the baseline of a change. None
    when no variant has a passed timed run there (the page then takes the whole family), [] when `to` is not among
    those that have."""
    from tracker.analysis import summaries

    nodes = Store(store).lineage_nodes(family=family, suite=suite, gpu=gpu, problem=problem)
    leaves = summaries.path_leaves(nodes)
    if not leaves:
        return None
    names = dict(zip(nodes["sha256"], nodes["variant"], strict=True))
    if to is not None:
        leaves = [s for s in leaves if names.get(s) == to or s.startswith(to)]
        if not leaves:
            return []
    return [(sha, names.get(sha)) for sha in summaries.lineage_path(nodes, leaves[0])]


def cmd_regressions(args: argparse.Namespace) -> int:
    from tracker.analysis.series import detect_all, history_points

    if bool(args.family) == bool(args.path):
        raise UsageError("give exactly one of --family F or --path P")
    if args.to and not args.family:
        raise UsageError("--to goes with --family (a lineage path within the family)")
    readable_store(args.store)
    known_family(args.store, args.family)  # unknown: said as lineage, variants and leaderboard say it
    scope = {"family": args.family, "path": args.path}
    _check_scope(args.store, args.family, args.path)
    contexts = Store(args.store).history_contexts(**scope)
    if args.suite:
        suites = sorted(set(contexts["suite"]))
        contexts = contexts[contexts["suite"] == args.suite]
        if contexts.empty:
            raise UsageError(f"no timed runs in suite {args.suite} there; suites: {', '.join(suites) or 'none'}")
    from tracker.analysis.gpustate import change_point_notes, states_by_run_case

    found: list[dict[str, Any]] = []
    paths: list[tuple[str, str | None, list[str]]] = []
    unlisted = 0  # improvements, listed with --all only
    for problem, suite, gpu in zip(contexts["problem"], contexts["suite"], contexts["gpu"], strict=True):
        gpu = gpu if isinstance(gpu, str) else None
        problem = problem if isinstance(problem, str) else None
        lineage = _lineage_path(args.store, args.family, suite, gpu, args.to, problem) if args.family else None
        if lineage == []:
            continue  # --to has no timed run in this context
        along = [name for _, name in lineage or [] if name]  # as the page's caption: the family's own
        if lineage:
            paths.append((context_name(suite, problem=problem), gpu, along))  # as the leaderboard's header
        variants = None if lineage is None else tuple(sha for sha, _ in lineage)
        hist = Store(args.store).case_history(**scope, suite=suite, gpu=gpu, last=None, problem=problem,
                                              variants=variants)  # fmt: skip
        points = history_points(hist)
        changes = detect_all(points)
        states = states_by_run_case(Store(args.store).gpu_states(tuple(hist["runs"]["run_id"])))
        notes = change_point_notes(changes, points, states)
        for cps in changes.values():
            unlisted += sum(cp.kind != "regression" for cp in cps) if not args.all else 0
            for cp in cps:
                if args.all or cp.kind == "regression":
                    note = notes.get((cp.case, cp.run_id))
                    found.append({"problem": problem, "suite": suite, "gpu": gpu, **asdict(cp), "gpu_state": note,
                                  "along": along or None})  # fmt: skip
    if args.to and not paths:
        raise UsageError(f"{args.to!r} names no variant of family {args.family} with a passed timed run")
    if args.json:
        print(json.dumps(found, default=str))
        return 0
    for suite, gpu, along in paths:  # which line of descent, as the page's caption says it
        print(f"{suite} · {gpu}: along {' → '.join(along)}")
    if not found:  # as the page: no regression, but say what --all would list
        some = f"{counted(unlisted, 'improvement')}: --all lists {'them' if unlisted > 1 else 'it'}"
        print(f"no regression found ({some})" if unlisted else "no change points found")
        return 0
    print_columns(
        [
            ("kind", [c["kind"] for c in found]),
            ("case", [c["case"] for c in found]),
            ("suite", [c["suite"] for c in found]),
            ("gpu", [c["gpu"] for c in found]),
            *time_columns([("before", [c["before"] for c in found]), ("after", [c["after"] for c in found])]),
            ("factor", [_fmt(c["factor"], ".3f") for c in found]),
            ("first run after", [c["run_id"] for c in found]),
        ]
    )
    for c in found:
        if c["gpu_state"]:
            print(f"warning: GPU state at {c['case']} (run {c['run_id']}): {c['gpu_state']}", file=sys.stderr)
    return 0


def _check_scope(store: str, family: str | None, path: str | None) -> None:
    """A family without runs or an unknown kernel path is bad input, not 'no change points'."""
    what, value = ("family", family) if family is not None else ("path", path)
    known = Store(store).history_scopes()[what][what].tolist()
    if value not in known:
        shown = ", ".join(map(str, known[:20])) + (", ..." if len(known) > 20 else "")
        raise UsageError(f"no runs in {what} {value!r} in {store}; {what} values: {shown or 'none'}")


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("compare", parents=[common], help="compare two runs case by case", description=COMPARE_HELP)
    p.add_argument("a", help="run id (or unique prefix) of the baseline, or a variant name (its newest run)")
    p.add_argument("b", help="run id (or unique prefix) of the candidate, or a variant name (its newest run)")
    p.add_argument(
        "--min-effect",
        type=fraction,
        default=0.02,
        help="smallest relative change that counts as faster/slower (default %(default)s = 2%%)",
    )
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("regressions", parents=[common], help="change points per case along a family or file")
    p.add_argument("--family", help="variant family, as given to `run --family`")
    p.add_argument("--path", help="kernel file path as recorded")
    p.add_argument("--suite", help="only this suite (default: every suite with timed runs)")
    p.add_argument("--all", action="store_true", help="also list improvements")
    p.add_argument(
        "--to",
        metavar="VARIANT",
        help="with --family: follow the line of descent (parent links, as on Lineage) from its root to this variant "
        "(default: to the variant run most recently, as the Regressions page does)",
    )
    p.set_defaults(func=cmd_regressions)
