"""What every command shares: the usage error, table printing, JSON cleaning, run-id resolution."""

from __future__ import annotations

import argparse
import math
from typing import Any

from tracker.store import DEFAULT_STORE, queries


class UsageError(Exception):
    pass


def fmt_us(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.1f}"


def print_table(rows: list[list[str]], headers: list[str]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def clean(value: Any) -> Any:
    """JSON-safe scalars: NaN/NaT become null, timestamps become ISO strings."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "isoformat"):
        try:
            return value.isoformat()
        except ValueError:
            return None
    if hasattr(value, "item"):
        return clean(value.item())
    return value


def resolve(store: str, run: str) -> str:
    run_id = queries.resolve_run_id(store, run)
    if run_id is None:
        raise UsageError(f"no run matches {run!r} in {store} (give a run id or a unique prefix)")
    return run_id


def parse_cases(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--cases takes case numbers separated by commas, like 3,7; got {text!r}") from None


def print_cases(cases: list[dict[str, Any]]) -> None:
    rows = [
        [
            c["case_idx"],
            c["spec"],
            "pass" if c["passed"] else "FAIL",
            fmt_us(c.get("mean_us")),
            fmt_us(c.get("err_us")),
            fmt_us(c.get("best_us")),
            clean(c.get("runs")) or "-",
            (c.get("message") or "")[:90],
        ]
        for c in cases
    ]
    print_table(rows, ["#", "case", "ok", "mean_us", "err_us", "best_us", "runs", "message"])


def common_options() -> argparse.ArgumentParser:
    """Options every command takes: --store and --json."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=DEFAULT_STORE, help="DuckDB store (default: %(default)s)")
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    return common
