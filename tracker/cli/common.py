"""What every command shares: the usage error, argument types, table printing with scaled time units, JSON
cleaning, run-id resolution."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any, NoReturn

from tracker.common.errors import InputError
from tracker.common.jsonfields import clean
from tracker.common.vocabulary import STORE_ENV
from tracker.store import DEFAULT_STORE, SCHEMA_VERSION, Store


class UsageError(InputError):
    pass


DEBUG_ENV = "KERNELBEAM_DEBUG"
FRESH_COMPILE_HELP = (
    "compile from nothing instead of from what earlier runs of the same source compiled (Triton kernels, torch "
    "extensions); recorded with the run"
)


def error_message(exc: BaseException) -> str:
    """The text after `error: ` for bad input."""
    return str(exc)


def internal_error_message(exc: BaseException) -> str:
    """One line for a bug of ours; the traceback only with KERNELBEAM_DEBUG=1."""
    text = " ".join(str(exc).split())[:300]
    return f"internal error: {type(exc).__name__}: {text} (rerun with {DEBUG_ENV}=1 for the traceback)"


def prog_name() -> str:
    return "kernelbeam" if os.path.basename(sys.argv[0]) == "kernelbeam" else "python -m tracker"


class Parser(argparse.ArgumentParser):
    """argparse with a one-line `error: ...` (and exit 2) instead of the usage block."""

    def usage_message(self, message: str) -> str:
        return f"{message} (see `{self.prog} --help`)"

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.usage_message(message)}", file=sys.stderr)
        raise SystemExit(2)


INT64_MAX = 2**63 - 1
# Time units for tables, as pytest-benchmark and hyperfine scale them: (name, microseconds per unit).
TIME_UNITS = (("ns", 1e-3), ("us", 1.0), ("ms", 1e3), ("s", 1e6))


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def fmt_us(value: Any) -> str:
    """A time in microseconds in the unit that reads best for it alone (e.g. `4.53 ms`)."""
    if _missing(value):
        return "-"
    unit = time_unit([value])
    return f"{_fmt_scaled(value / dict(TIME_UNITS)[unit])} {unit}"


def time_unit(values: list[Any]) -> str:
    """One unit for a column: the largest in which the column's smallest non-zero value is at least 1."""
    present = [abs(v) for v in values if not _missing(v) and v != 0]
    if not present:
        return "us"
    smallest = min(present)
    unit = TIME_UNITS[0][0]
    for name, scale in TIME_UNITS:
        if smallest >= scale:
            unit = name
    return unit


def _fmt_scaled(x: float) -> str:
    if 0 < abs(x) < 1:  # a spread in its table's unit (err 0.0402 ms): three significant digits, never 0.000
        decimals = min(6, 2 - math.floor(math.log10(abs(x))))
    else:
        decimals = 1 if abs(x) >= 100 else 2 if abs(x) >= 10 else 3
    return f"{x:,.{decimals}f}"


def time_column(header: str, values: list[Any]) -> tuple[str, list[str]]:
    """A table column of times given in microseconds: header with the unit, e.g. `mean (ms)`, and the cells."""
    return time_columns([(header, values)])[0]


def time_columns(columns: list[tuple[str, list[Any]]], *, spreads: tuple[str, ...] = ()) -> list[tuple[str, list[str]]]:
    """Time columns meant to be read side by side (mean, median, best; A and B; before and after) in one unit, so
    that adjacent cells compare at a glance: the unit of the times together. The columns named in `spreads` (err,
    std) take that unit without choosing it: a spread far below its times would put them all in ns."""
    unit = time_unit([v for header, values in columns if header not in spreads for v in values])
    scale = dict(TIME_UNITS)[unit]
    return [
        (f"{header} ({unit})", ["-" if _missing(v) else _fmt_scaled(v / scale) for v in values])
        for header, values in columns
    ]


def ratio_text(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.3f}"


def interval_text(low: float | None, high: float | None) -> str:
    """A 95% interval of a ratio as the tables print it, '-' where there is none."""
    return "-" if low is None or high is None else f"{low:.3f}-{high:.3f}"


def print_columns(columns: list[tuple[str, list[Any]]]) -> None:
    """Print a table given as (header, cells) columns."""
    headers = [h for h, _ in columns]
    rows = [list(r) for r in zip(*(cells for _, cells in columns), strict=True)]
    print_table(rows, headers)


