"""The one atomic file write (the store's side files, the runner's progress, dashboard jobs), the one safe read of
a log's tail (logs of processes that ran a kernel) and the one measure of a folder a kernel writes."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write beside the file, flush to disk, then rename: a reader sees the old file or the whole new one, also
    after a crash."""
    path = Path(path)
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


def write_json_atomic(path: str | os.PathLike, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, default=str))


LOG_TAIL_CHARS = 4000  # what a run keeps of its worker's or harness's log


def read_log(path: str | os.PathLike, limit: int = LOG_TAIL_CHARS) -> str:
    """The end of a log as text (read_tail: no link followed, no FIFO waited on)."""
    return read_tail(path, limit).decode(errors="replace")


def read_tail(path: str | os.PathLike, limit: int) -> bytes:
    """The last `limit` bytes of a regular file; b"" where there is none. A path a kernel could have swapped is
    not followed (a link to the runner's /proc/self/environ), not waited on (a FIFO) and not read past `limit`
    (/dev/zero)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return b""
        f.seek(max(0, info.st_size - limit))
        return f.read(limit)


def folder_excess(path: str | os.PathLike, max_bytes: int, max_entries: int) -> str | None:
    """What `path` holds past a limit ("holds more than 20 GB", "holds more than 100,000 files"), else None. Bytes
    are the disk blocks taken (a sparse file counts what it holds); every entry counts at least a block, so a flood
    of empty files is bounded too; links are not followed. The walk stops at the first limit passed: a folder a
    kernel fills costs no long count."""
    used, entries, folders = 0, 0, [os.fspath(path)]
    while folders:
        try:
            with os.scandir(folders.pop()) as listing:
                for entry in listing:
                    entries += 1
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    used += max(info.st_blocks * 512, 512)
                    if stat.S_ISDIR(info.st_mode):
                        folders.append(entry.path)
                    if used > max_bytes:
                        return f"holds more than {max_bytes / 1e9:g} GB"
                    if entries > max_entries:
                        return f"holds more than {max_entries:,} files"
        except OSError:  # gone, or not a folder: nothing to count there
            continue
    return None
