"""The clocks a run is held to, one phase after another: the worker's own start, the compile budget, the timeout.

No kernel code runs before the worker begins importing the kernel (its `import_start` event): until then it
imports torch and reads the device, which takes 1-8 s on a loaded machine. So the compile budget
(--compile-timeout) counts from that event to the first call's return, and a tiny budget is never spent by the
worker's own start. The start has a fixed allowance of its own, for a worker that never gets that far (a device
that hangs on its first query). The run's timeout covers everything after the first call.
"""

from __future__ import annotations

from dataclasses import dataclass

WORKER_START_S = 300.0


@dataclass
class Deadlines:
    compile_timeout: float
    timeout: float
    started: float  # time.monotonic() when the worker was given its job
    worker_start_s: float = WORKER_START_S
    importing: float | None = None  # when the worker began importing the kernel
    compiled: float | None = None  # when the kernel's first call returned

    def saw(self, event: str, now: float) -> None:
        """Move on at the worker's `import_start` and `compiled` events (only their first: a repeat is forged)."""
        if event == "import_start" and self.importing is None:
            self.importing = now
        elif event == "compiled" and self.compiled is None:
            self.compiled = now
            if self.importing is None:  # a worker that skipped the event cannot extend its budget by it later
                self.importing = now

    def expired(self, now: float) -> tuple[str, str] | None:
        """(status, error) once the phase the worker is in has run out of time, else None."""
        if self.compiled is not None:
            if now > self.compiled + self.timeout:
                return "timeout", f"the run exceeded its timeout of {self.timeout:g} s"
        elif self.importing is not None:
            if now > self.importing + self.compile_timeout:
                spent = self.importing - self.started
                return "failed", (
                    f"compiling took longer than {self.compile_timeout:g} s (--compile-timeout, counted from the "
                    f"kernel's import; the worker's own start took {spent:.1f} s before it)"
                )
        elif now > self.started + self.worker_start_s:
            return "crashed", (
                f"the worker did not begin importing the kernel within {self.worker_start_s:g} s of its start "
                "(importing torch and reading the device): no kernel code had run"
            )
        return None
