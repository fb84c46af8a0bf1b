"""Whether a process still runs: used to reap `running` rows and to follow dashboard jobs."""

from __future__ import annotations

import os


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
