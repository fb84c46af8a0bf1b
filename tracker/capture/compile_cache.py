"""Compile caches per kernel source: what one run of a file compiled (Triton kernels, torch extensions,
torch.compile) is there for the next run of the same file, so repeats, `ab` rounds, `fidelity` rounds and the ncu
pass do not compile again.

Each source (by its sha256) has one folder, bound writable into the sandbox of runs of that source only: nothing
compiled for one kernel is loaded by another, and whatever a kernel leaves in its folder reaches no code but its
own (the root is read-only in every sandbox, so no kernel writes another's folder). Triton and torch key their
entries by the code, the options and the toolchain, so a changed helper module or another Triton version compiles
afresh. The folders live under $KERNELBEAM_COMPILE_CACHE (`off`: every run compiles from nothing, as
`run --fresh-compile` does), else $XDG_CACHE_HOME/kernelbeam/compile (~/.cache/...); beyond MAX_BYTES the least
recently used go, never one used within RECENT_S (a run may be compiling into it).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT_ENV = "KERNELBEAM_COMPILE_CACHE"
MAX_BYTES = 8 << 30
RECENT_S = 6 * 3600.0
SOURCE_MAX_BYTES = 4 << 30  # one source's folder after its run: more is a kernel filling the disk, not its builds
SOURCE_MAX_ENTRIES = 100_000  # ... files and folders: Triton's and torch's builds of a kernel hold hundreds
SOURCE_MAX_DEPTH = 32  # ... folders within folders: theirs nest two or three deep
_SUBDIRS = {
    "TRITON_CACHE_DIR": "triton",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
}
_SHA = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Binding:
    """What a run of one source gets: variables for its environment, folders to bind writable, and the state
    recorded with the run (runs.compile_cache): `warm` (entries from an earlier run of this source), `cold`, or
    `off` with the reason."""

    state: str
    env: dict[str, str] = field(default_factory=dict)
    writable: tuple[Path, ...] = ()


def root() -> Path | None:
    value = os.environ.get(ROOT_ENV, "").strip()
    if value.lower() == "off":
        return None
    if value:
        return Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernelbeam" / "compile"


def bind(sha256: str, enabled: bool = True) -> Binding:
    """The cache folder of this source, made if new and marked as used now; `off` where caching is off or the
    folder cannot be made (the run then compiles in its own folder, as without a cache)."""
    base = root() if enabled else None
    if base is None:
        return Binding("off: --fresh-compile" if not enabled else f"off: {ROOT_ENV}=off")
    if not _SHA.fullmatch(sha256 or ""):
        return Binding("off: no source hash")
    folder = base / sha256
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if folder.is_symlink() or not folder.is_dir():
            return Binding(f"off: {folder} is not a folder")
        warm = False
        for sub in _SUBDIRS.values():
            (folder / sub).mkdir(exist_ok=True)
            with os.scandir(folder / sub) as entries:
                warm = warm or any(True for _ in entries)
        os.utime(folder)
        prune(base, keep=folder)
    except OSError as exc:
        return Binding(f"off: {exc.strerror or exc}")
    env = {name: str(folder / sub) for name, sub in _SUBDIRS.items()}
    return Binding("warm" if warm else "cold", env, (folder,))


def _usage(folder: Path) -> tuple[int, bool]:
    """(bytes of the files under folder, whether it holds more than SOURCE_MAX_ENTRIES entries or nests deeper than
    SOURCE_MAX_DEPTH). Walked with a list, not recursion: a kernel's 1,500 nested folders made os.walk raise
    RecursionError in every later run's prune. Symlinks count as links (never followed: a kernel may plant any); a
    file counts its length, or the disk it holds where that is more by over 64 KiB (`fallocate -n` reserves disk at
    length 0). Counting stops at the first excess."""
    total, entries = 0, 0
    todo = [(folder, 0)]
    while todo:
        here, depth = todo.pop()
        if depth > SOURCE_MAX_DEPTH:
            return total, True
        try:
            with os.scandir(here) as listing:
                for entry in listing:
                    entries += 1
                    if entries > SOURCE_MAX_ENTRIES:
                        return total, True
                    if entry.is_dir(follow_symlinks=False):
                        todo.append((Path(entry.path), depth + 1))
                        continue
                    info = entry.stat(follow_symlinks=False)
                    disk = info.st_blocks * 512
                    total += disk if disk > info.st_size + (64 << 10) else info.st_size
        except OSError:
            continue
    return total, False


def _remove(folder: Path) -> None:
    """Remove a cache folder whatever a kernel left in it: rm -rf walks without recursion (shutil.rmtree raised
    RecursionError on 1,500 nested folders) and removes links without following them."""
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(folder)], check=False, capture_output=True)


def trim(binding: Binding, max_bytes: int = SOURCE_MAX_BYTES) -> str | None:
    """After a run: this source's folder is removed if it holds more than max_bytes, or entries or depth beyond
    any build's (prune keeps a folder used in the last RECENT_S whatever it holds, and the kernel could write there
    as it liked). The warning, or None."""
    for folder in binding.writable:
        size, crowded = _usage(folder)
        if size > max_bytes or crowded:
            _remove(folder)
            held = (
                f"{size / 2**30:.1f} GiB"
                if size > max_bytes
                else (f"more than {SOURCE_MAX_ENTRIES:,} entries or folders nested deeper than {SOURCE_MAX_DEPTH}")
            )
            return f"the compile cache of this source held {held} after the run: removed"
    return None


def prune(base: Path, keep: Path | None = None, max_bytes: int = MAX_BYTES) -> list[Path]:
    """Remove the least recently used folders until the rest fit max_bytes; folders used within RECENT_S and
    `keep` stay. Returns what was removed."""
    now = time.time()
    folders = []
    with os.scandir(base) as entries:
        for entry in entries:
            if _SHA.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                folders.append((entry.stat(follow_symlinks=False).st_mtime, Path(entry.path)))
    sized = [(mtime, path, _usage(path)[0]) for mtime, path in sorted(folders)]
    total = sum(size for _, _, size in sized)
    removed = []
    for mtime, path, size in sized:
        if total <= max_bytes:
            break
        if path == keep or now - mtime < RECENT_S:
            continue
        _remove(path)
        total -= size
        removed.append(path)
    return removed
