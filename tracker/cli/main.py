"""Command line: `python -m tracker COMMAND` (or `kernelbeam COMMAND`); `--help` lists the commands.

Every command has `--json`: one JSON document on stdout, progress and messages on stderr.
Exit codes: 0 success (for `run`: the run passed), 1 the run did not pass (or an internal error), 2 bad input.
Bad input always ends in one line `error: ...` on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from tracker.capture.job import BAD_INPUT
from tracker.cli import ab, add, boards, compare, import_results, mcp_server, queue, recheck, run, runs, since, transfer
from tracker.cli.common import (
    DEBUG_ENV,
    Parser,
    common_options,
    default_store,
    error_message,
    internal_error_message,
    path_arg,
    prog_name,
)
from tracker.common.text import PrintableStream

COMMAND_GROUPS = (run, runs, transfer, compare, ab, recheck, queue, add, since, import_results, boards, mcp_server)


def _version() -> str:
    """The installed package's version (pyproject.toml); the CLI layer may not import the package root."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kernelbeam")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=prog_name(),
        description="KernelBeam: track GPU kernel variants.",
        epilog="Tables show times in one unit per column, columns read side by side (mean, err, median, std, best; "
        "A and B) in one unit together (ns/us/ms/s); --json always gives microseconds. "
        "err is the standard error of the mean, std/sqrt(runs). Exit codes: 0 success (run: passed), "
        "1 the run did not pass or an internal error, 2 bad input. KERNELBEAM_DEBUG=1 shows tracebacks.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    # `--store PATH` also before the command (`kernelbeam --store s.duckdb list`); a dest of its own, since the
    # command's default would overwrite a shared one.
    parser.add_argument("--store", dest="store_before", type=path_arg, default=None, help=argparse.SUPPRESS)
    common = common_options()
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.store_before is not None and getattr(args, "store", None) == path_arg(default_store()):
        args.store = args.store_before  # given before the command and not after it
    # Stored strings may be imported: no terminal control sequence of theirs reaches a terminal. JSON output is
    # left exact (json.dumps escapes every control character anyway).
    streams = sys.stdout, sys.stderr
    if not getattr(args, "json", False):
        sys.stdout = PrintableStream(sys.stdout)
    sys.stderr = PrintableStream(sys.stderr)
    try:
        return _dispatch(args)
    finally:
        sys.stdout, sys.stderr = streams


def _dispatch(args: argparse.Namespace) -> int:
    try:
        return args.func(args)
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BAD_INPUT as exc:
        print(f"error: {error_message(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug of ours: one line, the traceback only on request
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"error: {internal_error_message(exc)}", file=sys.stderr)
        return 1
