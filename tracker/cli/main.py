"""Command line: `python -m tracker run|list|show|compare|regressions|verdict|export|import`.

Every command that an agent uses has `--json`: one JSON document on stdout, progress and messages on stderr.
Exit codes: 0 success (for `run`: the run passed), 1 the run did not pass, 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys

from tracker.cli import add, compare, import_results, run, runs, since, transfer
from tracker.cli.common import UsageError, common_options
from tracker.store import NotAStoreError, StoreLockedError

COMMAND_GROUPS = (run, runs, transfer, compare, add, since, import_results)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tracker", description="KernelBeam: track GPU kernel variants.")
    common = common_options()
    sub = parser.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (
        UsageError,
        ValueError,
        KeyError,
        FileNotFoundError,
        NotAStoreError,
        StoreLockedError,
    ) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        return 2
