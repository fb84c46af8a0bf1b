"""Progress of a run as it goes: a bar on the terminal, and a JSON file that the dashboard polls."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from tracker.common.files import write_json_atomic

BAR_WIDTH = 24


class ProgressState:
    """Folds worker events into 'case i of N, current case, elapsed'."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.total = 0
        self.done = 0
        self.failed = 0
        self.current: str | None = None
        self.elapsed_s = 0.0
        self.gpu: str | None = None
        self.phase = "starting"  # starting, waiting (for the device), compiling, running
        self.waiting_for: str | None = None

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
        elif kind == "case_done":
            self.done += 1
            self.failed += not event.get("passed")
            self.current = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "total": self.total,
            "done": self.done,
            "failed": self.failed,
            "current": self.current,
            "elapsed_s": round(self.elapsed_s, 1),
            "gpu": self.gpu,
            "phase": self.phase,
            "waiting_for": self.waiting_for,
        }


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
        if event["event"] not in ("case_start", "case_done") or (not self.tty and event["event"] != "case_done"):
            return
        s = self.state
        filled = int(BAR_WIDTH * s.done / max(s.total, 1))
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        if event["event"] == "case_done":
            what = f"{event['spec']} {'pass' if event.get('passed') else 'FAIL'}"
        else:
            what = s.current or ""
        line = f"[{bar}] {s.done}/{s.total} {what} ({s.elapsed_s:.1f} s)"
        if self.tty:
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _phase_line(self, event: dict[str, Any]) -> None:
        s = self.state
        text = {"waiting": s.waiting_for, "import_start": "compiling (import and first call)", "compiled": "compiled"}
        line = f"{text[event['event']]} ({s.elapsed_s:.1f} s)"
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
