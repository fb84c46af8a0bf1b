"""`run --ncu`: Nsight Compute over one call per chosen case, as a pass of its own after the timed run.

The timed worker has ended (and its timings with it) before this starts, under the same device lock. Per case one
process, `ncu ... python -m tracker.capture.ncu_calls`, runs in the worker's sandbox (ncu injects itself into the
process it starts, so it must start inside: the sandbox clears the environment), in one folder for the pass (so a
Triton cache built by the first case serves the next). ncu itself runs above the socket filter, its target under it:
under the filter ncu's front end hung (it connects to its target; H100, 2026-12-05). So a sandboxed profile is taken
only where a process cannot reach into the memory of one above it (sandbox.ancestors_protected); elsewhere the pass
says so and a trusted kernel is profiled with --no-sandbox. Its report is read by `python -m tracker.capture.ncu` in
a child process and moved beside the store (`<store>.traces/RUN/`). The pass spends what is left of the run's
--timeout; what it cannot finish is said, never a reason to change the run's status. Where ncu or its report
interface is missing, or the run is not on a GPU, it says so and does nothing.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker.capture import sandbox
from tracker.capture.ncu import SECTIONS
from tracker.common.files import read_log
from tracker.common.processes import child_env

NCU_ENV = "KERNELBEAM_NCU"  # an ncu executable to use instead of the one on PATH
KNOWN_NCU = ("/usr/local/cuda/bin/ncu",)
MAX_KERNELS = 64  # per case (ncu -c): every profiled kernel is replayed once per pass its sections need
MAX_REPORT_BYTES = 256 << 20
READ_TIMEOUT_S = 120.0
MIN_BUDGET_S = 5.0
# ncu serialises profiling sessions through this file; the sandbox's /tmp is read-only, so it is bound in.
LOCK_FILE = Path(tempfile.gettempdir()) / "nsight-compute-lock"
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def report_name(case_idx: int) -> str:
    return f"ncu-case{case_idx}.ncu-rep"


@dataclass
class NcuResult:
    cases: list[dict[str, Any]] = field(default_factory=list)  # ncu_cases rows (no run id)
    kernels: list[dict[str, Any]] = field(default_factory=list)  # ncu_kernels rows (no run id)
    notes: list[str] = field(default_factory=list)  # for the run's warnings and stderr


def find_ncu() -> str | None:
    named = os.environ.get(NCU_ENV)
    if named:
        return named if os.access(named, os.X_OK) and Path(named).is_file() else None
    for candidate in (shutil.which("ncu"), *KNOWN_NCU):
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return candidate
    return None


def report_module_dir(ncu: str) -> str | None:
    """The folder holding ncu_report.py of this ncu's install (extras/python), or None."""
    real = Path(ncu).resolve()
    candidates = [real.parent / "extras" / "python", real.parent.parent / "extras" / "python"]
    candidates += [Path(p) for p in sorted(glob.glob(str(real.parents[1] / "nsight-compute*" / "extras" / "python")))]
    candidates += [Path(p) for p in sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"), reverse=True)]
    return next((str(c) for c in candidates if (c / "ncu_report.py").is_file()), None)


def unavailable(device: str, sandboxed: bool = False) -> str | None:
    """Why no Nsight Compute profile can be taken here (in the sandbox where `sandboxed`), or None."""
    ncu = find_ncu()
    if ncu is None:
        where = f"${NCU_ENV} is not an executable" if os.environ.get(NCU_ENV) else "ncu is not installed here"
        return f"no Nsight Compute profile: {where} (not on PATH, nor at {', '.join(KNOWN_NCU)})"
    if report_module_dir(ncu) is None:
        return f"no Nsight Compute profile: {ncu} has no Python report interface (extras/python/ncu_report.py)"
    if device != "cuda":
        return "no Nsight Compute profile: the run is not on a GPU (ncu profiles CUDA kernels)"
    if sandboxed and not sandbox.ancestors_protected():
        return (
            "no Nsight Compute profile in the sandbox: ncu must run above the kernel without the sandbox's socket "
            "filter, and this Linux lets a process write the memory of one above it (Yama's "
            "kernel.yama.ptrace_scope is not 1 or more); set it, or profile a kernel you trust with --no-sandbox"
        )
    return None


def ncu_argv(ncu: str, report_base: Path) -> tuple[list[str], list[str]]:
    """ncu's command line, as (ncu and its options, the profiled command): only the profiler range ncu_calls
    opens, at most MAX_KERNELS kernels, and the device's clocks left as they are (by default ncu locks them to
    base, which the next run would not see)."""
    sections = [arg for name in SECTIONS for arg in ("--section", name)]
    front = [ncu, "--profile-from-start", "off", "--clock-control", "none", *sections, "-c", str(MAX_KERNELS), "-f",
             "-o", str(report_base)]  # fmt: skip
    return front, [sys.executable, "-m", "tracker.capture.ncu_calls"]


def lock_binds() -> list[Path]:
    """Host files the sandboxed ncu must write: its lock file (made here if missing)."""
    try:
        fd = os.open(LOCK_FILE, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o666)
        os.close(fd)
    except OSError:
        return []
    return [LOCK_FILE] if LOCK_FILE.is_file() and not LOCK_FILE.is_symlink() else []


def _run(build, cwd: Path, job: str, timeout: float, log: Path) -> str | None:
    """Run one process of the pass (`build()`: its command line, environment and how it runs) in its own session,
    started as sandbox.start starts the worker; None, or why it did not finish well."""
    with open(log, "ab") as out:
        proc, _ = sandbox.start(build, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                start_new_session=True)  # fmt: skip
        try:
            proc.communicate(job.encode(), timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            return "timeout"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever it left behind (outside a sandbox)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    return None if proc.returncode == 0 else f"exit {proc.returncode}"


def _tail(path: Path, chars: int = 600) -> str:
    return " ".join(read_log(path, 4 * chars)[-chars:].split())


def read_rows(module_dir: str, report: Path) -> list[dict[str, Any]]:
    """The kernel rows of one report, read by tracker.capture.ncu in a child process; raises RuntimeError."""
    done = subprocess.run(
        [sys.executable, "-m", "tracker.capture.ncu", module_dir, str(report)],
        capture_output=True, text=True, timeout=READ_TIMEOUT_S, env=child_env(_PACKAGE_ROOT),
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(" ".join(done.stderr[-600:].split()) or f"exit {done.returncode}")
    rows = json.loads(done.stdout)
    if not isinstance(rows, list):
        raise RuntimeError("the report reader gave no list")
    return rows


def profile_cases(
    job: dict[str, Any],
    cases: list[int],
    budget_s: float,
    final: Path,
    command: Callable[[list[str], list[str], Path], tuple[list[str], dict[str, str], str]],
) -> NcuResult:
    """Profile one call of each case with ncu; the reports go to `final`. `job` is what ncu_calls needs but the
    case; `command(front, argv, workdir)` wraps ncu (front) and its target (argv) in the worker's sandbox, the
    target alone under its filter (sandbox.wrap's command line, environment and how it runs)."""
    result = NcuResult()
    ncu = find_ncu()
    module_dir = report_module_dir(ncu) if ncu else None
    if ncu is None or module_dir is None:
        result.notes.append(unavailable("cuda") or "no Nsight Compute profile")
        return result
    if budget_s < MIN_BUDGET_S:
        result.notes.append(f"no Nsight Compute profile: the timed work used up the run's --timeout "
                            f"({budget_s:.0f} s left)")  # fmt: skip
        return result
    deadline = time.monotonic() + budget_s
    workdir = sandbox.run_folder("kernelbeam-ncu-")
    (workdir / "tmp").mkdir()
    # ncu's log is appended to by each case's process: outside the folder the kernel writes, so it cannot be
    # swapped for a link that sends the next case's output into a file of the runner's choosing
    logdir = sandbox.run_folder("kernelbeam-ncu-log-")
    log = logdir / "ncu.log"
    try:
        for n, idx in enumerate(cases):
            left = deadline - time.monotonic()
            if left < MIN_BUDGET_S:
                result.notes.append(f"Nsight Compute profile stopped at the run's --timeout: {n} of {len(cases)} "
                                    "case(s) profiled")  # fmt: skip
                break
            base = workdir / f"ncu-case{idx}"
            front, argv = ncu_argv(ncu, base)
            build = functools.partial(command, front, argv, workdir)
            why = _run(build, workdir, json.dumps({**job, "case_idx": idx}), left, log)
            report = base.with_name(report_name(idx))
            row: dict[str, Any] = {"case_idx": idx, "report": None, "kernels": 0, "error": None}
            if why == "timeout":
                row["error"] = "stopped at the run's --timeout"
                result.cases.append(row)
                result.notes.append(f"Nsight Compute profile stopped at the run's --timeout in case {idx}: {n} of "
                                    f"{len(cases)} case(s) profiled")  # fmt: skip
                break
            if not report.is_file() or report.is_symlink():
                row["error"] = f"ncu wrote no report ({why or 'no kernel profiled'}): {_tail(log)}"
                result.cases.append(row)
                continue
            try:
                rows = read_rows(module_dir, report)
            except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as exc:
                row["error"] = f"the report could not be read: {exc}"
                rows = []
            if why is not None and row["error"] is None:
                row["error"] = f"ncu ended with {why}: {_tail(log)}"
            row["kernels"] = len(rows)
            if report.stat().st_size <= MAX_REPORT_BYTES:
                final.mkdir(parents=True, exist_ok=True)
                shutil.move(report, final / report.name)
                row["report"] = report.name
            result.cases.append(row)
            result.kernels.extend({"case_idx": idx, **r} for r in rows)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(logdir, ignore_errors=True)
    failed = [c for c in result.cases if c["error"]]
    if failed:
        which = ", ".join(str(c["case_idx"]) for c in failed)
        result.notes.append(f"Nsight Compute profile incomplete in case(s) {which}: {failed[0]['error'][:300]}")
    return result
