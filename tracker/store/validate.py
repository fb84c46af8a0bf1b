"""Checks on rows that come from outside (an import folder, a pending side file) before anything is written:
columns and their types, id formats, enums, values (finite positive timings, timestamps neither before 2000 nor
in the future, well-formed JSON columns), sizes per value and per run. An imported value may later be shown,
diffed or judged, so a file with one bad row is refused as a whole, with a message that names the file, the
row, the run and the column.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from tracker.common.errors import InputError
from tracker.common.gitinfo import source_hash
from tracker.common.jsonfields import json_problem
from tracker.common.vocabulary import FINISHED_STATUSES, RUN_MODES
from tracker.store.records import RunRow
from tracker.store.schema import (
    GPU_STATE_COLUMNS,
    MIGRATIONS,
    RUN_METHODS,
    RUN_TABLES,
    TABLE_COLUMNS,
    THROTTLE_REASONS,
    VERDICTS,
)

RUN_ID_RE = re.compile(r"^[0-9a-z]{6,40}$")  # generated ids are 12 hex digits; tests use readable ones
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
TRIGGERS = ("cli", "ui", "import")  # import: `import-results`, a contest result stream recorded as a run
DEFAULT_MAX_CHARS = 4096
# Larger caps for the columns that hold text by nature; each is well above what a run writes itself.
MAX_CHARS = {
    ("variants", "source"): 2_000_000,
    ("runs", "note"): 65_536,
    ("runs", "error"): 200_000,
    ("runs", "warnings"): 200_000,
    ("runs", "log_tail"): 65_536,
    ("runs", "git_diff"): 1_000_000,
    ("runs", "flags"): 200_000,
    ("runs", "helper_sources"): 1_100_000,
    ("runs", "harness_files"): 65_536,
    ("runs", "sandbox"): 1_000,
    ("runs", "device_load_start"): 65_536,
    ("runs", "device_load_end"): 65_536,
    ("case_results", "args"): 65_536,
    ("case_results", "message"): 65_536,
    ("profile_kernels", "kernel"): 65_536,
    ("ncu_kernels", "kernel"): 65_536,
    ("ncu_cases", "error"): 65_536,
    ("verdicts", "reason"): 65_536,
    ("verdicts", "assumption"): 65_536,
}
OLDEST = datetime(2000, 1, 1, tzinfo=UTC)
CLOCK_SKEW = timedelta(days=1)  # a run recorded on a machine whose clock runs ahead is still accepted
# Timing columns: a measured time is finite and above zero; a spread (std, err) or a total may be zero.
POSITIVE = {
    ("samples", "time_us"), ("runs", "geomean_us"),
    *(("case_results", c) for c in ("mean_us", "median_us", "best_us", "worst_us", "wall_us", "fresh_us")),
}  # fmt: skip
NON_NEGATIVE = {
    ("case_results", "std_us"), ("case_results", "err_us"), ("case_results", "runs"), ("case_results", "flops"),
    ("case_results", "bytes"), ("runs", "compile_s"), ("profile_cases", "host_us"), ("profile_cases", "device_us"),
    ("profile_cases", "launches"), ("profile_kernels", "device_us"), ("profile_kernels", "self_us"),
    ("profile_kernels", "calls"), ("evidence", "arrays_bytes"), ("samples", "rep"),
    ("runs", "pair_round"),
    *(("case_results", c) for c in GPU_STATE_COLUMNS if c != "throttle"),  # clocks, watts, degrees, a count
    ("ncu_cases", "kernels"),
    *(("ncu_kernels", c) for c in ("kernel_idx", "duration_us", "occupancy_pct", "sm_pct", "memory_pct", "registers",
                                   "static_smem_bytes", "dynamic_smem_bytes", "block_size", "grid_size")),
}  # fmt: skip
NCU_REPORT_RE = re.compile(r"^ncu-case[0-9]{1,6}\.ncu-rep$")  # a file name in <store>.traces/RUN/, never a path
# Residuals judge a kernel's output; a garbage output makes them NaN or infinite, and that is the record.
NON_FINITE_OK = {("case_results", c) for c in ("factor_res", "tril_res", "recon_res", "orth_res")} | {
    ("evidence", c) for c in ("factor_res", "tril_res", "recon_res", "orth_res")
}
INT32 = (-(2**31), 2**31 - 1)


def name_problem(name: str) -> str | None:
    """Why a variant name cannot be recorded (`add --name`, an imported variant_names row), or None: it must say
    something (not empty or blank) and fit the column's cap, as any stored text."""
    if not name.strip():
        return "is empty"
    return _check_value("variant_names", "name", "VARCHAR", name)


