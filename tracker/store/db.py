"""The DuckDB store: connections with lock retries, the versioned schema, and the one write path for runs.

DuckDB allows one writer process or many readers, never both, so nothing here keeps a connection: every
operation opens, works and closes. Writers and readers retry on the lock error with jittered back-off.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import hashlib
import hmac
import json
import os
import random
import re
import secrets
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from tracker.common.processes import process_alive
from tracker.store.schema import MIGRATIONS, RUN_TABLES, SCHEMA_VERSION, TABLE_COLUMNS, VERDICTS
from tracker.store.validate import check_record

DEFAULT_STORE = "experiments.duckdb"
DEFAULT_PROBLEM = "qr_v2"  # runs.problem of records that name none (the column default of migration v6)
LOCK_RETRY_SECONDS = float(os.environ.get("KERNELBEAM_LOCK_RETRY_SECONDS", "20"))


class StoreError(RuntimeError):
    """A problem with the store file that the user can fix (the CLI reports it as bad input)."""


class StoreLockedError(StoreError):
    """The store stayed locked by another process past the retry limit."""


class NotAStoreError(StoreError):
    """The path exists but is not a DuckDB database, or not one of ours."""


class SchemaTooNewError(StoreError):
    """The store was written by a newer tracker: its schema version is above ours."""


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
        if _read_only_fs(p):
            raise StoreAccessError(f"cannot write store {path}: read-only file system")
        if not os.access(p, os.W_OK):
            raise StoreAccessError(f"cannot write store {path}: permission denied")
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


def reap_dead_runs(con: duckdb.DuckDBPyConnection, path: str | os.PathLike | None = None) -> list[str]:
    """Mark `running` rows of this host whose recording process is gone as `crashed`, except runs whose
    complete record waits in a side file (`<store>.pending/RUN.json`): the next flush writes them."""
    host = socket.gethostname()
    rows = con.execute("SELECT run_id, pid FROM runs WHERE status = 'running' AND host = ?", [host]).fetchall()
    waiting = pending_run_ids(path) if path is not None else set()
    dead = [run_id for run_id, pid in rows if not process_alive(pid) and run_id not in waiting]
    for run_id in dead:
        con.execute(
            "UPDATE runs SET status = 'crashed', finished_at = ?, "
            "error = coalesce(error, 'the recording process ended before the run was completed') "
            "WHERE run_id = ?",
            [now(), run_id],
        )
    return dead


@dataclass
class RunRecord:
    """Everything one run produced, held in memory until it is written in one transaction."""

    run: dict[str, Any]
    variant: dict[str, Any]
    cases: list[dict[str, Any]] = field(default_factory=list)
    samples: list[tuple[int, int, float]] = field(default_factory=list)  # (case_idx, rep, time_us)
    profile_cases: list[dict[str, Any]] = field(default_factory=list)
    profile_kernels: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)  # failed checks: arrays as .npz bytes
    ncu_cases: list[dict[str, Any]] = field(default_factory=list)  # Nsight Compute: per case its report file
    ncu_kernels: list[dict[str, Any]] = field(default_factory=list)  # and per profiled kernel its metrics

    def to_json(self) -> str:
        data = {**self.__dict__, "evidence": [_b64(e) for e in self.evidence]}
        return json.dumps(data, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        data = json.loads(text)
        data["samples"] = [tuple(s) for s in data["samples"]]
        data["evidence"] = [_unb64(e) for e in data.get("evidence", [])]
        return cls(**data)


def _b64(row: dict[str, Any]) -> dict[str, Any]:
    arrays = row.get("arrays")
    return {**row, "arrays": base64.b64encode(arrays).decode() if arrays is not None else None}


def _unb64(row: dict[str, Any]) -> dict[str, Any]:
    arrays = row.get("arrays")
    return {**row, "arrays": base64.b64decode(arrays) if arrays is not None else None}


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
    import pyarrow as pa

    case_idx, rep, time_us = zip(*samples, strict=True)
    table = pa.table(
        {
            "run_id": pa.array([run_id] * len(samples), pa.string()),
            "case_idx": pa.array(case_idx, pa.int32()),
            "rep": pa.array(rep, pa.int32()),
            "time_us": pa.array(time_us, pa.float64()),
        }
    )
    con.register("new_samples", table)
    try:
        con.execute("INSERT INTO samples SELECT run_id, case_idx, rep, time_us FROM new_samples")
    finally:
        con.unregister("new_samples")


def start_run(path: str | os.PathLike, record: RunRecord) -> None:
    """Write the run row as `running` (and its variant) so a crash of the tracker itself stays visible."""
    with connect(path) as con:
        con.execute("BEGIN TRANSACTION")
        _upsert_variant(con, record.variant)
        problem = record.run.get("problem") or DEFAULT_PROBLEM
        _insert(con, "runs", [{**record.run, "status": "running", "problem": problem}])
        con.execute("COMMIT")


def _upsert_variant(con: duckdb.DuckDBPyConnection, variant: dict[str, Any]) -> None:
    exists = con.execute("SELECT 1 FROM variants WHERE sha256 = ?", [variant["sha256"]]).fetchone()
    if not exists:  # only the columns a run knows, so a store not yet migrated (see migrate) still takes it
        cols = [c for c in TABLE_COLUMNS["variants"] if c in variant]
        sql = f"INSERT INTO variants ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        con.execute(sql, [variant[c] for c in cols])


# Registration metadata filled in on a variant that a run recorded first (a run knows no commit message).
_VARIANT_META = ("commit", "committed_at", "message", "family", "parent", "registered_at")


def register_variants(path: str | os.PathLike, variants: Sequence[dict[str, Any]]) -> list[str]:
    """Register variants without running them, in one transaction; returns the sha256 of those added.

    Content already in the store adds nothing; only registration fields it lacks are filled in."""
    added: list[str] = []
    with connect(path) as con:
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
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return added


def write_run(con: duckdb.DuckDBPyConnection, record: RunRecord) -> None:
    """Write a complete run in one transaction, replacing a `running` row of the same id."""
    run_id = record.run["run_id"]
    con.execute("BEGIN TRANSACTION")
    try:
        _upsert_variant(con, record.variant)
        con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for table in RUN_TABLES:
            if table in present:  # a store written before a table was added (migrations add it on open)
                con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
        # A record that names no problem is of the default one, as the schema's column default says.
        _insert(con, "runs", [{**record.run, "problem": record.run.get("problem") or DEFAULT_PROBLEM}])
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


def traces_dir(path: str | os.PathLike, run_id: str) -> Path:
    """Where a run's profile files live beside the store: torch.profiler traces, Nsight Compute reports."""
    return Path(f"{path}.traces") / run_id


