"""Moving runs between stores as Parquet: export a selection of runs, import them elsewhere (no duplicates)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection
from pathlib import Path

import duckdb

from tracker.common.errors import InputError
from tracker.store.connection import connect
from tracker.store.schema import RUN_TABLES, TABLE_COLUMNS, newest_names_sql
from tracker.store.sidefiles import traces_dir
from tracker.store.validate import NCU_REPORT_RE, RUN_ID_RE, read_export

EXPORT_TABLES = ("runs", "variants", "variant_names", *RUN_TABLES, "verdicts")  # names after their variants
NCU_FOLDER = "ncu"  # an export's Nsight Compute reports: ncu/RUN/ncu-caseN.ncu-rep
MAX_NCU_REPORT_BYTES = 256 << 20
# Columns an export file must have (the NOT NULL ones); any other column of ours it lacks (an export from an
# older tracker) is imported as NULL, and columns we do not know are ignored.
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "variants": ("sha256", "name", "source", "first_seen"),
    "variant_names": ("name", "sha256", "added_at"),
    "runs": ("run_id", "variant_sha256", "variant", "status", "suite", "mode", "started_at"),
    "case_results": ("run_id", "case_idx", "spec", "kind", "passed"),
    "samples": ("run_id", "case_idx", "rep", "time_us"),
    "profile_cases": ("run_id", "case_idx"),
    "profile_kernels": ("run_id", "case_idx"),
    "evidence": ("run_id", "case_idx"),
    "ncu_cases": ("run_id", "case_idx"),
    "ncu_kernels": ("run_id", "case_idx", "kernel_idx"),
    "verdicts": ("run_id", "verdict", "created_at"),
}


NAME_COLUMNS = ", ".join(TABLE_COLUMNS["variant_names"])  # the order newest_names_sql gives them in
# Which exported rows an import adds: runs the store lacks, with their rows; variants (content) it lacks; names
# it lacks, of content it has once the variants are in (a name the store has already keeps its content).
_IMPORT_WHERE = {
    "variants": "sha256 NOT IN (SELECT sha256 FROM variants)",
    "variant_names": "name NOT IN (SELECT name FROM variant_names) AND sha256 IN (SELECT sha256 FROM variants)",
}


def export_runs(
    store: str | os.PathLike,
    folder: str | os.PathLike,
    run_ids: list[str] | None = None,
) -> int:
    """Write the runs (all, or those listed), their variants and everything recorded for them, one Parquet
    file per table. Returns the number of runs exported."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with connect(store, read_only=True) as con:
        con.execute("CREATE TEMP TABLE chosen (run_id VARCHAR)")
        if run_ids is None:
            con.execute("INSERT INTO chosen SELECT run_id FROM runs WHERE status <> 'running'")
        else:
            con.executemany("INSERT INTO chosen VALUES (?)", [[r] for r in run_ids])
        count = con.execute("SELECT count(*) FROM runs WHERE run_id IN (SELECT run_id FROM chosen)").fetchone()[0]
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for table in (t for t in EXPORT_TABLES if t in present):  # a store of an older schema lacks newer ones
            where = (
                "sha256 IN (SELECT variant_sha256 FROM runs WHERE run_id IN (SELECT run_id FROM chosen))"
                if table in ("variants", "variant_names")  # the names of the exported variants' content
                else "run_id IN (SELECT run_id FROM chosen)"
            )
            target = str(folder / f"{table}.parquet").replace("'", "''")
            con.execute(f"COPY (SELECT * FROM {table} WHERE {where}) TO '{target}' (FORMAT parquet)")
        reports = (
            con.execute(
                "SELECT run_id, report FROM ncu_cases WHERE report IS NOT NULL "
                "AND run_id IN (SELECT run_id FROM chosen)"
            ).fetchall()
            if "ncu_cases" in present
            else []
        )
    for run_id, name in reports:  # the reports go along with their rows
        src = traces_dir(store, run_id) / name
        if src.is_file():
            (folder / NCU_FOLDER / run_id).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, folder / NCU_FOLDER / run_id / name)
    return count


def _import_reports(store: str | os.PathLike, folder: Path, run_ids: list[str], tables: dict) -> None:
    """Copy the Nsight Compute reports of the imported runs beside the store (names checked on import)."""
    data = tables.get("ncu_cases")
    if data is None:
        return
    wanted = set(run_ids)
    for row in data.select(["run_id", "report"]).to_pylist():
        run_id, name = row["run_id"], row["report"]
        if run_id not in wanted or not name or not RUN_ID_RE.match(run_id) or not NCU_REPORT_RE.match(name):
            continue
        src = folder / NCU_FOLDER / run_id / name
        if src.is_file() and not src.is_symlink() and src.stat().st_size <= MAX_NCU_REPORT_BYTES:
            traces_dir(store, run_id).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, traces_dir(store, run_id) / name)


