"""The tracker's own SIGTERM during a run: the run is recorded as cancelled and its processes ended, whichever
method times it (the tracker's worker or a problem folder's eval.py), and no further run of its session starts."""

from __future__ import annotations

import signal
import threading

REQUESTED = threading.Event()  # set once the tracker was told to stop


class Stopped(Exception):
    """Raised in the main thread by the SIGTERM handler, inside a run's wait loop."""


def _on_sigterm(signum, frame) -> None:
    REQUESTED.set()
    raise Stopped


def catch() -> object:
    """From now on SIGTERM raises Stopped in the wait loop; returns what release() needs. Only the main thread
    gets signals, so elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def release(previous: object) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