def pending_dir(path: str | os.PathLike) -> Path:
    """Side folder for runs that could not be written because the store stayed locked."""
    return Path(f"{path}.pending")


def fallback_dirs() -> list[Path]:
    """Where a run goes when neither the store nor its side folder can be written, in order of preference."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return [Path(state) / "kernelbeam" / "pending", Path(tempfile.gettempdir()) / "kernelbeam-pending"]


def pending_run_ids(path: str | os.PathLike) -> set[str]:
    """Run ids waiting in the store's side folder (not the checkpoints of runs still being recorded)."""
    folder = pending_dir(path)
    try:
        sides = list(folder.glob("*.json")) if folder.is_dir() else []
    except OSError:
        return set()
    return {p.stem for p in sides if not _owner_alive(p)}


# Side files: "kernelbeam-side-v1 <owner pid> <HMAC-SHA256>" on the first line, the record's JSON after it. The
# key lives in a file the worker's sandbox masks, so only the tracker's own processes can write a side file that
# the next flush accepts. Owner 0: a finished run; else the checkpoint of a run that process is recording.
SIDE_MAGIC = "kernelbeam-side-v1"


class SideFileError(ValueError):
    """A side file that the tracker did not write (no or a wrong signature) or cannot read."""


def side_key_path() -> Path:
    if os.environ.get("KERNELBEAM_KEY_FILE"):
        return Path(os.environ["KERNELBEAM_KEY_FILE"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "kernelbeam" / "side-file.key"


def side_key() -> bytes:
    """This user's side-file key, made on first use (readable by this user only)."""
    path = side_key_path()
    with contextlib.suppress(FileNotFoundError):
        return bytes.fromhex(path.read_text().strip())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileExistsError):  # two processes making it at once: the first one's stays
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
            f.flush()
            os.fsync(f.fileno())
    return bytes.fromhex(path.read_text().strip())


def _signature(owner: int, body: str) -> str:
    return hmac.new(side_key(), f"{owner}\n{body}".encode(), hashlib.sha256).hexdigest()


def side_text(record: RunRecord, owner: int = 0) -> str:
    body = record.to_json()
    return f"{SIDE_MAGIC} {owner} {_signature(owner, body)}\n{body}"


def _header(side: Path) -> tuple[int, str]:
    with open(side, "rb") as f:
        first = f.readline(200).decode(errors="replace").split()
    if len(first) != 3 or first[0] != SIDE_MAGIC or not first[1].isdigit():
        raise SideFileError("not signed by this tracker (no side-file header)")
    return int(first[1]), first[2]


def _owner_alive(side: Path) -> bool:
    """A checkpoint whose recording process still runs: not a pending run yet."""
    try:
        owner, _ = _header(side)
    except (OSError, SideFileError):
        return False
    return owner != 0 and process_alive(owner)


def read_side_file(side: Path) -> RunRecord:
    """The record in a side file the tracker wrote; SideFileError for any other file."""
    owner, signature = _header(side)
    text = side.read_text()
    body = text.split("\n", 1)[1] if "\n" in text else ""
    if not hmac.compare_digest(signature, _signature(owner, body)):
        raise SideFileError("its signature does not match: not written by this tracker, or changed since")
    return RunRecord.from_json(body)


@dataclass(frozen=True)
class PendingRun:
    """A run kept in a side file because it could not be written into the store, and why."""

    path: Path
    reason: str
    fallback: bool = False  # True: not in the store's side folder but in a fallback folder (see fallback_dirs)


def write_text_atomic(path: Path, text: str) -> None:
    """Write beside the file, flush to disk, then rename: a reader sees the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_side_file(path: str | os.PathLike, record: RunRecord, reason: str) -> PendingRun:
    """Keep a run that could not be written: the store's side folder, else the fallback folders in turn.
    Raises OSError only if no folder at all can be written."""
    text = side_text(record)
    name = f"{record.run['run_id']}.json"
    errors = []
    for i, folder in enumerate([pending_dir(path), *fallback_dirs()]):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            side = folder / name
            write_text_atomic(side, text)
        except OSError as exc:
            errors.append(f"{folder}: {exc}")
            continue
        if i:
            reason += f"; its side folder {pending_dir(path)} could not be written either ({errors[0]})"
        return PendingRun(side, reason, fallback=bool(i))
    raise OSError("the run could not be saved anywhere: " + "; ".join(errors))


def save_checkpoint(path: str | os.PathLike, record: RunRecord) -> None:
    """What a run has finished so far, as the record it would be if this process died now (`crashed`). Ignored
    while this process lives; finish_run replaces it; after a kill -9 the next flush writes it."""
    with contextlib.suppress(OSError):
        folder = pending_dir(path)
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / f"{record.run['run_id']}.json", side_text(record, owner=os.getpid()))


def drop_checkpoint(path: str | os.PathLike, run_id: str) -> None:
    side = pending_dir(path) / f"{run_id}.json"
    with contextlib.suppress(OSError, SideFileError):
        if _header(side)[0] == os.getpid():
            side.unlink()


def finish_run(
    path: str | os.PathLike,
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
        with connect(path, retry_seconds=retry_seconds) as con:
            write_run(con, record)
            drop_checkpoint(path, record.run["run_id"])
            result = _flush_pending(con, path)
        if flushed is not None:
            flushed.written[:], flushed.unreadable[:] = result.written, result.unreadable
        return None
    except Exception as exc:  # keep the run on disk rather than lose it
        locked = isinstance(exc, StoreLockedError)
        pending = save_side_file(path, record, "the store stayed locked" if locked else f"writing failed: {exc}")
        if pending.fallback:
            drop_checkpoint(path, record.run["run_id"])
        return pending


@dataclass
class FlushResult:
    """What a flush of the side folder did: runs written, and side files kept because they could not be read."""

    written: list[str] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)  # (side file, why)


def _flush_pending(con: duckdb.DuckDBPyConnection, path: str | os.PathLike) -> FlushResult:
    folder = pending_dir(path)
    result = FlushResult()
    for side in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if _owner_alive(side):  # a run still being recorded
            continue
        try:
            record = read_side_file(side)
            check_record(record, side)  # values too: a side file is imported data until proven otherwise
        except (OSError, ValueError, TypeError, KeyError) as exc:  # kept for a person to see, and reported
            result.unreadable.append((side, f"{type(exc).__name__}: {exc}"[:300]))
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


def flush_pending(path: str | os.PathLike) -> FlushResult:
    """Write runs saved in side files into the store; says which side files it could not read."""
    with connect(path) as con:
        return _flush_pending(con, path)


def add_verdict(
    path: str | os.PathLike, run_id: str, verdict: str, reason: str = "", assumption: str | None = None
) -> None:
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}")
    with connect(path) as con:
        row = con.execute("SELECT variant_sha256 FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise KeyError(f"no run {run_id!r} in {path}")
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
