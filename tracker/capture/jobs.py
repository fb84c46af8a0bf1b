"""Background benchmark jobs started from the dashboard.

A job is `python -m tracker.capture.job <folder>/job.json` (the capture layer's own program, which runs the
request through the library) started as a detached process (its own session), so it outlives the page that
started it, and a page reload finds it again: all its state is on disk, in `<store>.jobs/<job_id>/`:

    job.json       what was asked for: kernel, suite, mode, options, `request` (the RunRequest's fields), the
                   command, pid, start time
    progress.json  written by the job as cases finish (tracker.capture.progress.ProgressFile)
    log            the job's stderr (a line per finished case, errors)
    result.json    the job's stdout: the run summary (tracker.capture.record.run_summary, as `run --json`)
    exit           the exit status, written when the process ends (if the dashboard is still up)
    cancel         created to ask the run to stop; the job then records it as cancelled
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracker.capture.record import (  # noqa: F401 - the page's defaults
    DEFAULT_COMPILE_TIMEOUT_S,
    DEFAULT_ROUNDS,
    DEFAULT_TIMEOUT_S,
    RunRequest,
)
from tracker.common.errors import InputError
from tracker.common.files import read_log, write_json_atomic
from tracker.common.processes import child_env, process_alive
from tracker.variants.register import defines_kernel
from tracker.workloads import get_workload
from tracker.workloads.problem_folder import is_problem_folder

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_TAIL_BYTES = 6000


def device_queue() -> list[dict[str, Any]]:
    """Who holds each device and who waits for it (tracker.capture.devicelock), for the Benchmark page."""
    from tracker.capture.devicelock import queue

    return queue()


def jobs_dir(store: str | os.PathLike) -> Path:
    return Path(f"{Path(store).resolve()}.jobs")


def default_kernels_dir() -> Path:
    """The folder kernels may be run from: $KERNELBEAM_KERNELS_DIR, else kernels/ of the repository."""
    return Path(os.environ.get("KERNELBEAM_KERNELS_DIR") or REPO_ROOT / "kernels").resolve()


def default_problems_dir() -> Path:
    """The folder GPU Mode problem folders are offered from: $KERNELBEAM_PROBLEMS_DIR, else problems/."""
    return Path(os.environ.get("KERNELBEAM_PROBLEMS_DIR") or REPO_ROOT / "problems").resolve()


def list_problems(problems_dir: str | os.PathLike) -> list[str]:
    """Problem folders directly under the folder (names): those holding task.yml and reference.py."""
    root = Path(problems_dir).resolve()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and is_problem_folder(p))


def resolve_problem(name: str, problems_dir: str | os.PathLike) -> Path:
    """The problem folder of that name under the problems folder; ValueError for anything else."""
    root = Path(problems_dir).resolve()
    resolved = (root / str(name).strip()).resolve()
    if not str(name).strip() or resolved.parent != root:
        raise InputError(f"{name!r} is not a folder directly under the problems folder {root}")
    if not is_problem_folder(resolved):
        raise InputError(f"{resolved} is not a problem folder (it needs task.yml and reference.py)")
    return resolved


def list_kernels(kernels_dir: str | os.PathLike) -> list[str]:
    """Kernel files under the folder (relative paths): Python files that define custom_kernel."""
    root = Path(kernels_dir).resolve()
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.rglob("*.py"), key=lambda p: (len(p.relative_to(root).parts), str(p))):
        if any(part.startswith((".", "__")) for part in path.relative_to(root).parts):
            continue
        if path.resolve().is_relative_to(root) and defines_kernel(path):
            out.append(str(path.relative_to(root)))
    return out


def resolve_kernel(
    path: str | os.PathLike, kernels_dir: str | os.PathLike, problem_dir: str | os.PathLike | None = None
) -> Path:
    """The kernel file as an absolute path, after resolving symlinks; ValueError unless it is a .py file inside
    the kernels folder or, where a problem folder is chosen, inside that one (its own submission)."""
    root = Path(kernels_dir).resolve()
    roots = [root] + ([Path(problem_dir).resolve()] if problem_dir is not None else [])
    text = str(path).strip()
    if not text:
        raise InputError("choose a kernel file")
    if "\x00" in text:
        raise InputError("the kernel path contains a NUL character")
    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = candidate.resolve()
    if not any(resolved.is_relative_to(r) for r in roots):
        where = " or the problem folder " + str(roots[1]) if len(roots) > 1 else ""
        raise InputError(f"{text} is outside the kernels folder {root}{where}; only kernels under it can be run")
    if resolved.suffix != ".py":
        raise InputError(f"{text} is not a Python file")
    if not resolved.is_file():
        raise InputError(f"no kernel file at {text}")
    return resolved


@dataclass
class Job:
    job_id: str
    folder: Path
    spec: dict[str, Any]

    @property
    def progress_file(self) -> Path:
        return self.folder / "progress.json"

    @property
    def cancel_file(self) -> Path:
        return self.folder / "cancel"

    @property
    def log_file(self) -> Path:
        return self.folder / "log"

    @property
    def result_file(self) -> Path:
        return self.folder / "result.json"

    @property
    def exit_file(self) -> Path:
        return self.folder / "exit"


def _new_job_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def _display_path(path: Path) -> str:
    """Relative to the working directory when inside it, as a CLI user would type it (runs are keyed on it)."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _reap(proc: subprocess.Popen, exit_file: Path) -> None:
    code = proc.wait()
    try:
        exit_file.write_text(str(code))
    except OSError:
        pass


