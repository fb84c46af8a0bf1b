"""`leaderboard` (with `--gaps`: where the time goes) and `lineage`: the dashboard's two overviews as commands."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tracker.cli.common import (
    UsageError,
    fmt_us,
    known_family,
    print_columns,
    readable_store,
    time_column,
    time_columns,
)
from tracker.common.jsonfields import clean
from tracker.common.text import context_name, counted
from tracker.store import Store


def _given_context(args: argparse.Namespace) -> None:
    """--suite and --gpu must name values the store has: a typo is an input error, not an empty view."""
    readable_store(args.store)
    facets = Store(args.store).facets()
    for what in ("suite", "gpu"):
        given = getattr(args, what)
        if given is not None and given not in facets[what]:
            raise UsageError(f"no runs with {what} {given!r}; {what} values: {', '.join(facets[what]) or 'none'}")


def _problems(contexts) -> list[str]:
    """The problems of Store.run_contexts: those the store holds runs of."""
    return sorted(set(contexts["problem"].dropna()))


def _given_problem(args: argparse.Namespace, contexts) -> None:
    """--problem must name a problem the store has runs of, as --suite and --gpu their values."""
    problems = _problems(contexts)
    if args.problem is not None and args.problem not in problems:
        raise UsageError(f"no runs of problem {args.problem!r}; problems: {', '.join(problems) or 'none'}")


def _context(args: argparse.Namespace) -> dict[str, Any]:
    """--suite and --gpu as given (if the store has them), else the dashboard's default: the context whose runs in
    this mode passed most recently (tracker.analysis.context)."""
    from tracker.analysis import context

    _given_context(args)
    contexts = Store(args.store).run_contexts()
    _given_problem(args, contexts)
    picked = context.default_context(contexts, modes=(args.mode,), gpu=args.gpu, suite=args.suite,
                                     problem=args.problem)  # fmt: skip
    if picked["suite"] is None or picked["gpu"] is None:
        where = "".join(f" {k} {v}" for k, v in (("on", args.gpu), ("of suite", args.suite),
                                                  ("of problem", args.problem)) if v)  # fmt: skip
        raise UsageError(f"no {args.mode} runs{where} in {args.store}")
    # one problem a board: another's cases are not the same cases
    return {"suite": picked["suite"], "gpu": picked["gpu"], "problem": picked["problem"]}


def lineage_context(args: argparse.Namespace) -> dict[str, str | None]:
    """The one suite, GPU and problem whose geomeans `lineage` and `variants` show (those of different contexts are
    not comparable; another problem's variants are another tree): --suite, --gpu and --problem as given, else what
    the Lineage page opens on (its family's runs, any mode, the most recently passed first). None where the store
    has no runs to pick from."""
    from tracker.analysis import context

    _given_context(args)
    contexts = Store(args.store).run_contexts()
    _given_problem(args, contexts)
    picked = context.default_context(contexts, modes=None, loose=("family",),
                                     family=args.family, gpu=args.gpu, suite=args.suite,
                                     problem=args.problem)  # fmt: skip
    return {k: getattr(args, k) or picked[k] for k in ("suite", "gpu", "problem")}


def context_text(ctx: dict[str, str | None], store: str) -> str:
    """A context as the Lineage page's caption names it: `qr_v2 · NVIDIA H200`, the problem first where the store
    holds runs of several (`vectoradd · smoke · CPU`)."""
    if not (ctx["suite"] and ctx["gpu"]):
        return "no runs yet"
    many = len(_problems(Store(store).run_contexts())) > 1
    return context_name(str(ctx["suite"]), str(ctx["gpu"]), ctx["problem"] if many else None)


def add_context_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", help="geomeans and runs in this suite (default: as the Lineage page, the one whose runs "
                   "passed most recently)")  # fmt: skip
    p.add_argument("--gpu", help="geomeans and runs on this GPU model, or CPU (default: as the Lineage page)")
    p.add_argument("--problem", help="variants run on this problem (qr_v2 or a problem folder's name) and those never "
                   "run (default: as the Lineage page, the one whose runs passed most recently in that suite and "
                   "GPU)")  # fmt: skip


def _board_name(store: str, variants, name: str | None) -> str | None:
    """The leaderboard's name for the content a recorded name stands for (an unchanged copy's name), else `name`."""
    if name is None or name in set(variants["variant"]):
        return name
    sha = Store(store).resolve_variant_name(name)
    same = variants[variants["variant_sha256"] == sha]
    return str(same["variant"].iloc[0]) if sha is not None and not same.empty else name


def leaderboard_doc(args: argparse.Namespace) -> dict[str, Any]:
    """What `leaderboard --json` prints: per variant its best passed geomean and best mean per case; with --gaps,
    where the chosen variant's geomean goes (tracker.analysis.gaps)."""
    from tracker.analysis import gaps, summaries

    if args.variant and not args.gaps:
        raise UsageError("--variant goes with --gaps")
    known_family(args.store, args.family)
    ctx = _context(args)
    data = Store(args.store).leaderboard_cells(suite=ctx["suite"], mode=args.mode, gpu=ctx["gpu"],
                                               family=args.family, problem=ctx["problem"])  # fmt: skip
    head = {**ctx, "mode": args.mode, "family": args.family}
    if args.gaps:
        return {**head, **gaps.case_gaps(data, _board_name(args.store, data["variants"], args.variant))}
    board = summaries.leaderboard(data)
    rows = []
    for sha, r in board["table"].iterrows():
        cells = {c: clean(r[c]) for c in board["cases"]}
        keep = ("variant", "path", "family", "runs", "passed", "best_geomean_us", "best_run", "latest_run")
        rows.append({**{k: clean(r[k]) for k in keep}, "sha256": sha, "cases_us": cells})
    return {**head, "cases": board["cases"], "variants": rows}


def cmd_leaderboard(args: argparse.Namespace) -> int:
    doc = leaderboard_doc(args)
    if args.json:
        print(json.dumps(doc))
        return 0
    print(
        f"{context_name(doc['suite'], problem=doc['problem'])} · {doc['mode']} · {doc['gpu']}"
        + (f" · family {doc['family']}" if doc["family"] else "")
    )
    if args.gaps:
        cs = doc["cases"]
        mean, best = time_columns([("mean", [c["mean_us"] for c in cs]), ("best", [c["best_us"] for c in cs])])
        print_columns(
            [
                ("case", [c["case"] for c in cs]),
                mean,
                ("log share", [_pct(c["log_share"]) for c in cs]),
                best,
                ("best variant", [c["best_variant"] for c in cs]),
                ("x best", [_fmt(c["ratio_to_best"], ".3f") for c in cs]),
                ("gap share", [_pct(c["gap_share"]) for c in cs]),
            ]
        )
        print(
            f"{doc['variant']}: geomean of its cells {fmt_us(doc['cells_geomean_us'])}, best per case would give "
            f"{fmt_us(doc['best_per_case_geomean_us'])} ({_fmt(doc['ratio_to_best_per_case'], '.3f')}x)"
        )
        return 0
    vs = doc["variants"]
    print_columns(
        [
            ("variant", [v["variant"] for v in vs]),
            ("runs", [v["runs"] for v in vs]),
            ("passed", [v["passed"] for v in vs]),
            time_column("geomean", [v["best_geomean_us"] for v in vs]),
            ("best run", [v["best_run"] or "-" for v in vs]),
        ]
    )
    return 0


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


LINEAGE_KEYS = ["variant", "depth", "parent_variant", "parent_run", "family", "path", "commit", "runs",
                "best_geomean_us", "best_run", "latest_run", "latest_status", "verdict"]  # fmt: skip


def lineage_doc(args: argparse.Namespace) -> dict[str, Any]:
    """What `lineage --json` prints: the parent -> child tree in depth-first order (as on the Lineage page)."""
    from tracker.analysis import summaries

    known_family(args.store, args.family)
    ctx = lineage_context(args)
    nodes = Store(args.store).lineage_nodes(family=args.family, **ctx)
    tree = summaries.lineage_tree(nodes)
    rows = [{k: clean(r.get(k)) for k in LINEAGE_KEYS} for r in tree.to_dict("records")]
    dead = Store(args.store).dead_ends(families=None if args.family is None else [args.family], problem=ctx["problem"])
    return {"family": args.family, **ctx, "variants": rows,
            "dead_ends": [{k: clean(v) for k, v in d.items()} for d in dead]}  # fmt: skip


def cmd_lineage(args: argparse.Namespace) -> int:
    doc = lineage_doc(args)
    if args.json:
        print(json.dumps(doc))
        return 0
    vs = doc["variants"]
    roots = sum(v["depth"] == 0 for v in vs)
    print(f"{counted(len(vs), 'variant')}, {counted(roots, 'root')} · geomeans and runs on "
          f"{context_text(doc, args.store)}")  # fmt: skip
    print_columns(
        [
            ("variant", ["  " * v["depth"] + str(v["variant"]) for v in vs]),
            time_column("geomean", [v["best_geomean_us"] for v in vs]),
            ("verdict", [v["verdict"] or "" for v in vs]),
            ("runs", [v["runs"] for v in vs]),
            ("best run", [v["best_run"] or "-" for v in vs]),
        ]
    )
    for d in doc["dead_ends"]:
        print(f"dead end: {d['variant']} (run {d['run_id']}): {d['reason']}" + (f"; assumption: {d['assumption']}"
              if d["assumption"] else ""))  # fmt: skip
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from tracker.common.vocabulary import TIMED_MODES

    p = sub.add_parser("leaderboard", parents=[common], help="variants ranked by best geomean, best mean per case")
    p.add_argument("--suite", help="suite (default: the one whose runs passed most recently)")
    p.add_argument("--gpu", help="GPU model, or CPU (default: the one whose runs passed most recently)")
    p.add_argument("--mode", default="benchmark", choices=TIMED_MODES,
                   help="timing mode (default %(default)s)")  # fmt: skip
    p.add_argument("--family", help="only variants of this family")
    p.add_argument("--problem", help="qr_v2 or a problem folder's name (default: the one whose runs passed most "
                   "recently in that suite and GPU); one problem a board")  # fmt: skip
    p.add_argument(
        "--gaps",
        action="store_true",
        help="where the time goes: per case the share of the log-geomean, the best mean any variant reached "
        "(and which), the ratio to it, and the geomean best-per-case would give",
    )
    p.add_argument("--variant", help="with --gaps: this variant (default: the one with the best geomean)")
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("lineage", parents=[common], help="the parent -> child tree of a family")
    p.add_argument("--family", help="only this family (default: every variant)")
    add_context_options(p)
    p.set_defaults(func=cmd_lineage)
