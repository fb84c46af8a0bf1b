"""Progress of a run as it goes: a bar on the terminal, and a JSON file that the dashboard polls."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

from tracker.common.files import write_json_atomic
from tracker.common.text import printable

BAR_WIDTH = 24


class ProgressState:
    """Folds worker events into 'case i of N, current case, elapsed'."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.total = 0
        self.failed = 0
        self.current: str | None = None
        self.elapsed_s = 0.0
        self.gpu: str | None = None
        self.reps_done = 0  # within the current case, from the worker's throttled `rep` events
        self.reps_expected = 0
        self.case_started_s = 0.0
        self.case_eta_s: float | None = None
        self.case_durations: list[float] = []
        self.phase = "starting"  # starting, waiting (for the device), compiling, running
        self.waiting_for: str | None = None
        self._finished: set[tuple[Any, Any]] = set()  # (run, case) of every case_done so far

    def update(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        self.elapsed_s = event.get("elapsed_s", self.elapsed_s)
        if kind == "started":
            self.run_id, self.total = event["run_id"], event["total"]
        elif kind == "waiting":
            self.phase, self.waiting_for = "waiting", waiting_text(event)
        elif kind == "import_start":
            self.phase, self.waiting_for = "compiling", None
        elif kind == "compiled":
            self.phase = "running"
        elif kind == "env":
            self.gpu = event.get("gpu")
        elif kind == "case_start":
            self.current, self.total = event["spec"], event["total"]
            self.case_started_s = self.elapsed_s
            self.reps_done, self.reps_expected, self.case_eta_s = 0, 0, None
        elif kind == "rep":
            self.reps_done, self.reps_expected = event["done"], event["expected"]
            self.case_eta_s = event.get("case_eta_s")
        elif kind == "case_done":
            case = (event.get("run_id"), event.get("case_idx"))  # a queue's runs share case numbers
            if case in self._finished:  # a case ends once: a repeat is no progress
                return
            self._finished.add(case)
            self.failed += not event.get("passed")
            self.current = None
            self.case_durations.append(self.elapsed_s - self.case_started_s)
            self.reps_done, self.reps_expected, self.case_eta_s = 0, 0, None

    @property
    def done(self) -> int:
        return len(self._finished)

    @property
    def case_elapsed_s(self) -> float:
        return self.elapsed_s - self.case_started_s if self.current else 0.0

    @property
    def run_eta_s(self) -> float | None:
        """The current case's ETA plus the cases after it at the mean duration so far (None before any data)."""
        after = self.total - self.done - (1 if self.current else 0)
        if self.case_durations:
            per_case = sum(self.case_durations) / len(self.case_durations)
        elif self.case_eta_s is not None:
            per_case = self.case_elapsed_s + self.case_eta_s
        else:
            return None
        return max(after, 0) * per_case + (self.case_eta_s or 0.0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "total": self.total,
            "done": self.done,
            "failed": self.failed,
            "current": self.current,
            "elapsed_s": round(self.elapsed_s, 1),
            "gpu": self.gpu,
            "reps_done": self.reps_done,
            "reps_expected": self.reps_expected,
            "case_elapsed_s": round(self.case_elapsed_s, 1),
            "case_eta_s": None if self.case_eta_s is None else round(self.case_eta_s, 1),
            "run_eta_s": None if self.run_eta_s is None else round(self.run_eta_s, 1),
            "phase": self.phase,
            "waiting_for": self.waiting_for,
        }


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes} min {secs:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def progress_line(state: ProgressState, what: str) -> str:
    """`[###---] 3/12 <case> rep 57/~200 | case 12.3 s, ETA 8.1 s | run 45.0 s, ETA 2 min 05 s`."""
    filled = int(BAR_WIDTH * state.done / max(state.total, 1))
    line = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {state.done}/{state.total} {what}"
    if state.current and state.reps_done:
        line += f" rep {state.reps_done}/~{state.reps_expected}"
        line += f" | case {fmt_seconds(state.case_elapsed_s)}, ETA {fmt_seconds(state.case_eta_s)}"
    line += f" | run {fmt_seconds(state.elapsed_s)}"
    if state.done < state.total and state.run_eta_s is not None:
        line += f", ETA {fmt_seconds(state.run_eta_s)}"
    return line


def waiting_text(event: dict[str, Any]) -> str:
    holder = event.get("holder") or {}
    who = f" (held by pid {holder.get('pid')}, run {holder.get('run_id')})" if holder else ""
    return f"waiting for device {event.get('device')}{who}"


class TerminalBar:
    """A one-line bar on stderr (redrawn in place on a terminal, a line per case otherwise)."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.state = ProgressState()
        self.stream = stream
        self.tty = stream.isatty()
        self._said: str | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        self.state.update(event)
        if event["event"] in ("waiting", "import_start", "compiled"):
            if self.tty or event["event"] != "waiting" or self._said != self.state.waiting_for:
                self._said = self.state.waiting_for
                self._phase_line(event)
            return
        kind = event["event"]
        # On a terminal the line moves within a case (rep events); in a log, one line per finished case.
        if kind not in ("case_start", "rep", "case_done") or (not self.tty and kind != "case_done"):
            return
        if kind == "case_done":
            what = f"{event['spec']} {'pass' if event.get('passed') else 'FAIL'}"
        else:
            what = self.state.current or ""
        line = printable(progress_line(self.state, what))  # its own escapes only: "\r\033[K" below
        if self.tty:
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _phase_line(self, event: dict[str, Any]) -> None:
        s = self.state
        text = {"waiting": s.waiting_for, "import_start": "compiling (import and first call)", "compiled": "compiled"}
        line = printable(f"{text[event['event']]} ({s.elapsed_s:.1f} s)")
        self.stream.write(("\r\033[K" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


class ProgressFile:
    """Keeps a JSON file with the run's progress, for a dashboard polling a background run."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = path
        self.state = ProgressState()
        write_json_atomic(path, {"state": "starting", **self.state.as_dict()})

    def __call__(self, event: dict[str, Any]) -> None:
        self.state.update(event)
        write_json_atomic(self.path, {"state": "running", **self.state.as_dict()})

    def finish(self, status: str, run_id: str, error: str | None) -> None:
        write_json_atomic(
            self.path,
            {
                **self.state.as_dict(),
                "state": "finished",
                "status": status,
                "run_id": run_id,
                "error": error,
            },
        )


class QueueProgress:
    """Folds the queue's task messages into one run-like progress stream (all cases of all runs)."""

    def __init__(self, sinks: list, total: int) -> None:
        self.sinks = [s for s in sinks if s is not None]
        self.total = total
        self.start = time.monotonic()

    def __call__(self, msg: dict[str, Any]) -> None:
        kind = msg["event"]
        if kind not in ("case_start", "case_done", "env"):
            return
        name = msg.get("variant", "?")
        event = {**msg, "total": self.total, "elapsed_s": time.monotonic() - self.start}
        if "spec" in msg:
            event["spec"] = f"{name}: {msg['spec']}"
        for sink in self.sinks:
            sink(event)