def start_job(
    store: str | os.PathLike,
    kernel: str | os.PathLike,
    *,
    suite: str,
    mode: str = "benchmark",
    kernels_dir: str | os.PathLike | None = None,
    cases: list[int] | None = None,
    seed: int | None = None,
    timeout: float | None = None,
    family: str | None = None,
    parent: str | None = None,
    note: str | None = None,
    profile: bool = False,
    ncu: bool = False,
    device: str = "auto",
    problem: str | None = None,
    problems_dir: str | os.PathLike | None = None,
    gpus: str | None = None,
    compile_timeout: float | None = None,
    ab_baseline: str | os.PathLike | None = None,
    rounds: int = DEFAULT_ROUNDS,
) -> Job:
    """Validate, then start the tracker run in the background; returns at once. ValueError for bad input.

    `problem` names a folder under the problems folder (None: qr_v2). With `ab_baseline` (a file under the
    kernels folder) the job is a paired A/B session as `ab BASELINE KERNEL --rounds ROUNDS`: the baseline as A,
    the kernel (with its family, parent and note) as B."""
    kernels_dir = Path(kernels_dir) if kernels_dir is not None else default_kernels_dir()
    problem_path = None
    if problem:
        problem_path = resolve_problem(problem, problems_dir if problems_dir is not None else default_problems_dir())
    path = resolve_kernel(kernel, kernels_dir, problem_path)
    ab = None
    if ab_baseline:
        if mode != "benchmark" or profile or ncu or gpus is not None:
            raise InputError("an A/B session times benchmarks only: no test mode, profile, ncu or GPU queue")
        if int(rounds) < 2:
            raise InputError(f"an A/B session needs at least 2 rounds (a paired test needs two ratios); got {rounds}")
        ab = {"a": _display_path(resolve_kernel(ab_baseline, kernels_dir, problem_path)), "rounds": int(rounds)}
    workload = get_workload(problem_path)
    # The options are checked as `run` checks them (RunRequest.validate), before the job starts; the job's
    # process (tracker.capture.job) runs this request.
    request = RunRequest(
        path=_display_path(path), suite=suite, mode=mode, cases=[int(i) for i in cases] if cases else None,
        seed=None if seed is None else int(seed), family=family or None, parent=parent or None, note=note or None,
        timeout=DEFAULT_TIMEOUT_S if timeout is None else float(timeout), profile=profile, ncu=ncu,
        compile_timeout=DEFAULT_COMPILE_TIMEOUT_S if compile_timeout is None else float(compile_timeout),
        store=str(Path(store).resolve()), trigger="ui", device=device,
        problem=str(problem_path) if problem_path else None,
    )  # fmt: skip
    request.validate()
    if gpus is not None and not re.fullmatch(r"all|[1-9]\d*|\d+(,\d+)*,?", gpus):
        raise InputError(f"GPUs must be all, a count N or ids like 0,2; got {gpus!r}")

    job_id = _new_job_id()
    folder = jobs_dir(store) / job_id
    folder.mkdir(parents=True)
    job = Job(job_id, folder, {})
    argv = [sys.executable, "-m", "tracker.capture.job", str(folder / "job.json")]
    env = child_env(REPO_ROOT, PYTHONUNBUFFERED="1")
    job.spec = {
        "job_id": job_id,
        "kernel": _display_path(path),
        "suite": suite,
        "problem": workload.name,
        "mode": mode,
        "device": device,
        "gpus": gpus,
        "cases": cases,
        "seed": seed,
        "timeout": timeout,
        "compile_timeout": compile_timeout,
        "family": family,
        "parent": parent,
        "note": note,
        "profile": profile,
        "ncu": ncu,
        "ab": ab,
        "store": str(Path(store).resolve()),
        "request": dataclasses.asdict(request),
        "argv": argv,
        "created_at": datetime.now(UTC).isoformat(),
        "pid": None,
    }
    write_json_atomic(folder / "job.json", job.spec)  # read by the job's process as it starts
    with open(job.log_file, "wb") as log, open(job.result_file, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=log,
            stdin=subprocess.DEVNULL,
            cwd=Path.cwd(),
            env=env,
            start_new_session=True,  # survives the page (and a restart of the dashboard)
        )
    job.spec["pid"] = proc.pid
    write_json_atomic(folder / "job.json", job.spec)
    # Reap the child when it ends (else it lingers as a zombie of the dashboard) and note its exit status.
    threading.Thread(target=_reap, args=(proc, job.exit_file), daemon=True).start()
    return job


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def get_job(store: str | os.PathLike, job_id: str) -> Job | None:
    if not job_id or "/" in job_id or job_id.startswith("."):
        return None
    folder = jobs_dir(store) / job_id
    spec = _read_json(folder / "job.json")
    return Job(job_id, folder, spec) if spec is not None else None


