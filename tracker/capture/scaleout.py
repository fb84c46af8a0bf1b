"""Scale-out: run a queue of variant runs on Dask, one run per GPU at a time, with one writer to the store.

Each task is one run captured on a Dask worker through the runner's usual worker process (capture_variant,
no store access) and returns its record; this process alone writes the store: a `running` row when a task
reports that it started, the complete run as its result arrives. A run id is chosen here, before
submission, so a retried task could never make a second row, and the local scheduler retries nothing
(allowed-failures 0): a worker that dies mid-run gets its run recorded as `crashed`.

This is the only module that imports dask; another engine would be another module with `run_queue`.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tracker import store as store_mod
from tracker.capture.cores import core_shares
from tracker.capture.runner import RunOutcome, RunRequest, capture_variant, new_record
from tracker.common.errors import InputError
from tracker.common.gitinfo import source_hash
from tracker.store import Store

CANCEL_POLL_S = 0.5  # how often a running task asks the scheduler whether the queue was cancelled
CANCEL_GRACE_S = 30.0  # how long running tasks get to stop their kernel and return a cancelled record
CLIENT_TIMEOUT_S = 30.0  # connecting to the scheduler, and reconnecting before it counts as lost


class SchedulerLost(RuntimeError):
    def __init__(self, message: str, outcomes: list[RunOutcome] | None = None) -> None:
        super().__init__(message)
        self.outcomes = outcomes or []


@dataclass(frozen=True)
class Endpoint:
    """A scheduler to reach: its address, and the TLS credentials it asks for (None: those of the Dask
    configuration, as for a cluster the user started)."""

    address: str
    security: Any = None


@dataclass(frozen=True)
class GpuChoice:
    """Which workers to start locally: GPU ids (CUDA_VISIBLE_DEVICES values), or a count of CPU workers."""

    gpus: tuple[str, ...] = ()
    cpu_workers: int = 0

    @property
    def size(self) -> int:
        return len(self.gpus) or self.cpu_workers


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES if set, else those nvidia-smi lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(ln for ln in out.splitlines() if ln.startswith("GPU "))]


def parse_gpus(text: str, available: list[str] | None = None) -> GpuChoice:
    """`all` (every visible GPU), `N` (the first N GPUs; N CPU workers on a machine without GPUs) or a list
    of GPU ids with a comma (`0,2`; `3,` is GPU 3 alone)."""
    available = visible_gpus() if available is None else available
    text = text.strip()
    if text == "all":
        if not available:
            raise InputError("--gpus all: no GPU is visible here (use --gpus N for N CPU workers)")
        return GpuChoice(gpus=tuple(available))
    if "," in text:
        ids = [g.strip() for g in text.split(",") if g.strip()]
        unknown = [g for g in ids if g not in available]
        if unknown or not ids or len(set(ids)) != len(ids):
            raise InputError(f"--gpus {text}: GPU(s) {unknown or ids} not among the visible ones {available}")
        return GpuChoice(gpus=tuple(ids))
    if not text.isdigit() or int(text) < 1:
        raise InputError(f"--gpus must be all, a count N >= 1 or a list like 0,2; got {text!r}")
    n = int(text)
    if not available:
        return GpuChoice(cpu_workers=n)
    if n > len(available):
        raise InputError(f"--gpus {n}: only {len(available)} GPU(s) visible")
    return GpuChoice(gpus=tuple(available[:n]))


# --- the Dask engine ---------------------------------------------------------------------------------------


def _dask_config() -> dict[str, Any]:
    return {
        "distributed.scheduler.allowed-failures": 0,  # a run whose worker died is recorded crashed, not retried
        "distributed.scheduler.worker-saturation": 1.0,  # one run per worker thread, the rest wait queued
        "distributed.worker.daemon": False,  # so a worker can start the runner's worker process
        "distributed.scheduler.work-stealing": False,
    }


def _set_subreaper(on: bool) -> None:
    """Linux: orphans of this process tree come back to this process instead of init, so a kernel whose Dask
    worker died can still be found and stopped here (the Nannies of a local cluster live in this process)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, int(on), 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap_orphaned_kernels() -> list[int]:
    """Kill the process group of every runner worker process orphaned to this process (its Dask worker
    died under it) so it cannot keep a GPU busy under the next run; return their pids."""
    import psutil

    killed = []
    for child in psutil.Process().children():
        try:
            cmdline = child.cmdline()
        except psutil.Error:
            continue
        if "tracker.capture.worker" in cmdline:
            try:
                os.killpg(child.pid, signal.SIGKILL)
                os.waitpid(child.pid, 0)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass
            killed.append(child.pid)
    return killed


