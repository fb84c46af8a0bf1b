"""Warnings about dead ends, as `run` and `add` print them (tracker.variants.deadends finds them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tracker.cli.common import clean
from tracker.store import NotAStoreError, StoreLockedError


def dead_end_warnings(args: argparse.Namespace, paths: list[str]) -> list[dict[str, Any]]:
    """Per kernel file the rejected variants it repeats (tracker.variants.deadends), each said on stderr, unless
    acknowledged: --force, or a --note hypothesis that is not the rejected run's own."""
    from tracker.common.gitinfo import source_hash
    from tracker.variants.deadends import repeated_dead_ends

    found = []
    for path in paths:
        try:
            source = Path(path).read_text()
            repeats = repeated_dead_ends(args.store, source, source_hash(source))
        except (OSError, UnicodeDecodeError):  # the run itself reports an unreadable file
            continue
        except (StoreLockedError, NotAStoreError) as exc:  # the run itself copes with a busy store (side file)
            print(f"warning: dead ends not checked: {exc}", file=sys.stderr)
            break
        for d in repeats:
            if getattr(args, "force", False) or (getattr(args, "note", None) and args.note != d["note"]):
                continue
            found.append({"path": path, **{k: clean(v) for k, v in d.items()}})
    for d in found:
        print(dead_end_line(d["path"], d), file=sys.stderr)
    return found


def dead_end_line(what: str, d: dict[str, Any]) -> str:
    said = f"; assumption: {d['assumption']}" if d.get("assumption") else ""
    return (
        f"warning: {what} is rejected variant {d['variant']} again (run {d['run_id']}, but for constants, names "
        f"and formatting): {d['reason'] or 'no reason given'}{said}. --force, or a --note with a new hypothesis, "
        "acknowledges it"
    )
