"""The one atomic file write (the store's side files, the runner's progress, dashboard jobs) and the one safe read of
a log's tail (logs of processes that ran a kernel)."""

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
