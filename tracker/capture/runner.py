"""The runner: records a run of one variant by driving a spawned worker process and writing the result.

The worker runs the untrusted kernel; the runner only watches it (events file, timeout, exit status), so a
kernel that raises, hangs or kills its process is recorded with its error and output tail, and the caller
carries on. The store sees two short writes: the `running` row at the start and the whole run at the end.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker import store as store_mod
from tracker.capture.gitinfo import EMPTY as NO_GIT
from tracker.capture.gitinfo import capture_git, source_hash
from tracker.capture.naming import variant_name
from tracker.workloads.qr_v2.suites import cases_for, get_suite, hidden_seed

LOG_TAIL_CHARS = 4000
DEFAULT_TIMEOUT_S = 900.0
INCONCLUSIVE = ("timeout", "crashed", "cancelled")
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunRequest:
    path: str
    suite: str = "qr_v2"
    mode: str = "benchmark"
    cases: list[int] | None = None
    seed: int | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    family: str | None = None
    parent: str | None = None
    note: str | None = None
    profile: bool = False
    store: str = store_mod.DEFAULT_STORE
    trigger: str = "cli"
    device: str = "auto"
    name: str | None = None  # the variant's name; default from the path (tracker.capture.naming)
    recorded_path: str | None = None  # a registered snapshot run from a temp copy: the path and commit it has
    commit: str | None = None
    gpu_present: bool | None = None  # None: probe (only when a variant needs CUDA)

    def validate(self) -> None:
        """Raise ValueError with a clear message for any bad argument, before anything is started."""
        path = Path(self.path)
        if not path.is_file():
            raise ValueError(f"no kernel file at {self.path}")
        if path.suffix != ".py":
            raise ValueError(f"{self.path} is not a Python file")
        cases = cases_for(get_suite(self.suite), self.mode)
        for i in self.cases or []:
            if not 0 <= i < len(cases):
                raise ValueError(f"case {i} is out of range: suite {self.suite} has {len(cases)} {self.mode} cases")
        if self.cases is not None and len(set(self.cases)) != len(self.cases):
            raise ValueError(f"--cases names a case more than once: {self.cases}")
        if not Path(self.store).resolve().parent.is_dir():
            raise ValueError(f"cannot create store {self.store}: its folder does not exist")
        if self.timeout <= 0:
            raise ValueError("--timeout must be positive")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError("--device must be auto, cpu or cuda")


@dataclass
class RunOutcome:
    record: store_mod.RunRecord
    pending: store_mod.PendingRun | None = None  # where the run went if it could not be written
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.record.run["run_id"]

    @property
    def status(self) -> str:
        return self.record.run["status"]


class Cancelled(Exception):
    pass


def _new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _read_new_events(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    if not path.exists():
        return [], offset
    with open(path) as f:
        f.seek(offset)
        chunk = f.read()
    complete = chunk[: chunk.rfind("\n") + 1]  # a line still being written is read next time
    return [json.loads(line) for line in complete.splitlines() if line.strip()], offset + len(complete)


def _tail(path: Path) -> str:
    if not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - LOG_TAIL_CHARS))
        return f.read().decode(errors="replace")


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"the worker was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    return f"the worker exited with code {code} before finishing"


def _case_row(event: dict[str, Any]) -> dict[str, Any]:
    case = event["case"]
    row = {k: event.get(k) for k in store_mod.TABLE_COLUMNS["case_results"] if k in event}
    row.update(
        inputs=case.get("inputs"),
        case_idx=event["case_idx"],
        spec=event["spec"],
        batch=case["batch"],
        n=case["n"],
        cond=case["cond"],
        seed=case["seed"],
        case_name=case["case"],
    )
    return row


def build_record(req: RunRequest, run_id: str, started_at, source: str) -> store_mod.RunRecord:
    path = Path(req.path)
    git = capture_git(path) if req.recorded_path is None else dict(NO_GIT, git_commit=req.commit)
    if req.recorded_path is not None:
        path = Path(req.recorded_path)
    elif git["git_repo"]:  # the same file gets the same recorded path whatever directory the run started from
        path = path.resolve().relative_to(Path(git["git_repo"]).resolve())
    sha = source_hash(source)
    banned = "stream" in source.lower()
    warnings = "the word 'stream' appears in the source (banned in contest files)" if banned else None
    run = {
        "run_id": run_id,
        "variant_sha256": sha,
        "variant": req.name or variant_name(path),
        "path": str(path),
        "family": req.family,
        "parent_run": req.parent,
        "note": req.note,
        "status": "running",
        "suite": req.suite,
        "mode": req.mode,
        "seed": req.seed,
        "started_at": started_at,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "trigger": req.trigger,
        "warnings": warnings,
        **git,
    }
    variant = {
        "sha256": sha,
        "name": req.name or variant_name(path),
        "path": str(path),
        "source": source,
        "first_seen": started_at,
    }
    return store_mod.RunRecord(run=run, variant=variant)


def run_variant(
    req: RunRequest,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> RunOutcome:
    """Run one variant in a worker process and record it. Never raises for anything the kernel does."""
    req.validate()
    run_id = _new_run_id()
    source = Path(req.path).read_text()
    record = build_record(req, run_id, store_mod.now(), source)
    reason = cannot_run_here(source, req)
    if reason is not None:  # decided before any worker starts: `skipped` is not a failure of the variant
        # Recorded in the CPU context it was tried in, so `run --pending` does not offer it again here.
        record.run.update(status="skipped", error=reason, finished_at=store_mod.now(), gpu="CPU", device="cpu")
        return RunOutcome(record, store_mod.finish_run(req.store, record), [])
    try:
        store_mod.start_run(req.store, record)
    except store_mod.StoreLockedError:
        pass  # the complete run is still written (or saved to a side file) at the end

    workdir = Path(tempfile.mkdtemp(prefix="kernelbeam-"))
    events_path, log_path, job_path = (
        workdir / "events.jsonl",
        workdir / "worker.log",
        workdir / "job.json",
    )
    job = {
        "variant_path": str(Path(req.path).resolve()),
        "suite": req.suite,
        "mode": req.mode,
        "cases": req.cases,
        "seed": req.seed,
        "profile": req.profile,
        "trace_dir": str(Path(f"{req.store}.traces").resolve() / run_id),
        "events_path": str(events_path),
        "device": req.device,
    }
    job_path.write_text(json.dumps(job))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH")) if p)

    events: list[dict[str, Any]] = []
    status = error = None
    start = time.monotonic()
    if on_event is not None:
        total = len(req.cases or cases_for(get_suite(req.suite), req.mode))
        on_event({"event": "started", "run_id": run_id, "total": total, "elapsed_s": 0.0})
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tracker.capture.worker", str(job_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # so a timeout kills the kernel's own children too
        )
        offset = 0
        try:
            while True:
                finished = proc.poll() is not None
                new, offset = _read_new_events(events_path, offset)
                for event in new:
                    event["elapsed_s"] = time.monotonic() - start
                    events.append(event)
                    if on_event is not None:
                        on_event(event)
                if finished:
                    break
                if time.monotonic() - start > req.timeout:
                    _kill(proc)
                    status, error = (
                        "timeout",
                        f"the run exceeded its timeout of {req.timeout:g} s",
                    )
                    break
                if should_cancel is not None and should_cancel():
                    raise Cancelled
                time.sleep(0.1)
        except (Cancelled, KeyboardInterrupt):
            _kill(proc)
            status, error = "cancelled", "the run was cancelled"
        new, offset = _read_new_events(events_path, offset)
        events.extend(new)

    log_tail = _tail(log_path)
    shutil.rmtree(workdir, ignore_errors=True)
    _complete(record, req, events, status, error, proc.returncode, log_tail)
    if record.run["status"] in ("failed", "crashed") and _NO_CUDA.search(f"{record.run['error']}\n{log_tail}"):
        record.run.update(status="skipped", error=f"cannot run here: {record.run['error']}")
    pending = store_mod.finish_run(req.store, record)
    return RunOutcome(record, pending, events)


def _complete(record, req, events, status, error, returncode, log_tail) -> None:
    """Fill the record from the worker's events and how it ended."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_kind.setdefault(event["event"], []).append(event)
    for env in by_kind.get("env", [])[:1]:
        record.run.update({k: v for k, v in env.items() if k in store_mod.TABLE_COLUMNS["runs"]})
    kind = "test" if req.mode == "test" else "benchmark"
    for event in by_kind.get("case_done", []):
        record.cases.append({**_case_row(event), "kind": kind})
        record.samples.extend((event["case_idx"], rep, t) for rep, t in enumerate(event.get("samples") or []))
    for event in by_kind.get("profile", []):
        record.profile_cases.append(
            {k: event.get(k) for k in ("case_idx", "launches", "host_us", "device_us", "trace_path")}
        )
        record.profile_kernels.extend({"case_idx": event["case_idx"], **k} for k in event.get("kernels", []))

    timed_all = bool(by_kind.get("timing_done"))
    if timed_all and not by_kind.get("done"):
        # Every case was checked and timed; only the optional profile did not finish. That keeps the verdict.
        reason = error or _exit_text(returncode)
        record.run["warnings"] = "; ".join(filter(None, [record.run.get("warnings"), f"profile unfinished: {reason}"]))
        status = error = None
    done = {e["case_idx"] for e in by_kind.get("case_done", [])}
    unfinished = [e for e in by_kind.get("case_start", []) if e["case_idx"] not in done]
    if status is None:
        if by_kind.get("error"):
            status, error = "failed", by_kind["error"][0]["message"]
        elif timed_all:
            failed = [c["spec"] for c in record.cases if not c["passed"]]
            status = "failed" if failed or not record.cases else "passed"
            error = f"{len(failed)} case(s) failed: {', '.join(failed)}" if failed else None
        else:
            status, error = "crashed", _exit_text(returncode)
    for event in unfinished:  # the case the worker was in when it hung, crashed or was stopped
        case = _case_of(req, event["case_idx"])
        row = _case_row({**event, "case": case, "passed": False, "message": error})
        record.cases.append({**row, "kind": kind})
    # Like the contest's score: only a run of the whole suite in which every case passed has a geomean; a
    # subset (--cases) would not be comparable with full runs.
    means = [c.get("mean_us") for c in record.cases]
    whole_suite = len(means) == len(cases_for(get_suite(req.suite), req.mode))
    all_timed = req.mode != "test" and status == "passed" and whole_suite and all(means)
    record.run.update(
        status=status,
        error=error,
        log_tail=log_tail,
        finished_at=store_mod.now(),
        geomean_us=_geomean(means) if all_timed else None,
    )


