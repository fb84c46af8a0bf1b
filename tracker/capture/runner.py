"""The runner: records a run of one variant by driving a spawned worker process and writing the result.

The worker runs the untrusted kernel; the runner only watches it (signed events on a pipe, the compile budget,
the timeout, exit status), so a kernel that raises, hangs or kills its process is recorded with its error and
output tail, and the caller carries on. The store sees two short writes: the `running` row at the start and the
whole run at the end. One run at a time per device (tracker.capture.devicelock); every process the kernel
started is ended with the run.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker import store as store_mod
from tracker.capture import compile_cache, devicelock, envinfo, gpustate, handoff, plausibility, sandbox, stopping
from tracker.capture.channel import Lines
from tracker.capture.deadlines import Deadlines
from tracker.capture.evidence import FIRST_PASS, FRESH_PASS, RESIDUAL_KEYS
from tracker.capture.evidence import collect as collect_evidence
from tracker.capture.record import (  # noqa: F401 - RunRequest and the defaults are this module's API too
    DEFAULT_COMPILE_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    INCONCLUSIVE,
    RunRequest,
    case_row,
    complete_record,
    exit_text,
)
from tracker.capture.worker import NO_CUDA
from tracker.common.files import read_log
from tracker.common.gitinfo import EMPTY as NO_GIT
from tracker.common.gitinfo import capture_git, source_hash
from tracker.common.processes import child_env, descendants, end_processes
from tracker.common.vocabulary import CASE_STATS
from tracker.store import Store
from tracker.store.schema import GPU_STATE_COLUMNS
from tracker.variants.naming import variant_name
from tracker.variants.scan import flags_as_dicts, scan_source

ORPHAN_ERROR = "the tracker process went away"
MAX_TRACE_BYTES = 256 << 20
MAX_HELPER_CHARS = 1 << 20
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunOutcome:
    record: store_mod.RunRecord
    pending: store_mod.PendingRun | None = None  # where the run went if it could not be written
    flushed: store_mod.FlushResult = field(default_factory=store_mod.FlushResult)  # earlier side files
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.record.run.run_id

    @property
    def status(self) -> str:
        return self.record.run.status


class Cancelled(Exception):
    pass


def _new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def build_record(req: RunRequest, run_id: str, started_at, source: str) -> store_mod.RunRecord:
    workload = req.workload()
    path = Path(req.path)
    git = capture_git(path) if req.recorded_path is None else dict(NO_GIT, git_commit=req.commit)
    if req.recorded_path is not None:
        path = Path(req.recorded_path)
    elif git["git_repo"]:  # the same file gets the same recorded path whatever directory the run started from
        path = path.resolve().relative_to(Path(git["git_repo"]).resolve())
    sha = source_hash(source)
    banned = "stream" in source.lower()
    flags = flags_as_dicts(scan_source(source))
    warnings = "the word 'stream' appears in the source (banned in contest files)" if banned else None
    run = store_mod.RunRow(
        run_id=run_id,
        variant_sha256=sha,
        variant=req.name or variant_name(path),
        path=str(path),
        family=req.family,
        parent_run=req.parent,
        note=req.note,
        status="running",
        suite=req.suite,
        mode=req.mode,
        seed=req.seed,
        started_at=started_at,
        host=socket.gethostname(),
        pid=os.getpid(),
        trigger=req.trigger,
        warnings=warnings,
        flags=json.dumps(flags),
        problem=workload.name,
        problem_sha256=workload.sha256,
        pair_id=req.pair_id,
        pair_side=req.pair_side,
        pair_round=req.pair_round,
        **git,
    )
    variant = {
        "sha256": sha,
        "name": req.name or variant_name(path),
        "path": str(path),
        "source": source,
        "first_seen": started_at,
    }
    return store_mod.RunRecord(run=run, variant=variant)


def _problem_folder(req: RunRequest) -> str | None:
    """The absolute problem folder the worker loads; None for the built-in qr_v2 (also when named so)."""
    folder = getattr(req.workload(), "folder", None)
    return str(folder) if folder is not None else None


def run_variant(
    req: RunRequest,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> RunOutcome:
    """Run one variant in a worker process and record it. Never raises for anything the kernel does."""
    if stopping.REQUESTED.is_set():  # a SIGTERM came between two runs of a session: this one does not start
        raise SystemExit(128 + signal.SIGTERM)
    sandbox.ready_runs_root()  # a planted one is refused before the run is recorded
    record = new_record(req)
    try:
        Store(req.store).start_run(record)
    except store_mod.StoreLockedError:
        pass  # the complete run is still written (or saved to a side file) at the end

    def checkpoint(events: list[dict[str, Any]], verdicts: list[dict[str, Any]]) -> None:
        # What this run would be if the tracker died now: written beside the store, ignored while we live.
        run = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in record.run.as_dict().items()}  # as stored
        copy = store_mod.RunRecord(run=store_mod.RunRow(**run), variant=dict(record.variant))
        done = [dict(e) for e in events]
        judge(done, verdicts, req)
        complete_record(copy, req, done, "crashed", ORPHAN_ERROR, None, "")
        Store(req.store).save_checkpoint(copy)

    events = capture_variant(req, record, on_event, should_cancel, checkpoint=checkpoint)
    flushed = store_mod.FlushResult()
    pending = Store(req.store).finish_run(record, flushed=flushed)
    if stopping.REQUESTED.is_set():  # the run is recorded; a session of runs (ab, fidelity, many files) ends here
        raise SystemExit(128 + signal.SIGTERM)
    return RunOutcome(record, pending, flushed, events)


def new_record(req: RunRequest, run_id: str | None = None) -> store_mod.RunRecord:
    """Validate the request and describe the run (source, git state) before it starts; no store access."""
    req.validate()
    source = Path(req.path).read_text()
    return build_record(req, run_id or _new_run_id(), store_mod.now(), source)


def capture_variant(
    req: RunRequest,
    record: store_mod.RunRecord,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    variant_path: str | None = None,
    checkpoint: Callable[[list, list], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the variant in a worker process and complete `record` in memory; never touches the store (the
    scale-out queue runs this on remote workers and writes from the submitting process). `variant_path` is
    where this machine has the source, if not at req.path."""
    run_id = record.run.run_id
    reason = cannot_run_here(record.variant["source"], req)
    if reason is not None:  # decided before any worker starts: `skipped` is not a failure of the variant
        # Recorded in the CPU context it was tried in, so `run --pending` does not offer it again here.
        record.run.update(status="skipped", error=reason, finished_at=store_mod.now(), gpu="CPU", device="cpu")
        return []
    start = time.monotonic()

    def emit(event: dict[str, Any]) -> None:
        # The worker's events carry their time since the worker started (after the device lock), so "compiled
        # (4.5 s)" is the compile time, not the wait for the device; the runner's own events, since the run began.
        if on_event is not None:
            on_event({"elapsed_s": time.monotonic() - start, **event})

    total = len(req.cases or req.suite_cases())
    emit({"event": "started", "run_id": run_id, "total": total})
    events: list[dict[str, Any]] = []
    returncode = None
    log_tail = ""
    device = _resolved_device(req)
    key = devicelock.device_key(req.device, device == "cuda")
    lock = devicelock.DeviceLock(key, run_id)
    last_wait = [0.0]

    def waiting(holder: dict[str, Any] | None) -> None:
        if time.monotonic() - last_wait[0] >= 1.0:  # a progress line a second, not one per poll
            last_wait[0] = time.monotonic()
            emit({"event": "waiting", "device": key, "holder": holder})

    try:
        lock.acquire(on_wait=waiting, should_cancel=should_cancel)
    except (InterruptedError, KeyboardInterrupt):
        complete_record(record, req, [], "cancelled", "the run was cancelled while waiting for the device", None, "")
        return []
    try:
        record.run.device_load_start = envinfo.device_load(key)
        if req.method == "contest":  # the problem folder's own harness, in the same sandbox, lock and budgets
            from tracker.capture import contest_method

            record.run.method = "contest"
            status, error, returncode, log_tail, compile_s, forged = contest_method.drive(
                req, record, events, should_cancel, device
            )
        else:
            driven = time.monotonic()
            status, error, returncode, log_tail, compile_s, forged = _drive_worker(
                req, record, events, emit, should_cancel, device, variant_path, checkpoint
            )
            if req.ncu:  # after the timed worker has ended, under the same lock: its timings are already taken
                timed_s = time.monotonic() - driven - (compile_s or 0.0)
                _ncu_profile(req, record, events, status, device, variant_path, req.timeout - timed_s)
        record.run.device_load_end = envinfo.device_load(key)
    finally:
        lock.release()
    loads = (record.run.device_load_start, record.run.device_load_end)
    record.run.shared_device = any(load["shared"] for load in loads)
    record.run.device_load_start, record.run.device_load_end = (json.dumps(x) for x in loads)
    record.run.compile_s = compile_s
    complete_record(record, req, events, status, error, returncode, log_tail)
    if record.run.status in ("failed", "crashed") and _NO_CUDA.search(f"{record.run.error}\n{log_tail}"):
        record.run.update(status="skipped", error=f"cannot run here: {record.run.error}")
    refused = sandbox.contained(record.run.sandbox) and _UNIX_SOCKET_REFUSED.search(log_tail)
    if record.run.error and refused:  # a bare EACCES says little
        record.run.update(error=f"{record.run.error} ({UNIX_SOCKET_HINT})")
    if NO_CUDA in (record.run.error or "") and sandbox.contained(record.run.sandbox) and _gpu_available():
        record.run.update(error=f"{record.run.error} ({SANDBOX_CUDA_HINT})")  # the GPU is there, outside
    flags = plausibility.flags(record.cases, req.mode, device) + plausibility.made_flags(events, req.mode, device)
    if flags:
        record.run.flags = json.dumps(json.loads(record.run.flags) + flags)
    if forged:
        flags = json.loads(record.run.flags) + [
            {"code": "forged-events", "line": 0, "severity": "hack", "message": f"{forged} event line(s) on the "
             "worker's channel failed authentication and were ignored"}
        ]  # fmt: skip
        record.run.flags = json.dumps(flags)
    return events


