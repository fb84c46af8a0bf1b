"""Reaping: `running` rows whose recording process died become `crashed` when the next writer opens the store."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime

import duckdb

from tracker.common.processes import process_alive
from tracker.store.sidefiles import is_signed, pending_run_ids


def reap_dead_runs(con: duckdb.DuckDBPyConnection, path: str | os.PathLike | None = None) -> list[str]:
    """Mark `running` rows of this host whose recording process is gone as `crashed`, except runs whose
    complete record waits in a side file (`<store>.pending/RUN.json`): the next flush writes them."""
    host = socket.gethostname()
    rows = con.execute("SELECT run_id, pid FROM runs WHERE status = 'running' AND host = ?", [host]).fetchall()
    gone = [run_id for run_id, pid in rows if not process_alive(pid)]
    waiting = pending_run_ids(path) if path is not None and gone else set()
    dead = [run_id for run_id in gone if run_id not in waiting or not is_signed(path, run_id)]
    for run_id in dead:
        con.execute(
            "UPDATE runs SET status = 'crashed', finished_at = ?, "
            "error = coalesce(error, 'the recording process ended before the run was completed') "
            "WHERE run_id = ?",
            [datetime.now(UTC), run_id],
        )
    return dead