def int64(text: str) -> int:
    """argparse type: an integer that fits the store's BIGINT columns."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"{text} is out of range (a 64-bit signed integer)")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int64(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds above 0, got {text}")
    return value


def fraction(text: str) -> float:
    """argparse type: a finite number in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and 0 <= value < 1):
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1 (e.g. 0.02), got {text}")
    return value


def print_table(rows: list[list[str]], headers: list[str]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def readable_store(store: str) -> None:
    """Refuse a store that a read cannot use: missing, not DuckDB, not ours, or written by a newer tracker. One
    written by an older tracker is upgraded first (one line on stderr), as a write would; read-only, it is refused."""
    Store(store).check()
    was = Store(store).upgrade()
    if was is not None:
        print(f"upgraded store {store} from schema v{was} to v{SCHEMA_VERSION}", file=sys.stderr)


def known_family(store: str, family: str | None, *, names: bool = False) -> None:
    """A family the store does not know is bad input that names the known ones, never an empty table (`names`: a
    family recorded on a variant's other name counts, as in `variants`)."""
    if family is None:
        return
    readable_store(store)
    families = Store(store).variant_families(names=names)
    if family not in families:
        raise UsageError(f"no family {family!r} in {store}; families: {', '.join(families) or 'none'}")


def resolve(store: str, run: str) -> str:
    """A run id from a full id or a unique prefix, else from a variant name (any name recorded for it: its newest
    run, as `--parent NAME` takes it); a prefix matching several runs lists them."""
    readable_store(store)
    if not run:
        raise UsageError("empty run id")
    matches = Store(store).match_run_ids(run, limit=6)
    if not matches:
        named = Store(store).latest_run_of_variant(run)
        if named is not None:
            return named
        raise UsageError(f"no run matches {run!r} in {store} (give a run id, a unique prefix or a variant name)")
    if len(matches) > 1 and run not in matches:
        more = ", ..." if len(matches) > 5 else ""
        raise UsageError(f"run prefix {run!r} is ambiguous: it matches {', '.join(matches[:5])}{more}")
    return run if run in matches else matches[0]


def parse_cases(text: str | None) -> list[int] | None:
    if text is None:
        return None
    parts = [x.strip() for x in text.split(",")]
    if not any(parts):
        raise UsageError(f"--cases names no case: {text!r} (give case numbers like 3,7, or leave it out for all)")
    try:
        return [int(x) for x in parts if x]
    except ValueError:
        raise UsageError(f"--cases takes case numbers separated by commas, like 3,7; got {text!r}") from None


def print_cases(cases: list[dict[str, Any]]) -> None:
    """Per-case table: the times in one unit; err is the standard error of the mean (std / sqrt(runs))."""

    def times(*keys: str) -> list[tuple[str, list[str]]]:
        return time_columns([(k.removesuffix("_us"), [clean(c.get(k)) for c in cases]) for k in keys],
                            spreads=("err", "std"))  # fmt: skip

    timed = any(not _missing(clean(c.get("mean_us"))) for c in cases)  # a test run has no timing columns
    print_columns(
        [
            ("#", [c["case_idx"] for c in cases]),
            ("case", [c["spec"] for c in cases]),
            ("ok", ["pass" if c["passed"] else "FAIL" for c in cases]),
            *(
                [*times("mean_us", "err_us", "median_us", "std_us", "best_us"),
                 ("runs", [clean(c.get("runs")) or "-" for c in cases])]
                if timed else []
            ),
            ("message", [(c.get("message") or "")[:90] for c in cases]),
        ]
    )  # fmt: skip


def path_arg(text: str) -> str:
    """argparse type: a non-empty path (an empty one would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return text


def default_store() -> str:
    """The store a command uses without --store: $KERNELBEAM_STORE as for the dashboard, else experiments.duckdb
    here. Read when the parser is built, so each main() call sees the environment of its time."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


def common_options() -> argparse.ArgumentParser:
    """Options every command takes: --store and --json."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store", type=path_arg, default=default_store(),
        help=f"DuckDB store (default: ${STORE_ENV}, else {DEFAULT_STORE}; here: %(default)s)",
    )  # fmt: skip
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout (times in microseconds)")
    return common
