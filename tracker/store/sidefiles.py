"""Side files beside the store: the profile folder of a run (`<store>.traces/RUN`), and the pending folder
(`<store>.pending/RUN.json`) for runs that could not be written (the store stayed locked) and for the
checkpoints of runs being recorded; signed, so only the tracker's own processes can write one that is accepted."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tracker.common.errors import InputError
from tracker.common.files import write_text_atomic
from tracker.common.processes import process_alive
from tracker.store.records import RunRecord


def traces_root(path: str | os.PathLike) -> Path:
    """The folder beside the store that holds every run's profile files."""
    return Path(f"{path}.traces")


def traces_dir(path: str | os.PathLike, run_id: str) -> Path:
    """Where a run's profile files live beside the store: torch.profiler traces, Nsight Compute reports."""
    return traces_root(path) / run_id


def pending_dir(path: str | os.PathLike) -> Path:
    """Side folder for runs that could not be written because the store stayed locked."""
    return Path(f"{path}.pending")


def fallback_dirs() -> list[Path]:
    """Where a run goes when neither the store nor its side folder can be written, in order of preference."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return [Path(state) / "kernelbeam" / "pending", Path(tempfile.gettempdir()) / "kernelbeam-pending"]


def pending_run_ids(path: str | os.PathLike) -> set[str]:
    """Run ids waiting in the store's side folder: files with a side-file header (their first 200 bytes: every list
    and page reads this) whose recording process is gone. Not their signatures: is_signed says that, where it
    matters."""
    folder = pending_dir(path)
    try:
        sides = list(folder.glob("*.json")) if folder.is_dir() else []
    except OSError:
        return set()
    owners = {p.stem: _owner(p) for p in sides}
    return {run_id for run_id, owner in owners.items() if owner is not None and not _alive(owner)}


def is_signed(path: str | os.PathLike, run_id: str) -> bool:
    """Whether the side file of this run is one the tracker wrote (an empty file named after a dead run had kept it
    `running` for good: the reaper leaves a run whose record waits in a side file)."""
    try:
        _signed_body(pending_dir(path) / f"{run_id}.json")
    except (OSError, SideFileError):
        return False
    return True


# Side files: "kernelbeam-side-v1 <owner pid> <HMAC-SHA256>" on the first line, the record's JSON after it. The
# key lives in a file the worker's sandbox masks, so only the tracker's own processes can write a side file that
# the next flush accepts. Owner 0: a finished run; else the checkpoint of a run that process is recording.
SIDE_MAGIC = "kernelbeam-side-v1"


class SideFileError(InputError):
    """A side file that the tracker did not write (no or a wrong signature) or cannot read."""


def side_key_path() -> Path:
    if os.environ.get("KERNELBEAM_KEY_FILE"):
        return Path(os.environ["KERNELBEAM_KEY_FILE"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "kernelbeam" / "side-file.key"


def is_side_key(path: str | os.PathLike) -> bool:
    """Whether `path` names the side-file key by any route (a link, `..`, a hard link): a file the tracker never
    reads or copies on the word of a kernel or a problem folder."""
    key = side_key_path()
    try:
        return Path(path).resolve() == key.resolve() or os.path.samefile(path, key)
    except OSError:
        return False


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


# A side file holds one run's record: its evidence (at most 256 MiB) and text. Larger is not one of ours, and read
# whole it cost a flush its memory (a 6 GB sparse file: MemoryError, every later run into a side file).
MAX_SIDE_BYTES = 1 << 30


def _read_regular(side: Path, limit: int | None = None) -> bytes:
    """The bytes of a side file (the first `limit`), read only from a regular file of at most MAX_SIDE_BYTES: never
    through a link (a link took a flush to a record outside the folder) nor from a pipe (a FIFO named x.json hung
    every command that opened the store)."""
    try:
        fd = os.open(side, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SideFileError(f"not readable as a side file ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SideFileError("not a regular file")
        if info.st_size > MAX_SIDE_BYTES:
            raise SideFileError(f"larger than {MAX_SIDE_BYTES:,} bytes: not a side file of this tracker")
        return f.read(limit) if limit is not None else f.read()


def _header(side: Path) -> tuple[int, str]:
    first = _read_regular(side, 200).split(b"\n", 1)[0].decode(errors="replace").split()
    if len(first) != 3 or first[0] != SIDE_MAGIC or not first[1].isdigit():
        raise SideFileError("not signed by this tracker (no side-file header)")
    return int(first[1]), first[2]


def _owner(side: Path) -> int | None:
    """The recording process a side file names (0: a finished run), or None for a file without a side-file header."""
    try:
        return _header(side)[0]
    except (OSError, SideFileError):
        return None


def owner_alive(side: Path) -> bool:
    """A checkpoint whose recording process still runs: not a pending run yet."""
    owner = _owner(side)
    return owner is not None and _alive(owner)


def _alive(owner: int) -> bool:
    return owner != 0 and process_alive(owner)


def _signed_body(side: Path) -> str:
    """The record's JSON of a side file whose signature holds; SideFileError for any other file."""
    owner, signature = _header(side)
    text = _read_regular(side).decode(errors="replace")
    body = text.split("\n", 1)[1] if "\n" in text else ""
    if not hmac.compare_digest(signature, _signature(owner, body)):
        raise SideFileError("its signature does not match: not written by this tracker, or changed since")
    return body


def read_side_file(side: Path) -> RunRecord:
    """The record in a side file the tracker wrote; SideFileError for any other file."""
    return RunRecord.from_json(_signed_body(side))


@dataclass(frozen=True)
class PendingRun:
    """A run kept in a side file because it could not be written into the store, and why."""

    path: Path
    reason: str
    fallback: bool = False  # True: not in the store's side folder but in a fallback folder (see fallback_dirs)


def save_side_file(path: str | os.PathLike, record: RunRecord, reason: str) -> PendingRun:
    """Keep a run that could not be written: the store's side folder, else the fallback folders in turn.
    Raises OSError only if no folder at all can be written."""
    text = side_text(record)
    name = f"{record.run.run_id}.json"
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
        write_text_atomic(folder / f"{record.run.run_id}.json", side_text(record, owner=os.getpid()))


def drop_checkpoint(path: str | os.PathLike, run_id: str) -> None:
    side = pending_dir(path) / f"{run_id}.json"
    with contextlib.suppress(OSError, SideFileError):
        if _header(side)[0] == os.getpid():
            side.unlink()