def _ncu_profile(req, record, events, status, device: str, variant_path: str | None, budget_s: float) -> None:
    """The Nsight Compute pass (tracker.capture.ncu_pass) over the cases the worker finished; what it could not
    do goes to the run's warnings and to stderr."""
    from tracker.capture import ncu_pass

    done = [e["case_idx"] for e in events if e.get("event") == "case_done" and isinstance(e.get("case_idx"), int)]
    note = ncu_pass.unavailable(device, sandboxed=req.sandbox and sandbox.unavailable() is None)
    if note is None and (status is not None or not done):
        note = "no Nsight Compute profile: the timed run did not finish its cases"
    if note is not None:
        result = ncu_pass.NcuResult(notes=[note])
    else:
        token = f"KERNELBEAM_RUN_TOKEN={secrets.token_hex(8)}"
        writable = ncu_pass.lock_binds()

        cache = compile_cache.bind(record.run.variant_sha256, req.compile_cache)  # what the timed run compiled

        def command(front: list[str], argv: list[str], workdir: Path) -> tuple[list[str], dict[str, str], str]:
            return _worker_command(req, workdir, None, token, cache, argv, writable, front)

        job = {"variant_path": str(Path(variant_path or req.path).resolve()), "problem": _problem_folder(req),
               "suite": req.suite, "mode": req.mode, "seed": req.seed}  # fmt: skip
        final = Store(req.store).traces_dir(record.run.run_id)
        result = ncu_pass.profile_cases(job, sorted(set(done)), budget_s, final, command)
    record.ncu_cases, record.ncu_kernels = result.cases, result.kernels
    for line in result.notes:
        print(f"ncu: {line}", file=sys.stderr)
    if result.notes:
        record.run.warn(*result.notes)