class InvalidImport(InputError):
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


MAX_BLOB_BYTES = 256 * 1024 * 1024  # the most evidence one run keeps (capture.evidence.MAX_RUN_BYTES)
MAX_RUN_TEXT_CHARS = 16 * 1024 * 1024  # all text of one run (error, log tail, flags, messages, kernel names...)
MAX_RUN_ROWS = 2_000_000  # rows of one run over its tables (samples: at most 200 repetitions per case)


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


def _python_type_fits(duck_type: str, value: Any) -> bool:
    """A value of a side file (decoded JSON) against the column's type; timestamps come as ISO text."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if duck_type == "VARCHAR":
        return isinstance(value, str)
    if duck_type in ("INTEGER", "BIGINT"):
        return isinstance(value, int) and not isinstance(value, bool)
    if duck_type == "DOUBLE":
        return number
    if duck_type == "BOOLEAN":
        return isinstance(value, bool)
    if duck_type.startswith("TIMESTAMP"):
        return isinstance(value, datetime | str)
    if duck_type == "BLOB":
        return isinstance(value, bytes)
    return False


def _moment(value: datetime | str) -> datetime | None:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _check_value(table: str, col: str, duck_type: str, value: Any) -> str | None:
    """Why the value does not fit, or None."""
    if isinstance(value, str) and not duck_type.startswith("TIMESTAMP"):
        cap = MAX_CHARS.get((table, col), DEFAULT_MAX_CHARS)
        if len(value) > cap:
            return f"is {len(value):,} characters long (at most {cap:,})"
        if "\x00" in value:
            return "contains a NUL character"
        return json_problem(table, col, value)
    if isinstance(value, bytes):
        return f"is {len(value):,} bytes (at most {MAX_BLOB_BYTES:,})" if len(value) > MAX_BLOB_BYTES else None
    if duck_type == "INTEGER" and isinstance(value, int) and not INT32[0] <= value <= INT32[1]:
        return f"is out of range for INTEGER ({value})"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value) and (table, col) not in NON_FINITE_OK:
            return f"is not a finite number ({value})"
        if (table, col) in POSITIVE and not value > 0:
            return f"is not a positive time ({value})"
        if (table, col) in NON_NEGATIVE and not value >= 0:
            return f"is negative ({value})"
        return None
    if isinstance(value, datetime | str):  # a timestamp column
        moment = _moment(value)
        if moment is None:
            return f"is not a timestamp ({value!r:.80})"
        if not OLDEST <= moment <= datetime.now(UTC) + CLOCK_SKEW:
            return f"is an implausible time ({value}: before {OLDEST:%Y} or in the future)"
    return None


def _check_formats(table: str, row: dict[str, Any], suites: Collection[str] | None) -> str | None:
    """Formats and enums of the columns that other code relies on: (column, why) as text, or None."""
    checks: list[tuple[str, Any, bool]] = []
    if "run_id" in row:
        checks.append(("run_id", row["run_id"], bool(RUN_ID_RE.match(row["run_id"] or ""))))
    if table == "variants":
        checks.append(("sha256", row["sha256"], bool(SHA256_RE.match(row["sha256"] or ""))))
        source = row.get("source")
        if isinstance(source, str) and source_hash(source) != row["sha256"]:
            # a content is known by its hash: another file's hash would lend this source that file's runs
            return f"column sha256 is not the hash of the variant's source ({row['sha256']!s:.16}...)"
    if table == "runs":
        commit, parent, suite = row.get("git_commit"), row.get("parent_run"), row["suite"]
        checks += [
            ("variant_sha256", row["variant_sha256"], bool(SHA256_RE.match(row["variant_sha256"] or ""))),
            ("status", row["status"], row["status"] in FINISHED_STATUSES),
            ("mode", row["mode"], row["mode"] in RUN_MODES),
            ("suite", suite, bool(NAME_RE.match(suite or "")) and (suites is None or suite in suites)),
            ("trigger", row.get("trigger"), row.get("trigger") in (None, *TRIGGERS)),
            ("method", row.get("method"), row.get("method") in (None, *RUN_METHODS)),
            ("pair_id", row.get("pair_id"), row.get("pair_id") is None or bool(RUN_ID_RE.match(row["pair_id"]))),
            ("pair_side", row.get("pair_side"), row.get("pair_side") in (None, "A", "B")),
            ("git_commit", commit, commit is None or bool(COMMIT_RE.match(commit))),
            ("parent_run", parent, parent is None or bool(RUN_ID_RE.match(parent))),
        ]  # fmt: skip
    if table == "case_results" and row.get("throttle") is not None:  # "" (none seen) or known names, comma-separated
        names = [n for n in str(row["throttle"]).split(",") if n]
        checks.append(("throttle", row["throttle"], all(n in THROTTLE_REASONS.values() for n in names)))
    if table == "ncu_cases" and row.get("report") is not None:
        checks.append(("report", row["report"], bool(NCU_REPORT_RE.match(str(row["report"])))))
    if table == "variant_names":
        checks.append(("sha256", row["sha256"], bool(SHA256_RE.match(row["sha256"] or ""))))
        checks.append(("name", row["name"], name_problem(row["name"] or "") is None))
    if table == "verdicts":
        checks.append(("verdict", row["verdict"], row["verdict"] in VERDICTS))
        sha = row.get("variant_sha256")
        checks.append(("variant_sha256", sha, sha is None or bool(SHA256_RE.match(sha))))
    for col, value, ok in checks:
        if not ok:
            shown = repr(value) if not isinstance(value, str) or len(value) < 80 else repr(value[:80]) + "..."
            return f"column {col} has the invalid value {shown}"
    return None


class _RunTotals:
    """Text, evidence bytes and rows per run over all its tables: a bound per run, not only per value."""

    def __init__(self) -> None:
        self.text: dict[str, int] = {}
        self.blob: dict[str, int] = {}
        self.rows: dict[str, int] = {}
        self.cases: set[tuple[str, Any]] = set()

    def case(self, run_id: Any, row: dict[str, Any]) -> str | None:
        """A run's case appears once (by its index; labels may repeat: a problem folder's cases that differ only
        in their seed share one)."""
        seen = (str(run_id), row.get("case_idx"))
        if seen in self.cases:
            return f"run {run_id} has two rows of case {row.get('case_idx')}"
        self.cases.add(seen)
        return None

    def add(self, run_id: Any, row: dict[str, Any]) -> str | None:
        if not isinstance(run_id, str):
            return None
        text = sum(len(v) for v in row.values() if isinstance(v, str))
        blob = sum(len(v) for v in row.values() if isinstance(v, bytes))
        self.text[run_id] = self.text.get(run_id, 0) + text
        self.blob[run_id] = self.blob.get(run_id, 0) + blob
        self.rows[run_id] = self.rows.get(run_id, 0) + 1
        if self.text[run_id] > MAX_RUN_TEXT_CHARS:
            return f"run {run_id} holds more than {MAX_RUN_TEXT_CHARS:,} characters of text"
        if self.blob[run_id] > MAX_BLOB_BYTES:
            return f"run {run_id} holds more than {MAX_BLOB_BYTES:,} bytes of evidence"
        if self.rows[run_id] > MAX_RUN_ROWS:
            return f"run {run_id} has more than {MAX_RUN_ROWS:,} rows"
        return None


def _check_row(
    table: str,
    row: dict[str, Any],
    totals: _RunTotals,
    suites: Collection[str] | None,
    *,
    check_types: bool,
) -> str | None:
    """Why one row does not fit its table (naming the column), or None. `check_types`: values of a side file,
    which has no typed schema of its own (an export file's column types are checked once per file)."""
    expected = column_types()[table]
    for col, (duck_type, nullable) in expected.items():
        value = row.get(col)
        if value is None:
            if not nullable:
                return f"column {col!r} is empty but required"
            continue
        if check_types and not _python_type_fits(duck_type, value):
            return f"column {col!r} holds {type(value).__name__} {value!r:.80}, expected {duck_type}"
        problem = _check_value(table, col, duck_type, value)
        if problem:
            return f"column {col!r} {problem}"
    if table == "evidence" and isinstance(row.get("arrays"), bytes) and row.get("arrays_bytes") != len(row["arrays"]):
        return f"column 'arrays_bytes' says {row.get('arrays_bytes')} but the arrays hold {len(row['arrays'])} bytes"
    problem = _check_formats(table, row, suites) or (
        totals.case(row.get("run_id"), row) if table == "case_results" else None
    )
    if problem:
        return problem
    return totals.add(row.get("run_id"), row) if table not in ("variants", "variant_names") else None


def row_problem(table: str, row: dict[str, Any]) -> str | None:
    """Why one row of a run's table (run_id set) does not fit the store, or None: the import's checks, for rows a
    run's worker sent (its profile) before they go into the record."""
    return _check_row(table, row, _RunTotals(), None, check_types=True)


def _who(row: dict[str, Any]) -> str:
    return f" (run {row['run_id']})" if isinstance(row.get("run_id"), str) and len(row["run_id"]) <= 40 else ""


def read_export(folder: str | Path, suites: Collection[str] | None = None) -> dict[str, Any]:
    """Read and check every Parquet file of an export folder; {table: pyarrow.Table} with the store's columns.

    Raises InvalidImport naming the first problem. Nothing is written here.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    types = column_types()
    tables: dict[str, Any] = {}
    totals = _RunTotals()
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
            problem = _check_row(table, row, totals, suites, check_types=False)
            if problem:
                raise InvalidImport(f"{path}, row {i}{_who(row)}: {problem}")
        tables[table] = data
    if "runs" not in tables:
        raise InvalidImport(f"{folder} holds no runs.parquet export")
    run_ids = set(tables["runs"].column("run_id").to_pylist())
    if len(run_ids) != tables["runs"].num_rows:
        raise InvalidImport(f"{folder / 'runs.parquet'} lists a run id twice")
    _check_names(folder, tables)
    for table, data in tables.items():
        if table in ("runs", "variants", "variant_names"):
            continue
        stray = set(data.column("run_id").to_pylist()) - run_ids
        if stray:
            shown = sorted(stray)[:3]
            raise InvalidImport(f"{folder / (table + '.parquet')} has rows of runs not in runs.parquet: {shown}")
    return tables


def _check_names(folder: Path, tables: dict[str, Any]) -> None:
    """An export's names: each once, each of a content the export carries (a name of nothing would resolve to
    nothing, or to another store's content)."""
    data = tables.get("variant_names")
    if data is None:
        return
    twice = sorted(n for n, k in Counter(data.column("name").to_pylist()).items() if k > 1)
    if twice:
        raise InvalidImport(f"{folder / 'variant_names.parquet'} lists the name {twice[0]!r} twice")
    carried = set(tables["variants"].column("sha256").to_pylist()) if "variants" in tables else set()
    for i, row in enumerate(data.to_pylist()):
        if row["sha256"] not in carried:
            raise InvalidImport(
                f"{folder / 'variant_names.parquet'}, row {i}: the name {row['name']!r} is of content "
                f"{row['sha256'][:12]} that variants.parquet does not carry"
            )


def check_record(record: Any, source: str | Path) -> None:
    """Check a run record read from a side file (tracker.store.records.RunRecord) as an import row by row; raises
    InvalidImport naming the file, the table, the run and the column. Nothing is written here."""
    run = record.run.as_dict() if isinstance(record.run, RunRow) else record.run
    run_id = run.get("run_id") if isinstance(run, dict) else None
    rows: dict[str, list[Any]] = {
        "runs": [run],
        "variants": [record.variant],
        "case_results": record.cases,
        "samples": [
            {"case_idx": s[0], "rep": s[1], "time_us": s[2]} if isinstance(s, list | tuple) and len(s) == 3 else s
            for s in record.samples
        ],
        "profile_cases": record.profile_cases,
        "profile_kernels": record.profile_kernels,
        "evidence": record.evidence,
        "ncu_cases": record.ncu_cases,
        "ncu_kernels": record.ncu_kernels,
    }
    totals = _RunTotals()
    for table, items in rows.items():
        if not isinstance(items, list):
            raise InvalidImport(f"{source}: {table} is not a list")
        for i, row in enumerate(items):
            if not isinstance(row, dict):
                raise InvalidImport(f"{source}: {table} row {i} is not an object")
            if table in RUN_TABLES:  # the runner writes these rows without the run id; the run's is theirs
                row = {**row, "run_id": run_id}
            problem = _check_row(table, row, totals, None, check_types=True)
            if problem:
                raise InvalidImport(f"{source}: {table} row {i}{_who(row)}: {problem}")
