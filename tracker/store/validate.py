"""Checks on rows that come from outside (an import folder) before anything is written: columns and their types,
id formats, enums, sizes and timestamps. An imported value may later be shown, diffed or passed to git, so a
file with one bad row is refused as a whole, with a message that names the file, the row and the column.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from tracker.store.schema import MIGRATIONS, TABLE_COLUMNS, VERDICTS

RUN_ID_RE = re.compile(r"^[0-9a-z]{6,40}$")  # generated ids are 12 hex digits; tests use readable ones
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
RUN_STATUSES = ("passed", "failed", "timeout", "crashed", "cancelled")  # `running` rows are never moved
RUN_MODES = ("test", "benchmark", "leaderboard")
TRIGGERS = ("cli", "ui")
DEFAULT_MAX_CHARS = 4096
# Larger caps for the columns that hold text by nature; each is well above what a run writes itself.
MAX_CHARS = {
    ("variants", "source"): 2_000_000,
    ("runs", "note"): 65_536,
    ("runs", "error"): 200_000,
    ("runs", "warnings"): 200_000,
    ("runs", "log_tail"): 65_536,
    ("runs", "git_diff"): 1_000_000,
    ("case_results", "message"): 65_536,
    ("profile_kernels", "kernel"): 65_536,
    ("verdicts", "reason"): 65_536,
}
OLDEST, NEWEST = datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)
INT32 = (-(2**31), 2**31 - 1)


class InvalidImport(ValueError):
    """An import folder holds a row that does not fit the schema; nothing was changed."""


@cache
def column_types() -> dict[str, dict[str, tuple[str, bool]]]:
    """{table: {column: (DuckDB type, nullable)}}, read from the migrations applied to an in-memory database."""
    con = duckdb.connect()
    try:
        for migration in MIGRATIONS:
            con.execute(migration)
        out: dict[str, dict[str, tuple[str, bool]]] = {}
        for table in TABLE_COLUMNS:
            rows = con.execute(f"DESCRIBE {table}").fetchall()
            out[table] = {name: (ctype, null == "YES") for name, ctype, null, *_ in rows}
        return out
    finally:
        con.close()


MAX_BLOB_BYTES = 256 * 1024 * 1024  # the most evidence one run keeps


def _arrow_type_fits(arrow_type: Any, duck_type: str) -> bool:
    import pyarrow as pa

    if pa.types.is_null(arrow_type):
        return True
    if duck_type == "VARCHAR":
        return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
    if duck_type in ("INTEGER", "BIGINT"):
        return pa.types.is_integer(arrow_type)
    if duck_type == "DOUBLE":
        return pa.types.is_floating(arrow_type) or pa.types.is_integer(arrow_type)
    if duck_type == "BOOLEAN":
        return pa.types.is_boolean(arrow_type)
    if duck_type.startswith("TIMESTAMP"):
        return pa.types.is_timestamp(arrow_type)
    if duck_type == "BLOB":  # failure evidence: compressed arrays
        return pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)
    return False


def _check_value(table: str, col: str, duck_type: str, value: Any) -> str | None:
    """Why the value does not fit, or None."""
    if isinstance(value, str):
        cap = MAX_CHARS.get((table, col), DEFAULT_MAX_CHARS)
        if len(value) > cap:
            return f"is {len(value):,} characters long (at most {cap:,})"
        if "\x00" in value:
            return "contains a NUL character"
    elif isinstance(value, bytes) and len(value) > MAX_BLOB_BYTES:
        return f"is {len(value):,} bytes (at most {MAX_BLOB_BYTES:,})"
    elif duck_type == "INTEGER" and isinstance(value, int) and not INT32[0] <= value <= INT32[1]:
        return f"is out of range for INTEGER ({value})"
    elif isinstance(value, float) and math.isinf(value):
        return "is infinite"
    elif isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        if not OLDEST <= moment <= NEWEST:
            return f"is an implausible time ({value})"
    return None


def _check_formats(table: str, row: dict[str, Any], suites: Collection[str] | None) -> str | None:
    """Formats and enums of the columns that other code relies on: (column, why) as text, or None."""
    checks: list[tuple[str, Any, bool]] = []
    if "run_id" in row:
        checks.append(("run_id", row["run_id"], bool(RUN_ID_RE.match(row["run_id"] or ""))))
    if table == "variants":
        checks.append(("sha256", row["sha256"], bool(SHA256_RE.match(row["sha256"] or ""))))
    if table == "runs":
        commit, parent, suite = row.get("git_commit"), row.get("parent_run"), row["suite"]
        checks += [
            ("variant_sha256", row["variant_sha256"], bool(SHA256_RE.match(row["variant_sha256"] or ""))),
            ("status", row["status"], row["status"] in RUN_STATUSES),
            ("mode", row["mode"], row["mode"] in RUN_MODES),
            ("suite", suite, bool(NAME_RE.match(suite or "")) and (suites is None or suite in suites)),
            ("trigger", row.get("trigger"), row.get("trigger") in (None, *TRIGGERS)),
            ("git_commit", commit, commit is None or bool(COMMIT_RE.match(commit))),
            ("parent_run", parent, parent is None or bool(RUN_ID_RE.match(parent))),
        ]  # fmt: skip
    if table == "verdicts":
        checks.append(("verdict", row["verdict"], row["verdict"] in VERDICTS))
        sha = row.get("variant_sha256")
        checks.append(("variant_sha256", sha, sha is None or bool(SHA256_RE.match(sha))))
    for col, value, ok in checks:
        if not ok:
            shown = repr(value) if not isinstance(value, str) or len(value) < 80 else repr(value[:80]) + "..."
            return f"column {col} has the invalid value {shown}"
    return None


def read_export(folder: str | Path, suites: Collection[str] | None = None) -> dict[str, Any]:
    """Read and check every Parquet file of an export folder; {table: pyarrow.Table} with the store's columns.

    Raises InvalidImport naming the first problem. Nothing is written here.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    types = column_types()
    tables: dict[str, Any] = {}
    for table in TABLE_COLUMNS:
        path = folder / f"{table}.parquet"
        if not path.is_file():
            continue
        try:
            data = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            raise InvalidImport(f"{path} is not a readable Parquet file: {exc}") from None
        expected = types[table]
        unknown = [c for c in data.column_names if c not in expected]
        if unknown:
            raise InvalidImport(f"{path}: unknown column(s) {', '.join(map(repr, unknown))}")
        for col, (duck_type, nullable) in expected.items():
            if col not in data.column_names:
                if not nullable:
                    raise InvalidImport(f"{path}: the required column {col!r} is missing")
                continue
            arrow_type = data.schema.field(col).type
            if not _arrow_type_fits(arrow_type, duck_type):
                raise InvalidImport(f"{path}: column {col!r} has type {arrow_type}, expected {duck_type}")
        for i, row in enumerate(data.to_pylist()):
            for col, value in row.items():
                duck_type, nullable = expected[col]
                if value is None:
                    if not nullable:
                        raise InvalidImport(f"{path}, row {i}: column {col!r} is empty but required")
                    continue
                problem = _check_value(table, col, duck_type, value)
                if problem:
                    raise InvalidImport(f"{path}, row {i}: column {col!r} {problem}")
            for col, (_, nullable) in expected.items():
                if col not in row and not nullable:
                    raise InvalidImport(f"{path}, row {i}: column {col!r} is missing")
            problem = _check_formats(table, row, suites)
            if problem:
                raise InvalidImport(f"{path}, row {i}: {problem}")
        tables[table] = data
    if "runs" not in tables:
        raise InvalidImport(f"{folder} holds no runs.parquet export")
    run_ids = set(tables["runs"].column("run_id").to_pylist())
    if len(run_ids) != tables["runs"].num_rows:
        raise InvalidImport(f"{folder / 'runs.parquet'} lists a run id twice")
    for table, data in tables.items():
        if table in ("runs", "variants"):
            continue
        stray = set(data.column("run_id").to_pylist()) - run_ids
        if stray:
            shown = sorted(stray)[:3]
            raise InvalidImport(f"{folder / (table + '.parquet')} has rows of runs not in runs.parquet: {shown}")
    return tables
