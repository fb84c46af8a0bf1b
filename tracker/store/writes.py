"""The write path: a run's `running` row when it starts, the whole record in one transaction when it ends (or a
side file if the store stays locked), the flush of side files, variant registration, variant names and verdicts."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from tracker.common.errors import InputError
from tracker.common.vocabulary import DEFAULT_WORKLOAD
from tracker.store.connection import StoreLockedError, connect, now
from tracker.store.records import RunRecord
from tracker.store.schema import RUN_TABLES, TABLE_COLUMNS, VERDICTS
from tracker.store.sidefiles import (
    PendingRun,
    drop_checkpoint,
    owner_alive,
    pending_dir,
    read_side_file,
    save_side_file,
)
from tracker.store.validate import check_record


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    cols = TABLE_COLUMNS[table]
    sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    con.executemany(sql, [[row.get(c) for c in cols] for row in rows])


def _insert_samples(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    samples: Sequence[tuple[int, int, float]],
) -> None:
    if not samples:
        return
    # one statement with the columns as list parameters, zipped by unnest: no per-row statements, and no pyarrow
    # or pandas import in the CLI's front (about 0.5 s of CPU for each `run`)
    case_idx, rep, time_us = zip(*samples, strict=True)

    def plain(values, kind):  # DuckDB binds no NumPy scalar inside a list parameter
        return [None if v is None else kind(v) for v in values]

    con.execute(
        "INSERT INTO samples (run_id, case_idx, rep, time_us) "
        "SELECT ?, unnest(?::INTEGER[]), unnest(?::INTEGER[]), unnest(?::DOUBLE[])",
        [run_id, plain(case_idx, int), plain(rep, int), plain(time_us, float)],
    )


def _upsert_variant(con: duckdb.DuckDBPyConnection, variant: dict[str, Any]) -> None:
    exists = con.execute("SELECT 1 FROM variants WHERE sha256 = ?", [variant["sha256"]]).fetchone()
    if not exists:  # only the columns a run knows, so a store not yet migrated (see migrate) still takes it
        cols = [c for c in TABLE_COLUMNS["variants"] if c in variant]
        sql = f"INSERT INTO variants ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        con.execute(sql, [variant[c] for c in cols])
        # New content of a run: its file's name stands for it now (a changed file keeps its name, as before names
        # had a table); content already known keeps its names.
        record_name(con, {**variant, "family": None, "added_at": variant.get("first_seen") or now()})


def record_name(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    """Make `row["name"]` stand for the content `row["sha256"]` (a variant_names row: name, sha256, path, family,
    added_at). A name already recording this content keeps its path and family (a family it lacks is filled in);
    one recording other content moves to this one, keeping its family unless a new one is given. Whether it may
    move (the same file, changed) is the caller's rule (tracker.variants.register)."""
    held = con.execute("SELECT sha256 FROM variant_names WHERE name = ?", [row["name"]]).fetchone()
    if held is None:
        _insert(con, "variant_names", [row])
    elif held[0] == row["sha256"]:
        con.execute(
            "UPDATE variant_names SET family = coalesce(family, ?) WHERE name = ?", [row.get("family"), row["name"]]
        )
    else:
        con.execute(
            "UPDATE variant_names SET sha256 = ?, path = ?, family = coalesce(?, family), added_at = ? WHERE name = ?",
            [row["sha256"], row.get("path"), row.get("family"), row["added_at"], row["name"]],
        )


# Registration metadata filled in on a variant that a run recorded first (a run knows no commit message).
_VARIANT_META = ("commit", "committed_at", "message", "family", "parent", "registered_at")


def write_run(con: duckdb.DuckDBPyConnection, record: RunRecord) -> None:
    """Write a complete run in one transaction, replacing a `running` row of the same id."""
    run_id = record.run.run_id
    con.execute("BEGIN TRANSACTION")
    try:
        _upsert_variant(con, record.variant)
        con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for table in RUN_TABLES:
            if table in present:  # a store written before a table was added (migrations add it on open)
                con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
        # A record that names no problem is of the default one, as the schema's column default says.
        _insert(con, "runs", [{**record.run.as_dict(), "problem": record.run.problem or DEFAULT_WORKLOAD}])
        _insert(con, "case_results", [{**c, "run_id": run_id} for c in record.cases])
        _insert_samples(con, run_id, record.samples)
        _insert(
            con,
            "profile_cases",
            [{**p, "run_id": run_id} for p in record.profile_cases],
        )
        _insert(
            con,
            "profile_kernels",
            [{**p, "run_id": run_id} for p in record.profile_kernels],
        )
        _insert(con, "evidence", [{**e, "run_id": run_id} for e in record.evidence])
        _insert(con, "ncu_cases", [{**c, "run_id": run_id} for c in record.ncu_cases])
        _insert(con, "ncu_kernels", [{**k, "run_id": run_id} for k in record.ncu_kernels])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


@dataclass
class FlushResult:
    """What a flush of the side folder did: runs written, and side files kept because they could not be read."""

    written: list[str] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)  # (side file, why)