def _gpu_available() -> bool:
    from tracker.capture.envinfo import gpu_available

    return gpu_available()


def _start_checker(req, device: str, private: Path, workdir: Path, worker_end: int):
    """The checker process (tracker.capture.checker), outside the sandbox; returns (process, verdict reader)."""
    verdict_r, verdict_w = os.pipe()
    job = {
        "problem": _problem_folder(req),
        "suite": req.suite,
        "mode": req.mode,
        "cases": req.cases,
        "seed": req.seed,
        "device": device,
        "worker_fd": worker_end,
        "verdict_fd": verdict_w,
        "evidence_dir": str(private),
        "runner_pid": os.getpid(),
        "cleanup": [str(workdir), str(private)],  # if the runner is killed, the checker removes its folders
    }
    env = child_env(_PACKAGE_ROOT, PYTHONUNBUFFERED="1")
    with open(private / "checker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tracker.capture.checker"],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(worker_end, verdict_w),
            start_new_session=True,
        )
    os.close(verdict_w)
    try:
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    return proc, Lines(verdict_r)


def _worker_command(
    req,
    workdir: Path,
    private: Path | None,
    token: str,
    cache: compile_cache.Binding,
    argv: list[str] | None = None,
    writable: list[Path] = (),
    front: list[str] = (),
) -> tuple[list[str], dict[str, str], str]:
    """The worker's command line and environment (or `argv`'s started by `front`: the ncu pass), in the sandbox
    where one can be made, with this source's compile cache; and how it ran."""
    argv = argv or [sys.executable, "-m", "tracker.capture.worker"]
    inner = {"PYTHONPATH": str(_PACKAGE_ROOT), "PYTHONUNBUFFERED": "1", "PYTHONSAFEPATH": "1", **cache.env}
    name, value = token.split("=", 1)
    inner[name] = value  # every process the kernel starts inherits it: how setsid'd children are found and ended
    hidden = sandbox.hidden_from_kernel(private, req.store)
    return sandbox.wrap(argv, workdir, inner, hidden, [*writable, *cache.writable], req.sandbox, front)


