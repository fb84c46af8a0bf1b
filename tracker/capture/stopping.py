"""The tracker's own SIGTERM during a run: the run is recorded as cancelled and its processes ended, whichever
method times it (the tracker's worker or a problem folder's eval.py), and no further run of its session starts."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

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


def _flag(signum, frame) -> None:
    REQUESTED.set()


@contextlib.contextmanager
def session() -> Iterator[None]:
    """A session of runs (ab, fidelity): a SIGTERM that comes between two runs, where no run's wait loop would
    catch it, only asks the session to stop: the next run does not start (runner.run_variant raises SystemExit)
    and the caller still reports what the stored runs say."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _flag)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