def _flush_pending(con: duckdb.DuckDBPyConnection, path: str | os.PathLike) -> FlushResult:
    folder = pending_dir(path)
    result = FlushResult()
    for side in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if owner_alive(side):  # a run still being recorded
            continue
        try:
            record = read_side_file(side)
            check_record(record, side)  # values too: a side file is imported data until proven otherwise
        except (OSError, ValueError, TypeError, KeyError) as exc:  # kept for a person to see, and reported
            result.unreadable.append((side, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        row = con.execute("SELECT status FROM runs WHERE run_id = ?", [record.run.run_id]).fetchone()
        if row is not None and row[0] != "running":  # a copy of a checkpoint put back after its run was recorded
            print(f"side file {side} dropped: run {record.run.run_id} is already recorded ({row[0]})", file=sys.stderr)
            side.unlink(missing_ok=True)
            continue
        try:
            write_run(con, record)
        except Exception as exc:  # noqa: BLE001 - a bad side file must not block every later write
            result.unreadable.append((side, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        side.unlink()
        result.written.append(side.stem)
    if result.unreadable:
        for side, why in result.unreadable:
            print(f"side file {side} kept: it cannot be written into the store ({why})", file=sys.stderr)
    return result


class RunWrites:
    """The write path of the store at `self.path` (a mixin of tracker.store.Store)."""

    path: str | os.PathLike

    def start_run(self, record: RunRecord) -> None:
        """Write the run row as `running` (and its variant) so a crash of the tracker itself stays visible."""
        with connect(self.path) as con:
            con.execute("BEGIN TRANSACTION")
            _upsert_variant(con, record.variant)
            problem = record.run.problem or DEFAULT_WORKLOAD
            _insert(con, "runs", [{**record.run.as_dict(), "status": "running", "problem": problem}])
            con.execute("COMMIT")

    def register_variants(self, variants: Sequence[dict[str, Any]], names: Sequence[dict[str, Any]] = ()) -> list[str]:
        """Register variants without running them, and then names (variant_names rows, in order: record_name), in
        one transaction; returns the sha256 of the variants added.

        Content already in the store adds nothing; only registration fields it lacks are filled in. The names are
        the caller's: a variant's own name is recorded only as one of them."""
        added: list[str] = []
        with connect(self.path) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                for v in variants:
                    if con.execute("SELECT 1 FROM variants WHERE sha256 = ?", [v["sha256"]]).fetchone():
                        sets = ", ".join(f"{c} = coalesce({c}, ?)" for c in _VARIANT_META)
                        con.execute(
                            f"UPDATE variants SET {sets} WHERE sha256 = ?",
                            [*(v.get(c) for c in _VARIANT_META), v["sha256"]],
                        )
                    else:
                        _insert(con, "variants", [v])
                        added.append(v["sha256"])
                for row in names:
                    record_name(con, row)
                con.execute("COMMIT")
            except Exception:
                con.execute("ROLLBACK")
                raise
        return added

    def finish_run(
        self,
        record: RunRecord,
        *,
        retry_seconds: float | None = None,
        flushed: FlushResult | None = None,
    ) -> PendingRun | None:
        """Complete a run in the store. If that fails (a lock held past the retry limit, or any other error),
        save the run to a JSON side file and say where; the next successful writer brings it in (`flush_pending`).
        `flushed`, if given, receives what the flush of earlier side files did (and which it could not read).
        """
        try:
            with connect(self.path, retry_seconds=retry_seconds) as con:
                write_run(con, record)
                drop_checkpoint(self.path, record.run.run_id)
                result = _flush_pending(con, self.path)
            if flushed is not None:
                flushed.written[:], flushed.unreadable[:] = result.written, result.unreadable
            return None
        except Exception as exc:  # keep the run on disk rather than lose it
            locked = isinstance(exc, StoreLockedError)
            pending = save_side_file(
                self.path, record, "the store stayed locked" if locked else f"writing failed: {exc}"
            )
            if pending.fallback:
                drop_checkpoint(self.path, record.run.run_id)
            return pending

    def flush_pending(self) -> FlushResult:
        """Write runs saved in side files into the store; says which side files it could not read."""
        with connect(self.path) as con:
            return _flush_pending(con, self.path)

    def add_verdict(self, run_id: str, verdict: str, reason: str = "", assumption: str | None = None) -> None:
        if verdict not in VERDICTS:
            raise InputError(f"verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}")
        with connect(self.path) as con:
            row = con.execute("SELECT variant_sha256 FROM runs WHERE run_id = ?", [run_id]).fetchone()
            if row is None:
                raise InputError(f"no run {run_id!r} in {self.path}")
            _insert(
                con,
                "verdicts",
                [
                    {
                        "run_id": run_id,
                        "variant_sha256": row[0],
                        "verdict": verdict,
                        "reason": reason,
                        "assumption": assumption,
                        "created_at": now(),
                    }
                ],
            )
