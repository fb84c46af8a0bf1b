"""The JSON-typed columns of the store (runs.flags, runs.device_load_start/end, case_results.args,
ncu_kernels.stalls): their shape, defined once. Import refuses a value that does not parse to it; readers get a
safe value for one already stored."""

from __future__ import annotations

import json
import math
import re
from typing import Any

JSON_OBJECT_COLUMNS = {
    ("runs", "device_load_start"),
    ("runs", "device_load_end"),
    ("runs", "helper_sources"),
    ("runs", "harness_files"),
    ("case_results", "args"),
    ("ncu_kernels", "stalls"),
}
FLAG_COLUMN = ("runs", "flags")
# Deeper JSON is refused before it is parsed: json.loads recurses per level, and a value of ~1,000 levels raised
# RecursionError inside the dashboard's deeper call stack (the home page, for every visitor of that store) while
# import, on a shallow stack, had let it in. Ours are two levels deep.
MAX_JSON_DEPTH = 16
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def loads(text: str) -> Any:
    """json.loads of a stored or imported JSON text, refusing (ValueError) one nested deeper than MAX_JSON_DEPTH."""
    depth = 0
    for bracket in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return json.loads(text)


def flag_problem(value: Any) -> str | None:
    """Why a decoded flags value is not a list of {code, line, message[, severity]}, or None (line: a whole number,
    0 where no line is meant)."""
    if not isinstance(value, list):
        return f"is not a JSON list but {type(value).__name__}"
    for i, flag in enumerate(value):
        if not isinstance(flag, dict):
            return f"item {i} is not an object"
        if not isinstance(flag.get("code"), str) or not isinstance(flag.get("message"), str):
            return f"item {i} lacks a text code or message"
        line = flag.get("line")
        if not isinstance(line, int) or isinstance(line, bool):  # `show` and the pages print it
            return f"item {i} has no line, or one that is not a whole number"
        if not isinstance(flag.get("severity", "hack"), str):
            return f"item {i} has a severity that is not text"
    return None


def json_problem(table: str, column: str, text: str) -> str | None:
    """Why a stored JSON text of (table, column) does not have its column's shape, or None; other columns: None."""
    if (table, column) != FLAG_COLUMN and (table, column) not in JSON_OBJECT_COLUMNS:
        return None
    try:
        value = loads(text)
    except ValueError as exc:
        return f"is not valid JSON ({exc})"
    if (table, column) == FLAG_COLUMN:
        return flag_problem(value)
    if value is not None and not isinstance(value, dict):  # a device load may be null (not measured)
        return f"is not a JSON object but {type(value).__name__}"
    return None


def parse_flags(text: Any) -> tuple[list[dict[str, Any]], bool]:
    """(flags, readable) of a stored flags value: a malformed one gives ([], False) instead of an exception."""
    if text is None or (isinstance(text, float) and text != text):  # NULL, or pandas' NaN for it
        return [], True
    if not isinstance(text, str):
        return [], False
    try:
        value = loads(text)
    except ValueError:
        return [], False
    if flag_problem(value) is not None:
        return [], False
    return value, True


# Warp states ncu lists among the stall reasons that are no stall: `selected` is the issue cycle itself, 1.0 per
# issued instruction by definition (seen so on every kernel of the H200 run in samples/h200-2026-12-01-ncu).
NOT_STALLS = frozenset({"selected"})


def parse_stalls(text: Any) -> dict[str, float]:
    """ncu_kernels.stalls as {reason: warp cycles per issued instruction}, the most first; {} for NULL or a
    malformed value. NOT_STALLS are left out (runs recorded before they were left out stored them)."""
    if not isinstance(text, str):
        return {}
    try:
        value = loads(text)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    pairs = [
        (str(k), float(v))
        for k, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and k not in NOT_STALLS
    ]
    return dict(sorted(pairs, key=lambda p: -p[1]))


def stalls_text(value: Any) -> str:
    """The top stall reasons of a kernel (stored text, or parse_stalls' dict) as one line: `long_scoreboard 12.3,
    barrier 4.1` (or `-`)."""
    stalls = value if isinstance(value, dict) else parse_stalls(value)
    return ", ".join(f"{reason} {cycles:.1f}" for reason, cycles in stalls.items()) or "-"


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