# Static signs that a variant needs CUDA or a compiler (checked before the worker starts).
_NEEDS_CUDA = (
    (
        re.compile(r"torch\.utils\.cpp_extension|from\s+torch\.utils\s+import\s+cpp_extension"),
        "builds a C++/CUDA extension",
    ),
    (re.compile(r"\bload_inline\s*\("), "compiles inline C++/CUDA (load_inline)"),
    (re.compile(r"\.cuda\(\s*\)"), "moves tensors with .cuda()"),
    (re.compile(r"device\s*=\s*['\"]cuda"), "allocates on device='cuda'"),
)
# A worker error that says the same thing at run time.
_NO_CUDA = re.compile(
    r"CUDA is not available|Torch not compiled with CUDA|Found no NVIDIA driver|no CUDA GPUs are available|"
    r"CUDA_HOME environment variable is not set|nvcc.*not found",
    re.IGNORECASE,
)


def cannot_run_here(source: str, req: RunRequest) -> str | None:
    """Why this variant cannot run on this machine (it needs CUDA or a compiler and there is no GPU), or None."""
    needs = [why for pattern, why in _NEEDS_CUDA if pattern.search(source)]
    if not needs:
        return None
    if req.device == "cuda":
        return None
    present = req.gpu_present
    if present is None:
        from tracker.capture.envinfo import gpu_available

        present = req.device != "cpu" and gpu_available()
    if req.device == "cpu" or not present:
        return f"cannot run here: needs CUDA ({'; '.join(needs)}) and no GPU is available"
    return None


def _case_of(req: RunRequest, case_idx: int) -> dict[str, Any]:
    case = cases_for(get_suite(req.suite), req.mode)[case_idx]
    return (case.with_seed(hidden_seed(case.seed, req.seed)) if req.seed is not None else case).to_dict()