def check_export(folder: str | os.PathLike) -> dict[str, list[str]]:
    """Raise ValueError (FileNotFoundError for a missing folder) unless every table file of an export folder is
    readable Parquet with the columns we need; nothing is read into a store. Returns, per table file present,
    the columns of ours it has."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no export folder at {folder}")
    if not (folder / "runs.parquet").is_file():
        raise FileNotFoundError(f"{folder} holds no runs.parquet export")
    found: dict[str, list[str]] = {}
    with duckdb.connect() as con:
        for table in EXPORT_TABLES:
            path = folder / f"{table}.parquet"
            if not path.is_file():
                continue
            try:
                have = {row[0] for row in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()}
                con.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()
            except duckdb.Error as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise InputError(f"{path} is not a readable Parquet file: {first}") from None
            missing = [c for c in REQUIRED_COLUMNS[table] if c not in have]
            if missing:
                raise InputError(f"{path} is not a KernelBeam {table} export: it lacks columns {', '.join(missing)}")
            found[table] = [c for c in TABLE_COLUMNS[table] if c in have]
    return found


def import_runs(store: str | os.PathLike, folder: str | os.PathLike, suites: Collection[str] | None = None) -> int:
    """Add the runs of an export folder that the store does not have yet, in one transaction.

    Every row is checked first (tracker.store.validate); a folder with one bad row is refused as a whole
    (InvalidImport, a ValueError) and the store is not touched. The checked data is what gets inserted."""
    folder = Path(folder)
    if not (folder / "runs.parquet").is_file():
        raise FileNotFoundError(f"{folder} holds no runs.parquet export")
    check_export(folder)
    tables = read_export(folder, suites)
    with connect(store) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            for table, data in tables.items():
                con.register(f"import_{table}", data)
            con.execute("CREATE TEMP TABLE new_runs AS SELECT run_id FROM import_runs")
            con.execute("DELETE FROM new_runs WHERE run_id IN (SELECT run_id FROM runs)")
            new_ids = [r[0] for r in con.execute("SELECT run_id FROM new_runs").fetchall()]
            added = len(new_ids)
            for table in EXPORT_TABLES:
                if table not in tables:
                    continue
                present = set(tables[table].column_names)
                cols = ", ".join(c for c in TABLE_COLUMNS[table] if c in present)  # whitelisted names only
                where = _IMPORT_WHERE.get(table, "run_id IN (SELECT run_id FROM new_runs)")
                con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM import_{table} WHERE {where}")
            if "variants" in tables:  # names the export did not carry (one from before v12): as v12 backfills them
                fresh = "(SELECT * FROM variants WHERE sha256 IN (SELECT sha256 FROM import_variants))"
                con.execute(
                    f"INSERT INTO variant_names ({NAME_COLUMNS}) SELECT * FROM ({newest_names_sql(fresh)}) "
                    "WHERE name NOT IN (SELECT name FROM variant_names)"
                )
            exported = tables.get("case_results")
            if exported is not None and "median_us" not in exported.column_names:  # export from before v3
                con.execute(
                    "UPDATE case_results SET median_us = m.median_us FROM (SELECT run_id, case_idx, "
                    "median(time_us) AS median_us FROM samples WHERE run_id IN (SELECT run_id FROM new_runs) "
                    "GROUP BY run_id, case_idx) m "
                    "WHERE case_results.run_id = m.run_id AND case_results.case_idx = m.case_idx"
                )
            con.execute("DROP TABLE new_runs")
            con.execute("COMMIT")
        except duckdb.Error as exc:  # data that passed the column check but not the store's constraints
            con.execute("ROLLBACK")
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"cannot import {folder}: {first}") from None
        except Exception:
            con.execute("ROLLBACK")
            raise
        finally:
            for table in tables:
                con.unregister(f"import_{table}")
    _import_reports(store, folder, new_ids, tables)
    return added


def seed_from_samples(store: str | os.PathLike, samples_dir: str | os.PathLike) -> int:
    """Load every export folder under samples/ into a store that has no runs yet (a fresh checkout)."""
    samples_dir = Path(samples_dir)
    folders = sorted(p.parent for p in samples_dir.glob("*/runs.parquet"))
    if not folders:
        return 0
    if Path(store).exists():
        with connect(store, read_only=True) as con:
            has_runs = (
                con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'runs'").fetchone()[0]
                and con.execute("SELECT count(*) FROM runs").fetchone()[0]
            )
        if has_runs:
            return 0
    return sum(import_runs(store, folder) for folder in folders)
