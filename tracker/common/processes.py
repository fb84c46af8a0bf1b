"""Processes (through psutil): whether one still runs (to reap `running` rows and follow dashboard jobs), the
tree a run started, and ending it."""

from __future__ import annotations

import os

import psutil


def child_env(root: str | os.PathLike, **extra: str) -> dict[str, str]:
    """This process's environment for a child Python that imports our package from `root` before anything else.

    PYTHONSAFEPATH: `python -m` would put the working folder first on the child's path, and the tracker may be run
    from an agent's own folder, where a planted `tracker` or `torch` package would run as this user."""
    env = dict(os.environ, PYTHONSAFEPATH="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    return env


def process_alive(pid: int | None) -> bool:
    """True while `pid` runs on this host (a zombie, finished but not yet reaped, counts as gone)."""
    if not pid or int(pid) <= 0:
        return False
    try:
        return psutil.Process(int(pid)).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # it exists, owned by someone else
        return True


def descendants(root: int) -> set[tuple[int, float]]:
    """(pid, start time) of every live descendant of `root` (empty when `root` is gone)."""
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return set()
    out = set()
    for child in children:
        try:
            out.add((child.pid, child.create_time()))
        except psutil.Error:  # ended meanwhile
            pass
    return out


def _has_env(proc: psutil.Process, marker: str) -> bool:
    """Whether the process's environment holds `marker` (NAME=value)."""
    name, _, value = marker.partition("=")
    try:
        return proc.environ().get(name) == value
    except psutil.Error:  # gone, or someone else's
        return False


def end_processes(session: int, known: set[tuple[int, float]], env_marker: str | None = None) -> list[int]:
    """SIGKILL everything a run started: the worker's session (it leads its own), processes seen as its
    descendants (matched by start time, so a reused pid is spared), and any process whose environment carries
    `env_marker` (children that called setsid or double-forked away). Returns the pids signalled."""
    import signal

    me = os.getpid()
    known_pids = dict(known)
    hit = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            ours = os.getsid(proc.pid) == session or known_pids.get(proc.pid) == proc.create_time()
            if ours or (env_marker and _has_env(proc, env_marker)):
                proc.send_signal(signal.SIGKILL)  # psutil checks the pid still names the same process
                hit.append(proc.pid)
        except (psutil.Error, OSError):
            pass
    return hit