@contextmanager
def local_cluster(choice: GpuChoice) -> Iterator[Endpoint]:
    """A scheduler and one single-threaded Nanny worker per GPU (CUDA_VISIBLE_DEVICES pinned) or per CPU
    worker, each with its share of the CPU cores; yields where to reach it. Its connections are mutual TLS with a
    key made here and held only in memory: on plain TCP any local process (another user's too) could submit
    code to the workers, read the side-file key there, forge records or cancel the queue."""
    import dask
    from distributed import Nanny, Scheduler, SpecCluster
    from distributed.security import Security

    security = Security.temporary()  # a fresh CA, certificate and key, required of every connection

    logging.getLogger("distributed").setLevel(logging.WARNING)
    shares = core_shares(list(choice.gpus), choice.size)
    workers = {}
    for i in range(choice.size):
        env = {
            "OMP_NUM_THREADS": str(len(shares[i])),
            "KERNELBEAM_CPUS": ",".join(map(str, shares[i])),
            "DASK_LOGGING__DISTRIBUTED": "warning",  # the worker's INFO lines would drown the progress bar
        }
        if choice.gpus:
            env["CUDA_VISIBLE_DEVICES"] = choice.gpus[i]
        name = f"gpu{choice.gpus[i]}" if choice.gpus else f"cpu{i}"
        workers[name] = {
            "cls": Nanny,
            "options": {
                "nthreads": 1,
                "resources": {"GPU": 1},
                "env": env,
                "host": "127.0.0.1",
                "security": security,
                "protocol": "tls",
            },
        }
    scheduler = {
        "cls": Scheduler,
        "options": {
            "host": "127.0.0.1",
            "dashboard": False,
            "dashboard_address": "127.0.0.1:0",
            "security": security,
            "protocol": "tls",
        },
    }
    with dask.config.set(_dask_config()):
        _set_subreaper(True)
        cluster = SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40, security=security)
        try:
            yield Endpoint(cluster.scheduler_address, security)
        finally:
            cluster.close(timeout=30)
            reap_orphaned_kernels()
            _set_subreaper(False)


def _task(req: RunRequest, record: store_mod.RunRecord, source: str, queue_id: str) -> store_mod.RunRecord:
    """Runs on a Dask worker: capture one run, report progress on the queue's message queue, return it."""
    from distributed import Event, Queue, get_worker

    worker = get_worker()
    messages = Queue(f"kernelbeam-{queue_id}-messages")
    cancel = Event(f"kernelbeam-{queue_id}-cancel")
    run_id = record.run.run_id
    cpus = os.environ.get("KERNELBEAM_CPUS")
    if cpus:  # the worker process the runner spawns inherits this thread's share of the cores
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    record.run.started_at = store_mod.now()
    variant = record.run.variant
    messages.put({"run_id": run_id, "variant": variant, "event": "task_started", "worker": worker.address})

    tmp = None
    path = Path(req.path)
    if not path.is_file() or source_hash(path.read_text()) != source_hash(source):
        tmp = Path(tempfile.mkdtemp(prefix="kernelbeam-src-"))  # this machine lacks the file: use the sent source
        path = tmp / Path(req.path).name
        path.write_text(source)
    last = [0.0, False]

    def should_cancel() -> bool:
        if not last[1] and time.monotonic() - last[0] > CANCEL_POLL_S:
            last[0] = time.monotonic()
            try:
                last[1] = cancel.is_set()
            except Exception:  # the scheduler is gone: nobody is left to record this run
                last[1] = True
        return last[1]

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] in ("case_start", "case_done", "env"):
            keep = ("event", "case_idx", "spec", "total", "passed", "gpu", "elapsed_s")
            messages.put({"run_id": run_id, "variant": variant, **{k: event[k] for k in keep if k in event}})

    try:
        capture_variant(req, record, on_event, should_cancel, variant_path=str(path))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return record