def list_jobs(store: str | os.PathLike, limit: int | None = None) -> list[Job]:
    """Jobs of this store, newest first."""
    root = jobs_dir(store)
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir(), reverse=True):
        spec = _read_json(folder / "job.json")
        if spec is not None:
            out.append(Job(folder.name, folder, spec))
        if limit is not None and len(out) >= limit:
            break
    return out


def log_tail(job: Job, max_bytes: int = LOG_TAIL_BYTES) -> str:
    return read_log(job.log_file, max_bytes)


def status(job: Job) -> dict[str, Any]:
    """Where a job stands: state (starting/running/cancelling/finished/died), progress and its run.

    `finished` carries the run's status (passed/failed/cancelled/timeout/crashed) and run_id; `died` means the
    process ended without finishing the run (bad arguments, killed): the log tail says why.
    """
    progress = _read_json(job.progress_file) or {}
    alive = process_alive(job.spec.get("pid"))
    exit_text = job.exit_file.read_text().strip() if job.exit_file.exists() else None
    created = job.spec.get("created_at")
    try:
        since = (datetime.now(UTC) - datetime.fromisoformat(created)).total_seconds() if created else None
    except ValueError:
        since = None
    out: dict[str, Any] = {
        "job_id": job.job_id,
        "kernel": job.spec.get("kernel"),
        "suite": job.spec.get("suite"),
        "mode": job.spec.get("mode"),
        "created_at": created,
        "total": progress.get("total") or 0,
        "done": progress.get("done") or 0,
        "failed": progress.get("failed") or 0,
        "current": progress.get("current"),
        "phase": progress.get("phase"),
        "waiting_for": progress.get("waiting_for"),
        "gpu": progress.get("gpu"),
        "run_id": progress.get("run_id"),
        "status": progress.get("status"),
        "error": progress.get("error"),
        "exit_code": int(exit_text) if exit_text and exit_text.lstrip("-").isdigit() else None,
        "cancel_requested": job.cancel_file.exists(),
    }
    if progress.get("state") == "finished":
        out["state"] = "finished"
        out["elapsed_s"] = progress.get("elapsed_s")
    elif alive:
        out["state"] = "cancelling" if out["cancel_requested"] else progress.get("state", "starting")
        out["elapsed_s"] = since
        # How long since the last progress event (the file is rewritten on each): in the compiling phase, how
        # long the import and first call have gone without returning.
        try:
            out["quiet_s"] = max(0.0, time.time() - job.progress_file.stat().st_mtime)
        except OSError:
            out["quiet_s"] = None
    else:
        out["state"] = "died"
        out["elapsed_s"] = progress.get("elapsed_s")
        if not out["error"]:
            tail = log_tail(job, 2000).strip().splitlines()
            out["error"] = tail[-1] if tail else "the job ended without recording a run"
    result = _read_json(job.result_file) if out["state"] in ("finished", "died") else None
    if result:
        out["run_id"] = out["run_id"] or result.get("run_id")
        out["geomean_us"] = result.get("geomean_us")
        for key in ("pair_id", "a_runs", "b_runs"):  # an A/B session's summary
            if key in result:
                out[key] = result[key]
    return out


STALLED_AFTER_S = 30.0  # a first call quiet this long is said to be making no progress


def compile_budget_s(job: Job) -> float:
    """The job's compile budget (its --compile-timeout, else the tracker's default)."""
    return float(job.spec.get("compile_timeout") or DEFAULT_COMPILE_TIMEOUT_S)


def first_call_stalled(job: Job, state: dict[str, Any]) -> bool:
    """Whether the job is compiling (import and first call) and has reported nothing for STALLED_AFTER_S, or a
    quarter of a shorter budget: said long before the budget ends, since the device stays held until then."""
    quiet = state.get("quiet_s")
    threshold = min(STALLED_AFTER_S, compile_budget_s(job) / 4)
    return state.get("phase") == "compiling" and quiet is not None and quiet >= threshold


ACTIVE_STATES = ("starting", "running", "cancelling")  # a job in these still holds its process (status()'s state)


def is_active(job: Job) -> bool:
    return status(job)["state"] in ACTIVE_STATES


def cancel(store: str | os.PathLike, job_id: str) -> bool:
    """Ask a running job to stop (the tracker records the run as cancelled). False if there is no such job."""
    job = get_job(store, job_id)
    if job is None:
        return False
    job.cancel_file.touch()
    return True


def wait(job: Job, timeout: float = 600.0, poll: float = 0.2) -> dict[str, Any]:
    """Block until the job is no longer active (for scripts and tests); returns its final status. A finished job
    counts once its process has ended too: the run is finished when progress.json says so, its summary
    (result.json, the process's stdout) is complete only when the process has exited."""
    deadline = time.monotonic() + timeout
    while True:
        st = status(job)
        if st["state"] == "died" or (st["state"] == "finished" and not process_alive(job.spec.get("pid"))):
            return status(job)  # read again: the summary as the ended process left it
        if time.monotonic() > deadline:
            return st
        time.sleep(poll)
