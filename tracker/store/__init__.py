"""The store layer: one DuckDB file per project, opened per operation and never held.

`db` holds connections, migrations and the one write path; `schema` the tables; `queries` every read;
`transfer` Parquet export and import. The names most callers need are re-exported here.
"""

from tracker.store.db import (
    DEFAULT_STORE,
    NotAStoreError,
    PendingRun,
    RunRecord,
    StoreLockedError,
    add_verdict,
    connect,
    finish_run,
    flush_pending,
    migrate,
    now,
    pending_dir,
    reap_dead_runs,
    register_variants,
    schema_version,
    start_run,
    write_run,
)
from tracker.store.schema import MIGRATIONS, RUN_STATUSES, RUN_TABLES, SCHEMA_VERSION, TABLE_COLUMNS, VERDICTS

__all__ = [
    "DEFAULT_STORE",
    "MIGRATIONS",
    "RUN_STATUSES",
    "RUN_TABLES",
    "SCHEMA_VERSION",
    "TABLE_COLUMNS",
    "VERDICTS",
    "NotAStoreError",
    "PendingRun",
    "RunRecord",
    "StoreLockedError",
    "add_verdict",
    "connect",
    "finish_run",
    "flush_pending",
    "migrate",
    "now",
    "pending_dir",
    "reap_dead_runs",
    "register_variants",
    "schema_version",
    "start_run",
    "write_run",
]
