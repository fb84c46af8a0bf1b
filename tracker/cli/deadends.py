"""Warnings about dead ends, as `run` and `add` print them (tracker.variants.deadends finds them)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tracker.store import NotAStoreError, StoreLockedError
from tracker.variants.deadends import dead_end_line, dead_ends_of  # noqa: F401 - dead_end_line: add's too


def dead_end_warnings(args: argparse.Namespace, paths: list[str]) -> list[dict[str, Any]]:
    """Per kernel file the rejected variants it repeats (tracker.variants.deadends), each said on stderr, unless
    acknowledged: --force, or a --note hypothesis that is not the rejected run's own."""
    found = []
    for path in paths:
        try:
            found += dead_ends_of(
                args.store, path, note=getattr(args, "note", None), force=getattr(args, "force", False)
            )
        except (StoreLockedError, NotAStoreError) as exc:  # the run itself copes with a busy store (side file)
            print(f"warning: dead ends not checked: {exc}", file=sys.stderr)
            break
    for d in found:
        print(dead_end_line(d["path"], d), file=sys.stderr)
    return found