# The worker's events by kind, with the fields the runner's bookkeeping relies on and their types. The kernel shares
# the worker's process and can sign events: one that lacks them is dropped and counted as forged, never a crash that
# costs the run its record (or ends an `ab` session).
EVENT_FIELDS: dict[str, dict[str, type]] = {
    "env": {}, "import_start": {}, "import_done": {}, "compiled": {}, "timing_done": {}, "done": {},
    "case_start": {"case_idx": int}, "case_done": {"case_idx": int}, "rep": {"case_idx": int},
    "profile": {"case_idx": int}, "error": {"message": str},
}  # fmt: skip


def _well_formed(event: dict[str, Any]) -> bool:
    kind = event.get("event")
    fields = EVENT_FIELDS.get(kind) if isinstance(kind, str) else None
    return fields is not None and all(type(event.get(name)) is kind_ for name, kind_ in fields.items())


def _number(value: Any) -> bool:
    return type(value) in (int, float) and 0 <= value < float("inf")


def _progress_event(
    event: dict[str, Any], specs: list[str], total: int, verdicts: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """What the progress bar and file show of a worker event: the case's name and the count from the run's own
    suite (never text the kernel wrote: it reached the terminal as escapes and fake lines), numbers only where
    they are numbers, and a case passed only where the checker, which has answered by then, passed it too."""
    kind, idx = event.get("event"), event.get("case_idx")
    shown: dict[str, Any] = {"event": kind, "elapsed_s": event["elapsed_s"]}
    if kind in ("import_start", "compiled"):
        return shown
    if kind == "env":
        gpu = event.get("gpu")
        return {**shown, "gpu": gpu[:120] if isinstance(gpu, str) else None}
    if type(idx) is not int or not 0 <= idx < len(specs):
        return None
    shown.update(case_idx=idx, spec=specs[idx], total=total)
    if kind == "case_start":
        return shown
    if kind == "case_done":
        judged = [v for v in verdicts if v.get("event") == "verdict" and v.get("case_idx") == idx]
        return {**shown, "passed": event.get("passed") is True and bool(judged) and all(v["passed"] for v in judged)}
    if kind == "rep" and all(_number(event.get(k)) for k in ("done", "expected")):
        eta = event.get("case_eta_s")
        return {
            **shown,
            "done": event["done"],
            "expected": event["expected"],
            "case_eta_s": eta if _number(eta) else None,
        }
    return None


def _drive_worker(req, record, events, emit, should_cancel, device, variant_path=None, checkpoint=None):
    """Start the checker and the worker, feed the worker its job, follow both under the compile budget and then
    the timeout, end every process they started, and apply the checker's verdicts to the worker's cases.
    Returns (status, error, returncode, log_tail, compile_s, forged lines)."""
    suite, workload = req.suite_cases(), req.workload()
    specs = [(c if req.seed is None else workload.hidden_seed(c, req.seed)).spec for c in suite]
    total = len(req.cases or suite)
    malformed = 0  # signed events without the fields their kind has: forged too
    workdir = sandbox.run_folder("kernelbeam-")  # the worker's own folder: all it may write
    private = sandbox.run_folder("kernelbeam-check-")  # the checker's log and evidence
    for sub in ("tmp", "traces"):
        (workdir / sub).mkdir()
    log_path = private / "worker.log"  # not in the run folder, where the kernel could swap it for a link
    key = secrets.token_bytes(32)
    token = f"KERNELBEAM_RUN_TOKEN={secrets.token_hex(8)}"
    store_mod.side_key()  # exists before the sandbox masks it
    read_fd, write_fd = os.pipe()
    worker_end, checker_end = handoff.pair()
    cache = compile_cache.bind(record.run.variant_sha256, req.compile_cache)
    record.run.compile_cache = cache.state
    command = functools.partial(_worker_command, req, workdir, private, token, cache)
    how = sandbox.how_it_runs(req.sandbox)
    record.run.sandbox = how
    in_sandbox = sandbox.contained(how)
    job = {
        "variant_path": str(Path(variant_path or req.path).resolve()),
        "suite": req.suite,
        "mode": req.mode,
        "cases": req.cases,
        "seed": req.seed,
        "profile": req.profile,
        "trace_dir": str(workdir / "traces"),
        "device": device,  # decided here, so that the worker and the checker make their inputs on the same device
        "channel_fd": write_fd,
        "check_fd": worker_end.fileno(),
        "key": key.hex(),
        "runner_pid": None if in_sandbox else os.getpid(),  # its parent inside the sandbox is bwrap
        "workdir": str(workdir),
        "problem": _problem_folder(req),
        # "overlap": the worker's own check always runs while the checker judges, even where the checker takes
        # longer (timing.run_loop's other order), for timing the two orders against the contest's harness
        "checker_order": os.environ.get("KERNELBEAM_CHECKER_ORDER", "adaptive"),
    }
    status = error = None
    compile_s = None
    channel = Lines(read_fd, key)
    verdicts: list[dict[str, Any]] = []
    gpu = gpustate.Sampler(devicelock.visible_device())
    if device == "cuda":  # from here on: the checker's clock bounds each case's timed loop inside these readings
        gpu.start()
        if gpu.unavailable:
            record.run.warn(f"no GPU state: {gpu.unavailable}")
    checker, verdict_lines = _start_checker(req, device, private, workdir, checker_end.fileno())
    checker_end.close()
    old_term = None
    proc = None
    selector = selectors.DefaultSelector()
    selector.register(read_fd, selectors.EVENT_READ)
    selector.register(verdict_lines.fd, selectors.EVENT_READ)
    try:
        with open(log_path, "wb") as log:
            proc, _ = sandbox.start(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE,
                cwd=workdir,
                pass_fds=(write_fd, worker_end.fileno()),
                start_new_session=True,  # its own process group and session: ended as a whole
            )
        os.close(write_fd)
        write_fd = None
        worker_end.close()
        seen: set[tuple[int, int]] = set()
        try:
            old_term = stopping.catch()
            try:
                proc.stdin.write(json.dumps(job, default=str).encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            start = time.monotonic()
            clocks = Deadlines(req.compile_timeout, req.timeout, start)
            last_scan = 0.0
            folder = sandbox.FolderWatch(workdir)
            while True:
                finished = proc.poll() is not None
                verdicts.extend(verdict_lines.read())
                for event in channel.read():
                    if not _well_formed(event):
                        malformed += 1
                        continue
                    event["elapsed_s"] = time.monotonic() - start
                    if event["event"] == "compiled" and clocks.compiled is None:
                        compile_s = event["elapsed_s"]
                    clocks.saw(event["event"], time.monotonic())
                    events.append(event)
                    if event["event"] in ("case_start", "case_done"):
                        # the checker reports before it answers the worker: its verdicts on this case are there
                        verdicts.extend(verdict_lines.read())
                    shown = _progress_event(event, specs, total, verdicts)
                    if shown is not None:
                        emit(shown)
                    if event["event"] in ("case_start", "case_done") and checkpoint is not None:
                        checkpoint(events, verdicts)
                if finished:
                    break
                if checker.poll() not in (None, 0):
                    status, error = "crashed", f"the checker process died (exit {checker.returncode})"
                    break
                now = time.monotonic()
                if now - last_scan > 0.5 and not in_sandbox:  # remember the kernel's children before they detach
                    seen |= descendants(proc.pid)
                    last_scan = now
                if (excess := folder.excess()) is not None:
                    status, error = "failed", excess
                    break
                if (ran_out := clocks.expired(now)) is not None:
                    status, error = ran_out
                    break
                if should_cancel is not None and should_cancel():
                    raise Cancelled
                selector.select(0.1)
        except (Cancelled, KeyboardInterrupt):
            status, error = "cancelled", "the run was cancelled"
        except stopping.Stopped:
            status, error = "cancelled", "the tracker was stopped by SIGTERM"
        finally:
            stopping.release(old_term)
            try:
                os.killpg(proc.pid, signal.SIGTERM if status == "cancelled" and not in_sandbox else signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            _kill(proc)
            if not in_sandbox:  # in a sandbox, its PID namespace ended with it, and every process in it
                end_processes(proc.pid, seen, token)
        for event in channel.read():
            if not _well_formed(event):
                malformed += 1
                continue
            event["elapsed_s"] = time.monotonic() - start
            events.append(event)
        _finish_checker(checker, verdicts, verdict_lines)
        gpu.stop()
        returncode = proc.returncode
        if in_sandbox and returncode is not None and 128 < returncode < 160:
            returncode = 128 - returncode  # bwrap passes a signal's death on as 128 + N: the worker's own -N
        log_tail = read_log(log_path)
        broke = next((v for v in verdicts if v.get("event") == "protocol"), None)
        if broke is not None and status is None:  # the kernel wrote into the worker's socket to the checker
            status, error = "failed", f"the kernel broke the handoff to the checker: {broke.get('message')}"
        elif checker.returncode not in (0, None, -signal.SIGKILL) and status is None:
            status, error = "crashed", f"the checker process failed: {read_log(private / 'checker.log')[-600:]}"
        judge(events, verdicts, req, gpu.readings)
        _keep_traces(events, workdir, Store(req.store).traces_dir(record.run.run_id), profiled=req.profile)
        _record_helpers(record, events, Path(variant_path or req.path))
        record.evidence = collect_evidence(private, events)  # read before the folder goes
        record.run.warn(compile_cache.trim(cache))
    finally:
        gpu.stop()
        if write_fd is not None:
            os.close(write_fd)
        if proc is None:
            worker_end.close()
            _kill(checker)
        selector.close()
        channel.close()
        verdict_lines.close()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
    return status, error, returncode, log_tail, compile_s, channel.forged + malformed


def _finish_checker(checker: subprocess.Popen, verdicts: list, lines: Lines) -> None:
    """The worker is gone, so the checker's socket is closed: it answers what it still holds and ends."""
    try:
        checker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill(checker)
    verdicts.extend(lines.read())


def _resolved_device(req) -> str:
    if req.device == "cuda" or (req.device == "auto" and _gpu_available()):
        return "cuda"
    return "cpu"


def judge(events: list[dict[str, Any]], verdicts: list[dict[str, Any]], req, gpu_readings=()) -> None:
    """Give each finished case the checker's verdict in place of the worker's word.

    A case passes only if the worker reports no failure of its own (the kernel raised, changed its input) and
    the checker passed every output the case needed: the first call, and each timed repetition the worker
    reports a sample for. Residuals and evidence come from the checker; the statistics are computed here from
    the samples; wall_us is the checker's clock between repetitions, per call; the GPU state is the runner's
    NVML readings (gpu_readings) inside the case's timed loop, as the checker's clock bounds it."""
    by_case: dict[int, list[dict[str, Any]]] = {}
    for v in verdicts:
        if v.get("event") == "verdict" and isinstance(v.get("case_idx"), int):
            by_case.setdefault(v["case_idx"], []).append(v)
    cases, workload = req.suite_cases(), req.workload()
    wanted = set(req.cases) if req.cases else set(range(len(cases)))
    seen: dict[str, set[int]] = {"case_start": set(), "profile": set()}
    for event in events:  # one start and one profile per case of this run: others are forged, and dropped
        kind, idx = event.get("event"), event.get("case_idx")
        if kind in seen:
            if type(idx) is not int or idx not in wanted or idx in seen[kind]:
                event["event"] = f"{kind}_refused"
            else:
                seen[kind].add(idx)
    done: set[int] = set()
    for event in events:
        if event.get("event") != "case_done":
            continue
        idx = event.get("case_idx")
        if type(idx) is not int or idx not in wanted or idx in done:  # a forged or repeated case: not recorded
            event["event"] = "case_done_refused"
            continue
        done.add(idx)
        case = cases[idx] if req.seed is None else workload.hidden_seed(cases[idx], req.seed)
        mine = by_case.get(idx, [])
        # The checker made the inputs too: its count, else the case's own (a problem folder's is known once made).
        made = next((v["inputs"] for v in mine if type(v.get("inputs")) is int and v["inputs"] > 0), None)
        inputs = 1 if req.mode == "test" else made or case.input_count()
        # What the case is, is ours to say: never the worker's description.
        event.update(spec=case.spec, case={**case.to_dict(), "inputs": inputs})
        samples = event.get("samples") or []
        if not isinstance(samples, list) or not all(isinstance(x, int | float) for x in samples):
            samples = []
        # a passed benchmark case has had its call on fresh inputs judged too (plausibility reads its time)
        needed = {FIRST_PASS} if req.mode == "test" else {FIRST_PASS, FRESH_PASS, *range(len(samples))}
        judged = {v["rep"] for v in mine}
        bad = next((v for v in mine if not v["passed"]), None)
        for k in [*RESIDUAL_KEYS, "evidence", *CASE_STATS, "wall_us", "made_checker_us", "columns", *GPU_STATE_COLUMNS]:
            event.pop(k, None)  # never the worker's word for these
        event["columns"] = workload.case_columns(case)  # the workload's description (label, shape), set after the pop
        event["samples"] = samples
        if any(not (0 < x < float("inf")) for x in samples):
            bad = {"rep": FIRST_PASS, "message": "the worker reported a time that is not positive and finite"}
        if bad is not None:
            where = {FIRST_PASS: "", FRESH_PASS: "the call on fresh inputs: "}.get(
                bad["rep"], f"repetition {bad['rep']}: "
            )
            event.update(passed=False, message=where + str(bad["message"]), evidence=bad.get("evidence"))
        elif not event.get("passed"):
            event["passed"] = False  # the worker's own failure (the kernel raised, changed its input) stands
        elif not needed <= judged:
            missing = len(needed - judged)
            event.update(passed=False, message=f"{missing} of the {len(needed)} outputs this case reports were "
                         "never shown to the checker: the worker's results cannot be trusted")  # fmt: skip
        else:
            event["passed"] = True
        # a passed case's residuals are its own inputs', never those of the call on fresh ones (a seed drawn per run)
        last = bad or next((v for v in reversed(mine) if v.get("rep") != FRESH_PASS), None) or {}
        event.update({k: v for k, v in (last.get("residuals") or {}).items() if k in RESIDUAL_KEYS})
        event["flops"], event["bytes"] = workload.work(cases[idx])
        event["check_s"] = sum(float(v.get("check_s") or 0.0) for v in mine)  # for the run's time split, not stored
        if samples and req.mode != "test":
            event.update(_stats(samples))
            event["wall_us"] = plausibility.wall_per_call(mine, inputs)
            event["made_checker_us"] = plausibility.made_per_call(mine)
            event.update(gpustate.case_state(gpu_readings, gpustate.timed_window(mine)))


def _stats(samples: list[float]) -> dict[str, float]:
    from tracker.common.samplestats import stats

    st = stats(samples)
    return dict(
        runs=st.runs, mean_us=st.mean, std_us=st.std, err_us=st.err, median_us=st.median, best_us=st.best,
        worst_us=st.worst,
    )  # fmt: skip


def _keep_traces(events: list[dict[str, Any]], workdir: Path, final: Path, *, profiled: bool) -> None:
    """Profile traces the worker wrote into its folder move beside the store (a run asked for a profile); paths
    elsewhere are dropped. The folder is the kernel's to write: a `traces` it made a link to another folder had the
    runner, outside the sandbox, move any of the user's files (the store itself, the side-file key) on a profile
    event the kernel signed with the key it found in its own process."""
    traces = workdir / "traces"
    for event in events:
        if event.get("event") != "profile" or not event.get("trace_path"):
            continue
        src = traces / Path(str(event["trace_path"])).name
        event["trace_path"] = None
        try:
            inside = profiled and not traces.is_symlink() and src.resolve().parent == workdir.resolve() / "traces"
            if inside and src.is_file() and not src.is_symlink() and src.stat().st_size <= MAX_TRACE_BYTES:
                final.mkdir(parents=True, exist_ok=True)
                shutil.move(src, final / src.name)
                event["trace_path"] = str((final / src.name).resolve())
        except OSError:
            pass


def _record_helpers(record, events: list[dict[str, Any]], variant: Path) -> None:
    """Modules the kernel imported from beside itself: read here (not as the worker says), recorded, scanned."""
    folder = variant.resolve().parent
    named = next((e.get("helpers") for e in events if e.get("event") == "timing_done"), None) or []
    sources: dict[str, str] = {}
    total = 0
    for name in named if isinstance(named, list) else []:
        path = Path(str(name)).resolve()
        beside = path.parent == folder or folder in path.parents
        # the worker names them: only Python files beside the kernel, never the key the sandbox hides from it
        if path == variant.resolve() or not beside or path.suffix != ".py" or store_mod.is_side_key(path):
            continue
        try:  # its size before its text: a sparse file of many GiB reads as its size in memory
            if not path.is_file() or path.stat().st_size > MAX_HELPER_CHARS - total:
                continue
        except OSError:
            continue
        text = path.read_text(errors="replace")
        total += len(text)
        if total > MAX_HELPER_CHARS:
            break
        sources[str(path.relative_to(folder))] = text
    if not sources:
        return
    record.run.helper_sources = json.dumps(sources)
    flags = json.loads(record.run.flags or "[]")
    for rel, text in sources.items():
        flags += [{**f, "message": f"{rel}: {f['message']}"} for f in flags_as_dicts(scan_source(text))]
    record.run.flags = json.dumps(flags)


_NEEDS_CUDA = (
    # A C++ extension alone builds and runs on the CPU: only its CUDA sources need a GPU.
    (re.compile(r"\bcuda_sources\b|\bCUDAExtension\b|\bwith_cuda\s*=\s*True|\.cu['\"]"), "builds a CUDA extension"),
    (re.compile(r"\.cuda\(\s*\)"), "moves tensors with .cuda()"),
    (re.compile(r"device\s*=\s*['\"]cuda"), "allocates on device='cuda'"),
)
# A worker error that says the same thing at run time.
_NO_CUDA = re.compile(
    r"CUDA is not available|Torch not compiled with CUDA|Found no NVIDIA driver|no CUDA GPUs are available|"
    r"CUDA_HOME environment variable is not set|nvcc.*not found|c\+\+: not found|Ninja is required",
    re.IGNORECASE,
)
# The seccomp filter (tracker.capture.seccomp_exec) refusing a Unix datagram socket (EACCES) or any connect()
# (ENOENT, as for a socket that is not there), in a traceback of the worker's log.
_UNIX_SOCKET_REFUSED = re.compile(
    r'socket\.py", line \d+, in (?:__init__|socketpair)\n(?:[ \t].*\n)*PermissionError: \[Errno 13\]'
    r"|\.connect\(.*\)\n(?:[ \t].*\n)*FileNotFoundError: \[Errno 2\]"
)
SANDBOX_CUDA_HINT = (
    "this machine has a GPU, but CUDA did not start inside the sandbox: `--no-sandbox` runs without it (README, "
    "Trust); python3 validation/seccomp_cuda_probe.py tells which rule of its system-call filter stops it"
)
UNIX_SOCKET_HINT = (
    "the sandbox refuses connect() and Unix datagram sockets, which multiprocessing's forkserver and Manager "
    'need: use multiprocessing.get_context("fork") or ("spawn"); README, Trust'
)


def _code_only(source: str) -> str:
    """The source without comments and bare string statements (docstrings), so prose that mentions
    cuda_sources or .cuda() is not taken for code that calls them."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            body[:] = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))] or [
                ast.Pass()
            ]
    return ast.unparse(tree)


def cannot_run_here(source: str, req: RunRequest) -> str | None:
    """Why this variant cannot run on this machine (it needs CUDA or a compiler and there is no GPU), or None."""
    code = _code_only(source)
    needs = [why for pattern, why in _NEEDS_CUDA if pattern.search(code)]
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
