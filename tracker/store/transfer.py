"""Moving runs between stores as Parquet: export a selection of runs, import them elsewhere (no duplicates)."""

from __future__ import annotations

import os
from pathlib import Path

from tracker.store import RUN_TABLES, TABLE_COLUMNS, connect

EXPORT_TABLES = ("runs", "variants", *RUN_TABLES, "verdicts")


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
        for table in EXPORT_TABLES:
            where = (
                "sha256 IN (SELECT variant_sha256 FROM runs WHERE run_id IN (SELECT run_id FROM chosen))"
                if table == "variants"
                else "run_id IN (SELECT run_id FROM chosen)"
            )
            target = str(folder / f"{table}.parquet").replace("'", "''")
            con.execute(f"COPY (SELECT * FROM {table} WHERE {where}) TO '{target}' (FORMAT parquet)")
    return count


def import_runs(store: str | os.PathLike, folder: str | os.PathLike) -> int:
    """Add the runs of an export folder that the store does not have yet, in one transaction."""
    folder = Path(folder)
    if not (folder / "runs.parquet").is_file():
        raise FileNotFoundError(f"{folder} holds no runs.parquet export")
    with connect(store) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            path = str(folder / "runs.parquet")
            con.execute(
                "CREATE TEMP TABLE new_runs AS SELECT run_id FROM read_parquet(?)",
                [path],
            )
            con.execute("DELETE FROM new_runs WHERE run_id IN (SELECT run_id FROM runs)")
            added = con.execute("SELECT count(*) FROM new_runs").fetchone()[0]
            for table in EXPORT_TABLES:
                path = folder / f"{table}.parquet"
                if not path.is_file():
                    continue
                # An export from an older schema lacks newer columns: those take their defaults.
                present = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()}
                cols = ", ".join(c for c in TABLE_COLUMNS[table] if c in present)
                where = (
                    "sha256 NOT IN (SELECT sha256 FROM variants)"
                    if table == "variants"
                    else "run_id IN (SELECT run_id FROM new_runs)"
                )
                con.execute(
                    f"INSERT INTO {table} ({cols}) SELECT {cols} FROM read_parquet(?) WHERE {where}",
                    [str(path)],
                )
            con.execute("DROP TABLE new_runs")
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
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
