"""One device, one run: a lock per physical device shared by every tracker process on this host.

The lock is `fcntl.flock` on `<lock dir>/<key>.lock`: the kernel drops it when its holder dies, so a killed
tracker never leaves a device locked. Beside it, small JSON files say who holds it (`<key>.holder`) and who
waits (`<key>.wait.<pid>`), for `python -m tracker queue` and the Benchmark page. The lock folder is
$KERNELBEAM_LOCK_DIR, else $XDG_RUNTIME_DIR/kernelbeam-locks, else <tmp>/kb-device-locks: per host, not per
store, because two stores can share a GPU.

What else was using the device and the host while a run held it is probed in tracker.capture.envinfo
(`device_load`).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.common.processes import process_alive


def lock_dir() -> Path:
    if os.environ.get("KERNELBEAM_LOCK_DIR"):
        return Path(os.environ["KERNELBEAM_LOCK_DIR"])
    if os.environ.get("XDG_RUNTIME_DIR") and Path(os.environ["XDG_RUNTIME_DIR"]).is_dir():
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "kernelbeam-locks"
    return Path(tempfile.gettempdir()) / "kb-device-locks"


def device_key(device: str, has_gpu: bool) -> str:
    """The physical device a run will use: 'cpu', or 'gpu<N>' after CUDA_VISIBLE_DEVICES (or its UUID)."""
    if device == "cpu" or (device == "auto" and not has_gpu):
        return "cpu"
    return "gpu" + re.sub(r"[^A-Za-z0-9_-]", "_", visible_device())


def visible_device() -> str:
    """The GPU a run uses, as CUDA_VISIBLE_DEVICES names it: an index or a GPU-/MIG- UUID (default 0)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class DeviceLock:
    """Held for the length of one run; `acquire` waits (reporting who holds it) until the device is free."""

    def __init__(self, key: str, run_id: str) -> None:
        self.key, self.run_id = key, run_id
        self.folder = lock_dir()
        self._fd: int | None = None

    @property
    def _holder_file(self) -> Path:
        return self.folder / f"{self.key}.holder"

    @property
    def _wait_file(self) -> Path:
        return self.folder / f"{self.key}.wait.{os.getpid()}"

    def acquire(
        self,
        on_wait: Callable[[dict[str, Any] | None], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
        poll_s: float = 0.2,
    ) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW on every file here: the <tmp> fallback is shared by the host's users, and another user's link
        # named <key>.holder made a run write its holder record over a file of its own user's.
        self._fd = os.open(self.folder / f"{self.key}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        me = {"pid": os.getpid(), "run_id": self.run_id, "since": time.time()}
        waiting = False
        try:
            while True:
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
                if not waiting:
                    _write(self._wait_file, me)
                    waiting = True
                if on_wait is not None:
                    on_wait(_read(self._holder_file))
                if should_cancel is not None and should_cancel():
                    raise InterruptedError("cancelled while waiting for the device")
                time.sleep(poll_s)
        except BaseException:
            self.release()
            raise
        finally:
            if waiting:
                self._wait_file.unlink(missing_ok=True)
        _write(self._holder_file, me)

    def release(self) -> None:
        if self._fd is None:
            return
        holder = _read(self._holder_file)
        if holder and holder.get("pid") == os.getpid() and holder.get("run_id") == self.run_id:
            self._holder_file.unlink(missing_ok=True)
        os.close(self._fd)  # closing drops the flock
        self._fd = None


def _write(path: Path, record: dict[str, Any]) -> None:
    """A holder or waiter record, never through a link; one that cannot be written is left out (it only informs
    `queue` and the Benchmark page)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(record))


def queue() -> list[dict[str, Any]]:
    """Per device: who holds it and who waits (oldest first). Entries of processes that are gone are skipped."""
    folder = lock_dir()
    if not folder.is_dir():
        return []
    out = []
    for lock in sorted(folder.glob("*.lock")):
        key = lock.name[: -len(".lock")]
        holder = _read(folder / f"{key}.holder")
        if holder and not process_alive(holder.get("pid")):
            holder = None
        waiting = [w for w in (_read(p) for p in folder.glob(f"{key}.wait.*")) if w and process_alive(w.get("pid"))]
        if holder or waiting:
            out.append({"device": key, "holder": holder, "waiting": sorted(waiting, key=lambda w: w["since"])})
    return out