# --- the queue (submitting process: the one writer) --------------------------------------------------------


def _ended(record: store_mod.RunRecord, status: str, error: str) -> store_mod.RunRecord:
    record.run.update(status=status, error=error, finished_at=store_mod.now())
    return record


def run_queue(
    requests: list[RunRequest],
    gpus: str | None = None,
    cluster: str | Endpoint | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    on_result: Callable[[RunOutcome], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> list[RunOutcome]:
    """Run every request as one task on a local cluster (`gpus`) or the scheduler at `cluster`; write each
    result to its store as it arrives. Returns the outcomes in request order. Ctrl-C or should_cancel()
    stops queued and running tasks (recorded `cancelled`); raises SchedulerLost (after recording the
    unfinished runs as crashed) if the scheduler goes away."""
    requests = [replace(r, store=str(Path(r.store).resolve())) for r in requests]
    records = [new_record(r) for r in requests]  # validates every request before anything starts
    if cluster:
        endpoint = cluster if isinstance(cluster, Endpoint) else Endpoint(cluster)
        if problem := _tls_problem(endpoint):
            raise InputError(problem)
        return _run_on(endpoint, requests, records, on_event, on_result, should_cancel)
    choice = parse_gpus(gpus or "all")
    with local_cluster(choice) as endpoint:
        return _run_on(endpoint, requests, records, on_event, on_result, should_cancel)


def _tls_problem(endpoint: Endpoint) -> str | None:
    """Why this process cannot speak to a tls:// scheduler (Dask's own error is a TypeError about an SSLContext),
    or None."""
    if not endpoint.address.startswith("tls://") or endpoint.security is not None:
        return None
    from distributed.security import Security

    if Security().get_connection_args("client").get("ssl_context") is not None:
        return None
    return (
        f"the Dask scheduler at {endpoint.address} takes TLS connections only: give this client the cluster's"
        " certificates in Dask's configuration (distributed.comm.tls.ca-file, .client.cert and .client.key, or"
        " DASK_DISTRIBUTED__COMM__TLS__CA_FILE and the like)"
    )


def longest_first(requests: list[RunRequest], records: list[store_mod.RunRecord]) -> list[str]:
    """Run ids in the order to start them: variants never run before (their length is unknown, and they
    compile) first, then by the median length of their earlier runs in the store, longest first. Starting the
    long ones first keeps the last GPU from finishing alone (longest-processing-time scheduling)."""
    keys = [(rec.run.variant_sha256, rec.run.variant) for rec in records]
    known: dict[tuple[str, str], float] = {}
    for req in {(r.store, r.suite, r.mode): r for r in requests}.values():
        known.update(Store(req.store).past_durations(keys, req.suite, req.mode))
    order = sorted(range(len(records)), key=lambda i: -known.get(keys[i], float("inf")))
    return [records[i].run.run_id for i in order]


def _gpu_slots(client) -> int:
    """How many runs the cluster takes at once: one per GPU resource (a worker started with GPU=1)."""
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    return int(sum(min(w.get("nthreads", 1), (w.get("resources") or {}).get("GPU", 0)) for w in workers))


def _run_on(endpoint: Endpoint, requests, records, on_event, on_result, should_cancel) -> list[RunOutcome]:
    import dask
    from distributed import Client, Event, KilledWorker, Queue, as_completed, wait

    queue_id = uuid.uuid4().hex[:12]
    outcomes: dict[str, RunOutcome] = {}
    by_id = {rec.run.run_id: (req, rec) for req, rec in zip(requests, records, strict=True)}
    waiting = longest_first(requests, records)  # not yet submitted: held here, so a task only goes to a free GPU
    started: set[str] = set()
    futures: dict[str, Any] = {}  # run_id -> future, for submitted runs

    def record(run_id: str, rec: store_mod.RunRecord) -> None:
        if run_id in outcomes:  # never twice
            return
        outcome = RunOutcome(rec, Store(by_id[run_id][0].store).finish_run(rec))
        outcomes[run_id] = outcome
        if on_result is not None:
            on_result(outcome)

    address = endpoint.address
    tls = {"security": endpoint.security} if endpoint.security is not None else {}
    with dask.config.set(_dask_config()), Client(address, timeout=CLIENT_TIMEOUT_S, **tls) as client:
        client.wait_for_workers(1, timeout=60)
        slots = _gpu_slots(client)
        if slots < 1:
            raise InputError(f"no worker of the Dask scheduler at {address} offers a GPU resource (--resources GPU=1)")
        messages = Queue(f"kernelbeam-{queue_id}-messages", client=client)
        cancel = Event(f"kernelbeam-{queue_id}-cancel", client=client)
        pending = as_completed()
        if on_event is not None:
            on_event({"event": "queue_submitted", "runs": len(waiting), "address": address, "slots": slots})

        def submit_more() -> None:
            while waiting and sum(1 for r in futures if r not in outcomes) < slots:
                run_id = waiting.pop(0)
                req, rec = by_id[run_id]
                fut = client.submit(
                    _task, req, rec, rec.variant["source"], queue_id, key=f"kernelbeam-{run_id}", resources={"GPU": 1}
                )
                futures[run_id] = fut
                pending.add(fut)

        def drain() -> None:
            try:
                batch = messages.get(batch=True) if messages.qsize() else []
            except Exception:
                return
            for msg in batch:
                # anything reaching the scheduler can put a message here: one of another run, or no message at all,
                # had ended the queue with a KeyError and lost the run in progress
                run_id = msg.get("run_id") if isinstance(msg, dict) else None
                if run_id not in by_id:
                    continue
                if msg.get("event") == "task_started" and run_id not in started and run_id not in outcomes:
                    started.add(run_id)
                    req, rec = by_id[run_id]
                    try:
                        Store(req.store).start_run(rec)
                    except store_mod.StoreLockedError:
                        pass  # the complete run is still written (or saved to a side file) at the end
                if on_event is not None:
                    on_event(msg)

        def handle(fut) -> None:
            run_id = fut.key.removeprefix("kernelbeam-")
            rec = by_id[run_id][1]
            if fut.status == "finished":
                record(run_id, fut.result())
            elif fut.status == "cancelled":
                record(run_id, _ended(rec, "cancelled", "the run was cancelled"))
            else:
                exc = fut.exception()
                if isinstance(exc, KilledWorker):
                    reap_orphaned_kernels()  # its kernel, if its worker was ours (local cluster)
                    why = f"the Dask worker running it died (or its machine was lost): {exc}"
                else:
                    why = f"the Dask task failed: {type(exc).__name__}: {exc}"
                record(run_id, _ended(rec, "crashed", why))

        def stop() -> None:
            for run_id in waiting:
                record(run_id, _ended(by_id[run_id][1], "cancelled", "cancelled before it started"))
            waiting.clear()
            try:
                cancel.set()  # running tasks kill their worker process and return a cancelled record
            except Exception:
                pass
            running = [f for r, f in futures.items() if r not in outcomes]
            try:
                wait(running, timeout=CANCEL_GRACE_S)
            except Exception:
                pass  # those still running are cancelled below
            for fut in running:
                if fut.done():
                    handle(fut)
            for run_id, fut in futures.items():
                if run_id not in outcomes:
                    client.cancel([fut], force=True)
                    record(run_id, _ended(by_id[run_id][1], "cancelled", "the run was cancelled"))

        try:
            submit_more()
            while len(outcomes) < len(by_id):
                batch = pending.next_batch(block=False) if pending.has_ready() else []
                drain()
                for fut in batch:
                    if fut.status == "cancelled" and client.status != "running":
                        raise SchedulerLost(address)
                    handle(fut)
                submit_more()
                if should_cancel is not None and should_cancel():
                    stop()
                    break
                if client.status != "running" and not batch:
                    raise SchedulerLost(address)
                if not batch:
                    time.sleep(0.1)
            drain()
        except KeyboardInterrupt:
            stop()
        except (SchedulerLost, OSError) as exc:
            for rec in records:
                run_id = rec.run.run_id
                if run_id not in outcomes:
                    record(run_id, _ended(rec, "crashed", f"lost the Dask scheduler at {address}"))
            done = [outcomes[rec.run.run_id] for rec in records]
            raise SchedulerLost(f"lost the Dask scheduler at {address}", done) from exc
    return [outcomes[rec.run.run_id] for rec in records]
