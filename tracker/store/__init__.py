"""The store layer: one DuckDB file per project, opened per operation and never held.

`db` holds connections, migrations and the one write path; `schema` the tables; `queries` every read;
`transfer` Parquet export and import. The names most callers need are re-exported here.
"""

from tracker.store.db import (
    DEFAULT_STORE,
    FlushResult,
    NotAStoreError,
    PendingRun,
    RunRecord,
    SchemaTooNewError,
    StoreAccessError,
    StoreError,
    StoreLockedError,
    add_verdict,
    check_store,
    connect,
    fallback_dirs,
    finish_run,
    flush_pending,
    migrate,
    now,
    pending_dir,
    pending_run_ids,
    reap_dead_runs,
    schema_version,
    start_run,
    write_run,
)
from tracker.store.schema import MIGRATIONS, RUN_TABLES, SCHEMA_VERSION, TABLE_COLUMNS, VERDICTS

__all__ = [
    "DEFAULT_STORE",
    "FlushResult",
    "MIGRATIONS",
    "RUN_TABLES",
    "SCHEMA_VERSION",
    "TABLE_COLUMNS",
    "VERDICTS",
    "NotAStoreError",
    "PendingRun",
    "RunRecord",
    "SchemaTooNewError",
    "StoreAccessError",
    "StoreError",
    "StoreLockedError",
    "add_verdict",
    "check_store",
    "connect",
    "finish_run",
    "fallback_dirs",
    "flush_pending",
    "migrate",
    "now",
    "pending_dir",
    "pending_run_ids",
    "reap_dead_runs",
    "schema_version",
    "start_run",
    "write_run",
]
