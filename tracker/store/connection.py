"""Opening the store: connections with lock retries (and a writer's priority over readers), the errors that name
what is wrong with a store file, the check a command makes before it uses one, and the schema's migrations.

DuckDB allows one writer process or many readers, never both, so nothing here keeps a connection: every
operation opens, works and closes. Writers and readers retry on the lock error with jittered back-off.
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import re
import stat
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from tracker.common.processes import process_alive
from tracker.store.reaping import reap_dead_runs
from tracker.store.schema import MIGRATIONS, SCHEMA_VERSION

LOCK_RETRY_SECONDS = float(os.environ.get("KERNELBEAM_LOCK_RETRY_SECONDS", "20"))


class StoreError(RuntimeError):
    """A problem with the store file that the user can fix (the CLI reports it as bad input)."""


class StoreLockedError(StoreError):
    """The store stayed locked by another process past the retry limit."""


class NotAStoreError(StoreError):
    """The path exists but is not a DuckDB database, or not one of ours."""


class SchemaTooNewError(StoreError):
    """The store was written by a newer tracker: its schema version is above ours."""


class SchemaTooOldError(StoreError):
    """The store was written by an older tracker and this process cannot write it, so cannot bring it up to date."""


class StoreAccessError(StoreError):
    """The store cannot be opened or written: a directory, permissions, a read-only file system."""


class StoreDamagedError(StoreError):
    """The store file is cut short or corrupt: DuckDB cannot read what its header says is there."""


class StoreFullError(StoreError):
    """The disk holding the store (or its WAL) has no space left."""


# How the operating system says that a file cannot be opened as asked, as DuckDB passes it on.
_ACCESS_MESSAGES = ("Permission denied", "Read-only file system", "Is a directory", "No such file or directory")


_FULL_MESSAGES = ("No space left on device", "Disk quota exceeded")


# How DuckDB says that a database file is shorter than it claims or its blocks do not check out.
# (A file that is no DuckDB file at all stays NotAStoreError: "not a valid DuckDB database file".)
_DAMAGE_MESSAGES = ("Could not read enough bytes", "Corrupt database file", "does not match stored checksum")


def _io_cause(path: Path, exc: Exception) -> StoreError | None:
    """The store error that names the cause of a DuckDB error about the file itself, or None for any other."""
    text = str(exc)
    said = " ".join(text.split())[:200]
    if any(m in text for m in _FULL_MESSAGES):
        return StoreFullError(f"no space left on device writing {path}: {said}")
    if any(m.lower() in text.lower() for m in _DAMAGE_MESSAGES):
        return StoreDamagedError(f"the store {path} is damaged (cut short or corrupt; restore it from a copy): {said}")
    return None


def _refuse_special(path: Path) -> None:
    """A FIFO, socket or device at the store's path would block or misbehave once opened: refuse it unopened."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # missing: the callers say so, or create it
    if stat.S_ISDIR(mode):
        raise StoreAccessError(f"store {path} is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise StoreAccessError(f"store {path} is {kind}, not a regular file")


def now() -> datetime:
    return datetime.now(UTC)


# DuckDB's wording when another process (or another connection of this one, opened differently) holds the file.
_LOCK_MESSAGES = ("Could not set lock on file", "Conflicting lock", "different configuration than existing")


def _is_lock_error(exc: Exception) -> bool:
    return any(m in str(exc) for m in _LOCK_MESSAGES)


WAIT_REPORT_SECONDS = 5.0  # a waiting writer says what it waits for this often


MARKER_FRESH_SECONDS = 3.0  # a writer's marker older than this is stale (its writer died or gave up)


def _marker_glob(path: Path) -> str:
    return f"{glob.escape(path.name)}.writer-waiting.*"


def writer_waiting(path: str | os.PathLike) -> bool:
    """True while some live writer is waiting for the store (a fresh marker file beside it)."""
    path = Path(path)
    wall = time.time()
    for marker in path.parent.glob(_marker_glob(path)):
        try:
            fresh = wall - marker.stat().st_mtime < MARKER_FRESH_SECONDS
            pid = int(marker.name.rsplit(".", 1)[1])
        except (OSError, ValueError):
            continue
        if fresh and process_alive(pid):
            return True
    return False


def _touch_marker(marker: Path) -> None:
    try:
        marker.touch()
    except OSError:  # a read-only folder: the writer still retries, only without priority
        pass


@contextlib.contextmanager
def connect(
    path: str | os.PathLike,
    *,
    read_only: bool = False,
    retry_seconds: float | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the store, retrying while another process holds the lock; always closed on exit.

    A writer also brings the schema up to date and marks runs whose process died as crashed. DuckDB lets one
    writer or many readers in, so back-to-back readers could starve a writer: a writer that has to wait keeps
    a marker file beside the store (`<store>.writer-waiting.<pid>`), and readers hold back while one is fresh.
    """
    path = Path(path)
    _refuse_special(path)
    if read_only and not path.exists():
        raise FileNotFoundError(f"no store at {path}")
    created = not path.exists()
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot create a store at {path}: folder {path.parent} does not exist")
    limit = LOCK_RETRY_SECONDS if retry_seconds is None else retry_seconds
    start = time.monotonic()
    deadline = start + limit
    if read_only:  # let a waiting writer in first (bounded: a reader never waits longer than the retry limit)
        while writer_waiting(path) and time.monotonic() < deadline:
            time.sleep(0.02 + 0.03 * random.random())
    marker = path.with_name(f"{path.name}.writer-waiting.{os.getpid()}")
    delay = 0.05
    next_report = start + WAIT_REPORT_SECONDS
    try:
        while True:
            try:
                con = duckdb.connect(str(path), read_only=read_only)
                break
            except duckdb.Error as exc:
                cause = _io_cause(path, exc)
                if cause is not None:
                    if created and path.is_file() and path.stat().st_size == 0:
                        path.unlink()  # the empty file DuckDB left behind is no store
                    raise cause from exc
                access = next((m for m in _ACCESS_MESSAGES if m in str(exc)), None)
                if access:
                    raise StoreAccessError(
                        f"cannot open store {path}{'' if read_only else ' for writing'}: {access.lower()}"
                    ) from exc
                if not _is_lock_error(exc):
                    raise NotAStoreError(f"{path} is not a DuckDB store: {exc}") from exc
                waited = time.monotonic() - start
                if time.monotonic() >= deadline:
                    raise StoreLockedError(f"store {path} is locked by another process: {exc}") from exc
                if not read_only:
                    _touch_marker(marker)
                    if time.monotonic() >= next_report:
                        pid = re.search(r"\(PID (\d+)\)", str(exc))
                        holder = f"pid {pid.group(1)}" if pid else "a reader or writer"
                        print(
                            f"store {path} is locked by another process ({holder}); waiting {waited:.0f} s / "
                            f"{limit:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
                        next_report += WAIT_REPORT_SECONDS
            # Writers retry sooner than readers and never back off far: they hold the marker.
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.2 if not read_only else 1.0)
    finally:
        if not read_only:
            marker.unlink(missing_ok=True)
    try:
        if read_only:
            _refuse_newer(con, path)
        else:
            migrate(con)
            reap_dead_runs(con, path)
        yield con
    except duckdb.Error as exc:  # a truncated file or a full disk shows only when read or written: say which
        cause = _io_cause(path, exc)
        if cause is None:
            raise
        raise cause from exc
    finally:
        con.close()


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()[0]
    if not exists:
        return 0
    return con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]


def _refuse_newer(con: duckdb.DuckDBPyConnection, path: str | os.PathLike | None = None) -> None:
    current = schema_version(con)
    if current > SCHEMA_VERSION:
        where = f"{path} has " if path is not None else ""
        raise SchemaTooNewError(
            f"store {where}schema v{current}, newer than this tracker's v{SCHEMA_VERSION}: upgrade KernelBeam"
        )


def _table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()
    return {r[0] for r in rows}


def check_store(path: str | os.PathLike, *, write: bool = False, need_runs: bool = True) -> None:
    """Say what is wrong with a store before a command uses it (StoreError or FileNotFoundError), else nothing.

    Reads need an existing KernelBeam store; writes accept a missing file in a writable folder. A DuckDB file
    with other tables and no schema_version is someone else's database: never migrated into.
    """
    p = Path(path)
    _refuse_special(p)
    if not p.exists():
        if not write:
            raise FileNotFoundError(f"no store at {path}")
        folder = p.parent
        if not folder.is_dir():
            raise FileNotFoundError(f"cannot create a store at {path}: folder {folder} does not exist")
        if _read_only_fs(folder):
            raise StoreAccessError(f"cannot create a store at {path}: read-only file system")
        if not os.access(folder, os.W_OK):
            raise StoreAccessError(f"cannot create a store at {path}: permission denied on folder {folder}")
        return
    if write:
        why = _unwritable(p)
        if why is not None:
            raise StoreAccessError(f"cannot write store {path}: {why}")
    try:
        with connect(p, read_only=True, retry_seconds=None if not write else 1.0) as con:
            tables = _table_names(con)
    except StoreLockedError:
        if write:  # a writer holds it: the write path waits for it and keeps the run in a side file if need be
            return
        raise
    if tables and "schema_version" not in tables:
        raise NotAStoreError(f"{path} is a DuckDB file but not a KernelBeam store (it has other tables)")
    if need_runs and not write and "runs" not in tables:
        raise NotAStoreError(f"{path} is a DuckDB file but not a KernelBeam store (no runs table)")


def upgrade_store(path: str | os.PathLike) -> int | None:
    """Bring a store written by an older tracker up to this tracker's schema, as any writer's open does: reads
    never migrate, and today's read queries need today's columns. Returns the version the store had, else None
    (current already, or no KernelBeam store: check_store says what is wrong with it). A store this process cannot
    write raises SchemaTooOldError saying how to upgrade it; one locked by a writer waits for it as writers do
    (that writer migrates it on its own open), bounded by the lock retry limit."""
    p = Path(path)
    try:
        with connect(p, read_only=True) as con:
            if "schema_version" not in _table_names(con):
                return None
            version = schema_version(con)
    except SchemaTooNewError:
        return None
    if version >= SCHEMA_VERSION:
        return None
    why = _unwritable(p, folder=True)
    if why is None:
        try:
            with connect(p):  # migrate() on open
                pass
        except StoreAccessError as exc:
            why = str(exc)
        else:
            return version
    raise SchemaTooOldError(
        f"store {path} has schema v{version}, older than this tracker's v{SCHEMA_VERSION}, and cannot be upgraded: "
        f"it is read-only ({why}); copy it somewhere writable, or run any command with write access to it once"
    )


def _unwritable(path: Path, *, folder: bool = False) -> str | None:
    """Why an existing store cannot be written in place, else None; with `folder`, also its folder (where a
    writer's open makes the WAL)."""
    if _read_only_fs(path):
        return "read-only file system"
    if not os.access(path, os.W_OK):
        return "permission denied"
    if folder and not os.access(path.parent, os.W_OK):
        return f"permission denied on folder {path.parent}"
    return None


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply the migrations this store lacks, each in its own transaction. Returns the new version."""
    con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
    _refuse_newer(con)
    current = schema_version(con)
    for version in range(current, SCHEMA_VERSION):
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(MIGRATIONS[version])
            con.execute("INSERT INTO schema_version VALUES (?, ?)", [version + 1, now()])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION
