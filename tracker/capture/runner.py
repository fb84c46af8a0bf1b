"""The runner: records a run of one variant by driving a spawned worker process and writing the result.

The worker runs the untrusted kernel; the runner only watches it (signed events on a pipe, the compile budget,
the timeout, exit status), so a kernel that raises, hangs or kills its process is recorded with its error and
output tail, and the caller carries on. The store sees two short writes: the `running` row at the start and the
whole run at the end. One run at a time per device (tracker.capture.devicelock); every process the kernel
started is ended with the run.
"""

from __future__ import annotations

import ast
import hmac
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
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tracker import store as store_mod
from tracker.capture import devicelock
from tracker.capture.channel import sign
from tracker.capture.evidence import collect as collect_evidence
from tracker.capture.gitinfo import EMPTY as NO_GIT
from tracker.capture.gitinfo import capture_git, source_hash
from tracker.capture.naming import variant_name
from tracker.capture.record import (  # noqa: F401 - RunRequest and the defaults are this module's API too
    DEFAULT_COMPILE_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    INCONCLUSIVE,
    RunRequest,
    case_row,
    complete_record,
    exit_text,
)
from tracker.capture.scan import flags_as_dicts, scan_source
from tracker.common.processes import descendants, end_processes

LOG_TAIL_CHARS = 4000
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunOutcome:
    record: store_mod.RunRecord
    pending: store_mod.PendingRun | None = None  # where the run went if it could not be written
    flushed: store_mod.FlushResult = field(default_factory=store_mod.FlushResult)  # earlier side files
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


class _Channel:
    """The read end of the worker's event pipe: non-blocking reads, whole lines only, and only lines that carry
    a valid HMAC and the next sequence number are accepted; the others are counted as forged."""

    def __init__(self, fd: int, key: bytes) -> None:
        os.set_blocking(fd, False)
        self.fd, self.key = fd, key
        self.buf = b""
        self.seq = 0
        self.forged = 0
        self.selector = selectors.DefaultSelector()
        self.selector.register(fd, selectors.EVENT_READ)

    def wait(self, timeout: float) -> None:
        self.selector.select(timeout)

    def read(self) -> list[dict[str, Any]]:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")  # a line still being written is read next time
        out = []
        for raw in lines:
            mac, _, line = raw.partition(b" ")
            try:
                text = line.decode()
                event = json.loads(text)
                good = hmac.compare_digest(mac.decode(), sign(self.key, text)) and event.get("seq") == self.seq
            except (UnicodeDecodeError, ValueError, AttributeError):
                good = False
            if good:
                self.seq += 1
                out.append(event)
            elif raw.strip():
                self.forged += 1
        return out

    def close(self) -> None:
        self.selector.close()
        os.close(self.fd)


def _tail(path: Path) -> str:
    if not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - LOG_TAIL_CHARS))
        return f.read().decode(errors="replace")


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


class _Stopped(Exception):
    """The tracker itself got SIGTERM: the run is recorded as cancelled and its worker stopped."""


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
        "flags": json.dumps(flags),
        "problem": workload.name,
        "problem_sha256": workload.sha256,
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
    record = new_record(req)
    try:
        store_mod.start_run(req.store, record)
    except store_mod.StoreLockedError:
        pass  # the complete run is still written (or saved to a side file) at the end
    events = capture_variant(req, record, on_event, should_cancel)
    flushed = store_mod.FlushResult()
    pending = store_mod.finish_run(req.store, record, flushed=flushed)
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
) -> list[dict[str, Any]]:
    """Run the variant in a worker process and complete `record` in memory; never touches the store (the
    scale-out queue runs this on remote workers and writes from the submitting process). `variant_path` is
    where this machine has the source, if not at req.path."""
    run_id = record.run["run_id"]
    reason = cannot_run_here(record.variant["source"], req)
    if reason is not None:  # decided before any worker starts: `skipped` is not a failure of the variant
        # Recorded in the CPU context it was tried in, so `run --pending` does not offer it again here.
        record.run.update(status="skipped", error=reason, finished_at=store_mod.now(), gpu="CPU", device="cpu")
        return []
    start = time.monotonic()

    def emit(event: dict[str, Any]) -> None:
        if on_event is not None:
            on_event({**event, "elapsed_s": time.monotonic() - start})

    total = len(req.cases or req.suite_cases())
    emit({"event": "started", "run_id": run_id, "total": total})
    events: list[dict[str, Any]] = []
    returncode = None
    log_tail = ""
    key = devicelock.device_key(req.device, req.device == "cuda" or (req.device == "auto" and _gpu_available()))
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
        record.run["device_load_start"] = devicelock.device_load(key)
        status, error, returncode, log_tail, compile_s, forged = _drive_worker(
            req, record, events, emit, should_cancel, variant_path
        )
        record.run["device_load_end"] = devicelock.device_load(key)
    finally:
        lock.release()
    loads = (record.run["device_load_start"], record.run["device_load_end"])
    record.run["shared_device"] = any(load["shared"] for load in loads)
    record.run["device_load_start"], record.run["device_load_end"] = (json.dumps(x) for x in loads)
    record.run["compile_s"] = compile_s
    complete_record(record, req, events, status, error, returncode, log_tail)
    if record.run["status"] in ("failed", "crashed") and _NO_CUDA.search(f"{record.run['error']}\n{log_tail}"):
        record.run.update(status="skipped", error=f"cannot run here: {record.run['error']}")
    if forged:
        flags = json.loads(record.run["flags"]) + [
            {"code": "forged-events", "line": 0, "severity": "hack", "message": f"{forged} event line(s) on the "
             "worker's channel failed authentication and were ignored"}
        ]  # fmt: skip
        record.run["flags"] = json.dumps(flags)
    return events


def _gpu_available() -> bool:
    from tracker.capture.envinfo import gpu_available

    return gpu_available()


def _drive_worker(req, record, events, emit, should_cancel, variant_path=None):
    """Start the worker, feed it the job, follow its events under the compile budget and then the timeout, and
    end every process it started. Returns (status, error, returncode, log_tail, compile_s, forged lines)."""
    workdir = Path(tempfile.mkdtemp(prefix="kernelbeam-"))
    log_path = workdir / "worker.log"
    key = secrets.token_bytes(32)
    token = f"KERNELBEAM_RUN_TOKEN={secrets.token_hex(8)}"
    read_fd, write_fd = os.pipe()
    job = {
        "variant_path": str(Path(variant_path or req.path).resolve()),
        "suite": req.suite,
        "mode": req.mode,
        "cases": req.cases,
        "seed": req.seed,
        "profile": req.profile,
        "trace_dir": str(Path(f"{req.store}.traces").resolve() / record.run["run_id"]),
        "device": req.device,
        "evidence_dir": str(workdir),
        "channel_fd": write_fd,
        "key": key.hex(),
        "runner_pid": os.getpid(),
        "workdir": str(workdir),
        "request": {**asdict(req), "store": str(Path(req.store).resolve())},
        "record": {"run": record.run, "variant": record.variant},
        "problem": _problem_folder(req),
    }
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
    name, value = token.split("=", 1)
    env[name] = value  # every process the kernel starts inherits it: how setsid'd children are found and ended
    status = error = None
    compile_s = None
    channel = _Channel(read_fd, key)
    old_term = None
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tracker.capture.worker"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE,
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,  # its own process group and session: ended as a whole
            )
        os.close(write_fd)
        write_fd = None
        seen: set[tuple[int, int]] = set()
        try:
            if threading.current_thread() is threading.main_thread():
                old_term = signal.signal(signal.SIGTERM, _on_sigterm)
            try:
                proc.stdin.write(json.dumps(job, default=str).encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            start = time.monotonic()
            compile_deadline, timed_deadline = start + req.compile_timeout, None
            last_scan = 0.0
            while True:
                finished = proc.poll() is not None
                for event in channel.read():
                    event["elapsed_s"] = time.monotonic() - start
                    if event["event"] == "compiled" and timed_deadline is None:
                        compile_s = event["elapsed_s"]
                        timed_deadline = time.monotonic() + req.timeout
                    events.append(event)
                    emit(event)
                if finished:
                    break
                now = time.monotonic()
                if now - last_scan > 0.5:  # remember the kernel's children before they can detach
                    seen |= descendants(proc.pid)
                    last_scan = now
                if timed_deadline is None and now > compile_deadline:
                    error = f"compiling took longer than {req.compile_timeout:g} s (--compile-timeout)"
                    status = "failed"
                    break
                if timed_deadline is not None and now > timed_deadline:
                    status, error = "timeout", f"the run exceeded its timeout of {req.timeout:g} s"
                    break
                if should_cancel is not None and should_cancel():
                    raise Cancelled
                channel.wait(0.1)
        except (Cancelled, KeyboardInterrupt):
            status, error = "cancelled", "the run was cancelled"
        except _Stopped:
            status, error = "cancelled", "the tracker was stopped by SIGTERM"
        finally:
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
            try:
                os.killpg(proc.pid, signal.SIGTERM if status == "cancelled" else signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            _kill(proc)
            end_processes(proc.pid, seen, token)
        for event in channel.read():
            event["elapsed_s"] = time.monotonic() - start
            events.append(event)
        returncode = proc.returncode
        log_tail = _tail(log_path)
        record.evidence = collect_evidence(workdir, events)  # read before the folder goes
    finally:
        if write_fd is not None:
            os.close(write_fd)
        channel.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return status, error, returncode, log_tail, compile_s, channel.forged


def _on_sigterm(signum, frame) -> None:
    raise _Stopped


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


def _code_only(source: str) -> str:
    """The source without comments and bare string statements (docstrings), so prose that mentions
    load_inline or .cuda() is not taken for code that calls them."""
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
