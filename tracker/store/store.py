"""Store(path): one KernelBeam store, the object the CLI, the dashboard, the queue and the capture layer use.

It holds the path and nothing open (every operation opens the file, works and closes it). Its reads come from the
mixins of tracker.store.reads, one module per concern; its write path from tracker.store.writes. The connection,
the store check and the side folders delegate to tracker.store.connection and tracker.store.sidefiles.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path

import duckdb

from tracker.common.vocabulary import DEFAULT_STORE
from tracker.store import connection, sidefiles
from tracker.store.reads.boards import BoardReads
from tracker.store.reads.cases import CaseReads
from tracker.store.reads.history import HistoryReads
from tracker.store.reads.profiles import ProfileReads
from tracker.store.reads.runs import RunReads
from tracker.store.reads.variants import VariantReads
from tracker.store.reads.verdicts import VerdictReads
from tracker.store.records import RunRecord
from tracker.store.writes import RunWrites


class Store(RunReads, CaseReads, HistoryReads, VariantReads, VerdictReads, ProfileReads, BoardReads, RunWrites):
    """The store at `path` (default experiments.duckdb). Cheap to make: it opens nothing until a method does."""

    def __init__(self, path: str | os.PathLike = DEFAULT_STORE) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # ------------------------------------------------------------------------------------------- the file

    def connect(
        self, *, read_only: bool = False, retry_seconds: float | None = None
    ) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection, retrying while another process holds the lock (connection.connect); closed on exit."""
        return connection.connect(self.path, read_only=read_only, retry_seconds=retry_seconds)

    def check(self, *, write: bool = False, need_runs: bool = True) -> None:
        """Raise what is wrong with the store before a command uses it (connection.check_store), else nothing."""
        connection.check_store(self.path, write=write, need_runs=need_runs)

    def upgrade(self) -> int | None:
        """Migrate a store written by an older tracker (connection.upgrade_store): the version it had, else None."""
        return connection.upgrade_store(self.path)

    # ------------------------------------------------------------------------------------- the side folders

    @property
    def pending_dir(self) -> Path:
        """The side folder of runs that could not be written (and of the checkpoints of runs being recorded)."""
        return sidefiles.pending_dir(self.path)

    def traces_dir(self, run_id: str) -> Path:
        """Where a run's profile files live beside the store."""
        return sidefiles.traces_dir(self.path, run_id)

    def ncu_report_file(self, run_id: str, report: str | None) -> Path | None:
        """A run's Nsight Compute report file where it is here, beside the store; None for no report, or for one
        whose file did not come along."""
        path = self.traces_dir(run_id) / report if report else None
        return path if path is not None and path.is_file() else None

    def pending_run_ids(self) -> set[str]:
        """Run ids waiting in the side folder."""
        return sidefiles.pending_run_ids(self.path)

    def save_checkpoint(self, record: RunRecord) -> None:
        """What a run has finished so far, kept in the side folder until finish_run replaces it."""
        sidefiles.save_checkpoint(self.path, record)
