"""Read-only queries over the store, shared by the CLI and the dashboard. The only place that reads SQL.

Each function opens the store read-only, reads, closes, and returns plain data (pandas DataFrames or dicts).
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from tracker.store import connect

RUN_LIST_COLUMNS = (
    "run_id, variant, path, family, status, suite, mode, device, gpu, geomean_us, started_at, finished_at, "
    "git_commit, git_branch, git_dirty, note, parent_run, trigger"
)


def list_runs(store: str | os.PathLike, *, limit: int | None = None) -> pd.DataFrame:
    """All runs, newest first."""
    sql = f"SELECT {RUN_LIST_COLUMNS} FROM runs ORDER BY started_at DESC"
    params: list[Any] = []
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    with connect(store, read_only=True) as con:
        return con.execute(sql, params).df()


def get_run(store: str | os.PathLike, run_id: str) -> dict[str, Any] | None:
    """One run's row as a dict, or None if there is no such run."""
    with connect(store, read_only=True) as con:
        df = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df()
    if df.empty:
        return None
    return df.iloc[0].to_dict()


def case_results(store: str | os.PathLike, run_id: str) -> pd.DataFrame:
    with connect(store, read_only=True) as con:
        return con.execute("SELECT * FROM case_results WHERE run_id = ? ORDER BY case_idx", [run_id]).df()


def run_samples(store: str | os.PathLike, run_id: str) -> pd.DataFrame:
    """Every timed repetition of a run: case_idx, rep, time_us."""
    with connect(store, read_only=True) as con:
        return con.execute(
            "SELECT case_idx, rep, time_us FROM samples WHERE run_id = ? ORDER BY case_idx, rep",
            [run_id],
        ).df()


def resolve_run_id(store: str | os.PathLike, prefix: str) -> str | None:
    """Accept a unique prefix of a run id, as git does for commits."""
    with connect(store, read_only=True) as con:
        rows = con.execute("SELECT run_id FROM runs WHERE starts_with(run_id, ?) LIMIT 2", [prefix]).fetchall()
    return rows[0][0] if len(rows) == 1 else None
