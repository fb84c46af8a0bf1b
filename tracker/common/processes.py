"""Whether a process still runs: used to reap `running` rows and to follow dashboard jobs."""

from __future__ import annotations

import os


def child_env(root: str | os.PathLike, **extra: str) -> dict[str, str]:
    """This process's environment for a child Python that imports our package from `root` before anything else."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    return env


def process_alive(pid: int | None) -> bool:
    """True while `pid` runs on this host (a zombie, finished but not yet reaped, counts as gone)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, session id, start time) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[3]), int(fields[19])


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def descendants(root: int) -> set[tuple[int, int]]:
    """(pid, start time) of every live descendant of `root`, found through /proc (Linux; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for pid in _pids():
        st = _stat(pid)
        if st is not None:
            children.setdefault(st[0], []).append(pid)
            starts[pid] = st[2]
    out, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add((child, starts[child]))
            todo.append(child)
    return out


def _has_env(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def end_processes(session: int, known: set[tuple[int, int]], env_marker: str | None = None) -> list[int]:
    """SIGKILL everything a run started: the worker's session (it leads its own), processes seen as its
    descendants (matched by start time, so a reused pid is spared), and any process whose environment carries
    `env_marker` (children that called setsid or double-forked away). Returns the pids signalled."""
    import signal

    marker = env_marker.encode() if env_marker else None
    me = os.getpid()
    known_pids = dict(known)
    hit = []
    for pid in _pids():
        if pid == me:
            continue
        st = _stat(pid)
        if st is None:
            continue
        if st[1] == session or known_pids.get(pid) == st[2] or (marker and _has_env(pid, marker)):
            try:
                os.kill(pid, signal.SIGKILL)
                hit.append(pid)
            except OSError:
                pass
    return hit
