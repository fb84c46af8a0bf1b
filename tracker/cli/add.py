"""`add` and `variants`: register variants from files, folders and git history without running them."""

from __future__ import annotations

import argparse
import json
import sys

from tracker.cli.boards import add_context_options, context_text, lineage_context
from tracker.cli.common import known_family, print_columns, print_table, time_column
from tracker.common.errors import InputError
from tracker.common.jsonfields import clean
from tracker.store import Store


def cmd_add(args: argparse.Namespace) -> int:
    from tracker.variants.register import register

    if not args.paths and not args.glob:
        raise InputError("give kernel files or folders, or --glob PATTERN")
    rows = register(
        args.paths, args.store, pattern=args.glob, commits=args.commits, family=args.family, parent=args.parent,
        name=args.name,
    )  # fmt: skip
    _warn_dead_ends(args, rows)
    if args.json:
        print(json.dumps(rows))
        return 0
    table = [
        [r["variant"], r["path"], r["sha256"][:12], (r["commit"] or "-")[:10], (r["parent"] or "-")[:12],
         _state(r), (r["message"] or "").splitlines()[0][:50] if r["message"] else ""]
        for r in rows
    ]  # fmt: skip
    print_table(table, ["variant", "path", "sha256", "commit", "parent", "", "message"])
    names = {n["name"]: n["sha256"] for n in Store(args.store).variant_names()}
    for r in rows:
        if r.get("known_as"):  # the content is registered already, under the name it had first
            family = f" (family {r['family']})" if r.get("family") else ""
            head = f"{r['path']}: the same content as registered variant {r['known_as']}{family}"
            if r["name_added"]:
                name_family = f" (family {r['name_family']})" if r.get("name_family") else ""
                print(f"{head}; recorded the name {r['variant']}{name_family} for it")
            elif names.get(r["variant"]) == r["sha256"]:
                print(f"{head}; the name {r['variant']} is recorded for it already")
            else:  # an older snapshot of a file whose name stands for its newest one
                print(f"{head}, which keeps its name")
    print(
        f"{sum(r['added'] for r in rows)} added, {sum(r['name_added'] for r in rows)} named, "
        f"{sum(not r['added'] and not r['name_added'] for r in rows)} already registered"
    )
    return 0


def _state(row: dict) -> str:
    return "added" if row["added"] else "named" if row["name_added"] else "known"


def _warn_dead_ends(args: argparse.Namespace, rows: list[dict]) -> None:
    """Each newly added variant that is a rejected one again gets `dead_ends` (and a warning) unless --force."""
    from tracker.cli.deadends import dead_end_line
    from tracker.variants.deadends import repeated_dead_ends

    for row in rows:
        source = Store(args.store).variant_source(row["sha256"]) if row["added"] and not args.force else None
        found = repeated_dead_ends(args.store, source, row["sha256"]) if source else []
        row["dead_ends"] = [{k: clean(v) for k, v in d.items()} for d in found if d["sha256"] != row["sha256"]]
        for d in row["dead_ends"]:
            print(dead_end_line(row["path"], d), file=sys.stderr)


VARIANT_KEYS = ["variant", "path", "sha256", "commit", "parent", "parent_variant", "family", "runs", "best_geomean_us"]


def variants_doc(args: argparse.Namespace) -> list[dict]:
    """What `variants --json` prints: VARIANT_KEYS, `suite`, `gpu` and `problem` (the one context best_geomean_us
    is taken in, as `lineage` picks it: the variants of that problem and those never run), and `aliases`, the other
    names recorded for the content (`{name, path, family}`, oldest first)."""
    known_family(args.store, args.family, names=True)
    ctx = lineage_context(args)
    df = Store(args.store).variant_list(family=args.family, **ctx)
    return [
        {
            **{k: clean(r[k]) for k in VARIANT_KEYS},
            **ctx,
            "aliases": [{k: clean(v) for k, v in a.items()} for a in r["aliases"]],
        }
        for r in df.to_dict("records")
    ]


def cmd_variants(args: argparse.Namespace) -> int:
    records = variants_doc(args)
    if args.json:
        print(json.dumps(records))
        return 0
    if records:
        print(f"best geomean on {context_text(records[0], args.store)}; runs in every context")
    print_columns(
        [
            ("variant", [r["variant"] for r in records]),
            ("path", [r["path"] or "-" for r in records]),
            ("sha256", [r["sha256"][:12] for r in records]),
            ("commit", [(r["commit"] or "-")[:10] for r in records]),
            ("parent", [r["parent_variant"] or (r["parent"] or "-")[:12] for r in records]),  # as on Lineage
            ("family", [r["family"] or "-" for r in records]),
            ("also named", [_aliases(r["aliases"]) for r in records]),
            ("runs", [r["runs"] for r in records]),
            time_column("best geomean", [r["best_geomean_us"] for r in records]),
        ]
    )
    return 0


def _aliases(aliases: list[dict]) -> str:
    return ", ".join(a["name"] + (f" ({a['family']})" if a["family"] else "") for a in aliases) or "-"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("add", parents=[common], help="register variants (files, folders, git history) without running")
    p.add_argument("paths", nargs="*", help="kernel files or folders (every submission.py, else every custom_kernel)")
    p.add_argument("--glob", help="also every file matching this pattern (** allowed)")
    p.add_argument("--commits", help="only commits in this range, A..B (default: the whole history)")
    p.add_argument("--family", help="family of the registered variants")
    p.add_argument("--parent", help="parent variant (name, file stem or sha256 prefix) of every one registered")
    p.add_argument("--name", help="the variant's name instead of its file's (one file); unique in the store")
    p.add_argument("--force", action="store_true", help="no warning for a variant that repeats a rejected one")
    p.set_defaults(func=cmd_add)
    v = sub.add_parser("variants", parents=[common], help="list registered variants with their runs")
    v.add_argument("--family", help="only variants of this family")
    add_context_options(v)
    v.set_defaults(func=cmd_variants)
