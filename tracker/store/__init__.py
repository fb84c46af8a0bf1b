"""The store layer: one DuckDB file per project, opened per operation and never held.

`Store(path)` (store.py) is what callers use: typed reads grouped by concern (reads/: runs, cases, history,
variants, verdicts, profiles, boards) and the write path (writes.py). Beneath it: `records` (RunRow, RunRecord),
`connection` (lock retries, errors, the store check, migrations), `reaping`, `sidefiles` (the pending and traces
folders, signed side files), `schema` (the tables), `validate` and `transfer` (Parquet export and import).
The names most callers need are re-exported here.
"""

from tracker.common.vocabulary import DEFAULT_STORE
from tracker.store.connection import (
    NotAStoreError,
    SchemaTooNewError,
    SchemaTooOldError,
    StoreAccessError,
    StoreDamagedError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    migrate,
    now,
    schema_version,
)
from tracker.store.reaping import reap_dead_runs
from tracker.store.records import RunRecord, RunRow
from tracker.store.schema import (
    MIGRATIONS,
    RUN_METHODS,
    RUN_STATUSES,
    RUN_TABLES,
    SCHEMA_VERSION,
    TABLE_COLUMNS,
    VERDICTS,
)
from tracker.store.sidefiles import (
    PendingRun,
    SideFileError,
    fallback_dirs,
    is_side_key,
    read_side_file,
    side_key,
    side_key_path,
    side_text,
)
from tracker.store.store import Store
from tracker.store.writes import FlushResult, write_run

__all__ = [
    "DEFAULT_STORE",
    "FlushResult",
    "MIGRATIONS",
    "RUN_METHODS",
    "RUN_STATUSES",
    "RUN_TABLES",
    "SCHEMA_VERSION",
    "TABLE_COLUMNS",
    "VERDICTS",
    "NotAStoreError",
    "PendingRun",
    "RunRecord",
    "RunRow",
    "SchemaTooNewError",
    "SchemaTooOldError",
    "SideFileError",
    "Store",
    "StoreAccessError",
    "StoreDamagedError",
    "StoreError",
    "StoreFullError",
    "StoreLockedError",
    "fallback_dirs",
    "migrate",
    "now",
    "read_side_file",
    "reap_dead_runs",
    "schema_version",
    "is_side_key",
    "side_key",
    "side_key_path",
    "side_text",
    "write_run",
]
