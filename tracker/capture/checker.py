"""The checker process: judges every output of a run with its own inputs and its own import of the gates.

Started by the runner beside the worker, outside the worker's sandbox, and never imports the kernel. It makes
the run's inputs itself (the generators are deterministic in the case's seed), receives each call's or
repetition's outputs from the worker as plain bytes (tracker.capture.handoff), checks them, answers the worker
(so a failing loop stops, as the contest's does) and reports each verdict to the runner on a pipe the worker
never holds. The runner records the checker's verdicts, not the worker's: a kernel that patches torch, the
gates or the worker's own code in its process changes nothing here.

Job on stdin: {problem, suite, mode, cases, seed, device, worker_fd, verdict_fd, evidence_dir, runner_pid, cleanup}.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import shutil
import signal
import sys
import time
import traceback
from typing import Any

from tracker.capture import handoff
from tracker.capture.channel import Verdicts
from tracker.capture.evidence import FRESH_PASS, failed_check
from tracker.capture.evidence import save as save_evidence
from tracker.common.vocabulary import CHECKER_RAISED

PR_SET_PDEATHSIG = 1
OUTPUT_SLACK_BYTES = 64 << 20  # outputs may exceed their inputs by this much (plus 4x) before they are refused
# Cached GPU memory above this is handed back after each verdict. The checker shares the GPU with the kernel's
# process, whose allocator grows into whatever is free (fused_wy at 640x512: 49-65 GiB, mem.csv of session 40);
# the checker's cache grew beside it to 30 GiB on an H100 and 73 GiB on the H200 (where it ran out) from a working
# set of 3.4 GiB (9.4 with the harness's recheck it times once per case).
CACHE_KEPT_BYTES = 1 << 30


def _nbytes(x: Any) -> int:
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    if isinstance(x, dict):
        return sum(_nbytes(v) for v in x.values())
    return 0


def _recheck_seconds(workload: Any, inputs: list[Any], outputs: list[Any], device: Any) -> float | None:
    """Seconds the harness's recheck of these outputs takes, timed here, where the kernel cannot reach the clock:
    the worker's own copy of it fills the gap between repetitions (plausibility.wall_per_call allows for it)."""
    import torch

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *_: None)
    sync(device)
    start = time.monotonic()
    try:
        workload.harness_recheck(inputs, outputs)
    except Exception:  # the verdict above stands; this only sizes an allowance
        return None
    sync(device)
    return time.monotonic() - start


def _made(workload: Any, case: Any, device: Any) -> tuple[list[Any], float]:
    """A case's inputs and the seconds this process took to make them, where the kernel cannot reach the clock:
    the worker makes the same ones inside a fresh call's timed window (plausibility.made_flags compares)."""
    import torch

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *_: None)
    sync(device)
    start = time.monotonic()
    inputs = workload.benchmark_inputs(case, device)
    sync(device)
    return inputs, time.monotonic() - start


def _judge(workload: Any, inputs: list[Any], outputs: list[Any]) -> Any:
    """The workload's verdict on the outputs; where the GPU ran out of memory, once more after this process hands
    its allocator's cached blocks back (the checker shares the GPU with the kernel's process: on the H200 a check
    of 640x512 lacked 0.11 GiB while its own cache held 0.7-1.6 GiB, 2026-12-05). The check is deterministic, so a
    second try judges the same outputs the same way."""
    import gc

    import torch

    try:
        return workload.check_outputs(inputs, outputs)
    except torch.cuda.OutOfMemoryError:
        pass  # out of the handler first: its traceback holds the failed attempt's tensors
    gc.collect()
    torch.cuda.empty_cache()
    return workload.check_outputs(inputs, outputs)


def _release_cache(device: Any) -> None:
    """Hand the allocator's unused blocks back to the GPU when they exceed CACHE_KEPT_BYTES (a few ms, while the
    worker waits for the verdict, between its repetitions)."""
    import torch

    if (
        device.type == "cuda"
        and torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device) > CACHE_KEPT_BYTES
    ):
        torch.cuda.empty_cache()


def main() -> int:
    job = json.loads(sys.stdin.buffer.read())

    def orphaned(*_: Any) -> None:
        # The tracker died (kill -9): its run folders would stay behind. The sandbox died with it; clean up.
        time.sleep(0.3)
        for folder in job.get("cleanup", []):
            shutil.rmtree(folder, ignore_errors=True)
        os._exit(137)

    signal.signal(signal.SIGTERM, orphaned)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != job["runner_pid"]:
        orphaned()
    import socket

    import torch

    from tracker.capture.timing import harness_rechecks_here
    from tracker.workloads import cases_for, get_suite, get_workload

    sock = socket.socket(fileno=job["worker_fd"])
    verdicts = Verdicts(job["verdict_fd"])
    device = torch.device("cuda" if job["device"] == "cuda" else "cpu")
    if device.type == "cpu":  # beside the worker on the same cores: torch's thread pools would oversubscribe them
        torch.set_num_threads(1)
    workload = get_workload(job.get("problem"))
    all_cases = cases_for(get_suite(workload, job["suite"]), job["mode"])
    indices = job.get("cases") or list(range(len(all_cases)))
    cases = [all_cases[i] for i in indices]
    if job.get("seed") is not None:
        cases = [workload.hidden_seed(c, int(job["seed"])) for c in cases]
    verdicts.emit(event="ready")

    def case_inputs(pos: int) -> list[Any]:
        if job["mode"] == "test":
            return [workload.generate(cases[pos], device=device)]
        return workload.benchmark_inputs(cases[pos], device)

    # The worker runs the harness's recheck after each repetition here too; its time is timed once per case below
    shadowed = job["mode"] != "test" and harness_rechecks_here(device.type)
    receiver = handoff.Receiver(device)
    held_pos, inputs, limit = None, None, 0
    # per case, the seed and inputs of its next call on fresh inputs (the worker makes a few, one after another, each
    # drawn when asked for), and the seconds this process took to make them
    fresh: dict[int, tuple[int, list[Any], float]] = {}
    held_fresh = False  # whether `inputs` are a case's fresh ones
    evidence_kept: set[int] = set()
    while True:
        try:
            message, fd = handoff.recv(sock)
        except (OSError, ValueError) as exc:  # the kernel wrote into the socket: its failure, not the checker's
            verdicts.emit(event="protocol", message=f"a message that is not the worker's ({exc})")
            return 0
        if message is None:
            return 0
        received = time.monotonic()
        sent, made_s = 0, None
        if message.get("prepare") is True:  # the worker starts a timed case: make its inputs now, no reply
            pos = message.get("pos")
            if fd is not None:
                os.close(fd)
            if job["mode"] != "test" and type(pos) is int and 0 <= pos < len(cases) and (pos != held_pos or held_fresh):
                inputs = None
                held_pos, inputs, held_fresh = pos, case_inputs(pos), False
                limit = 4 * _nbytes(inputs) + OUTPUT_SLACK_BYTES
            continue
        if message.get("fresh") is True:  # the call on fresh inputs: their seed is drawn now, here, so no kernel
            pos = message.get("pos")  # can have computed their outputs beforehand (the suite's seeds are public)
            if fd is not None:
                os.close(fd)
            known = type(pos) is int and 0 <= pos < len(cases)  # the kernel can write here: any JSON may come
            if job["mode"] != "test" and known and pos not in fresh:
                seed = secrets.randbits(31)
                fresh[pos] = seed, *_made(workload, workload.hidden_seed(cases[pos], seed), device)
            handoff.send(sock, {"seed": fresh[pos][0] if known and pos in fresh else None})
            continue
        try:
            pos, rep = message.get("pos"), message.get("rep")
            if type(pos) is not int or not 0 <= pos < len(cases) or type(rep) is not int or rep < FRESH_PASS:
                raise handoff.BadOutput("the worker named a case or repetition that does not exist")
            if rep == FRESH_PASS:  # judged like any other call: unchecked, its outputs could be anything
                if pos not in fresh:
                    raise handoff.BadOutput("the worker sent a call on fresh inputs the checker never drew")
                inputs = None
                _, inputs, made_s = fresh.pop(pos)
                held_pos, held_fresh = pos, True
                limit = 4 * _nbytes(inputs) + OUTPUT_SLACK_BYTES
            elif pos != held_pos or held_fresh:  # a new case: its inputs, made here exactly as the worker made its own
                inputs = None
                held_pos, inputs, held_fresh = pos, case_inputs(pos), False
                limit = 4 * _nbytes(inputs) + OUTPUT_SLACK_BYTES
            if message.get("error"):  # the worker refused the outputs itself (not plain tensors, ...)
                raise handoff.BadOutput(str(message["error"])[:2000])
            outputs = receiver.unpack(message.get("outputs"), fd, limit)
            sent = _nbytes(outputs)  # what came, not what the header says: it sizes the hand-off's allowance
            if not isinstance(outputs, list) or len(outputs) != len(inputs):
                raise handoff.BadOutput(f"the worker sent {len(outputs)} outputs for {len(inputs)} inputs")
            result = _judge(workload, inputs, outputs)
        except handoff.BadOutput as exc:
            from tracker.workloads.base import CheckResult

            result, outputs = CheckResult(False, str(exc)), None
        except Exception as exc:  # a problem's own checker can raise on a malformed output
            from tracker.workloads.base import CheckResult

            traceback.print_exc()
            result, outputs = CheckResult(False, f"{CHECKER_RAISED} {type(exc).__name__}: {exc}"), None
        finally:
            if fd is not None:
                os.close(fd)
        row: dict[str, Any] = {"passed": result.passed, "message": result.message}
        if not result.passed and outputs is not None and held_pos not in evidence_kept:
            evidence_kept.add(held_pos)
            row["_evidence"] = failed_check(inputs, outputs, result, rep)
            save_evidence(job.get("evidence_dir"), indices[held_pos], row)
        recheck = (
            _recheck_seconds(workload, inputs, outputs, device) if shadowed and rep == 0 and result.passed else None
        )
        checked = time.monotonic()
        verdicts.emit(
            event="verdict",
            pos=held_pos,
            case_idx=indices[held_pos] if held_pos is not None else None,
            rep=rep,
            passed=result.passed,
            message=result.message,
            residuals=result.residuals,
            evidence=row.get("evidence"),
            received_s=received,
            check_s=checked - received,
            bytes=sent,
            inputs=len(inputs) if inputs is not None else None,  # the count the case's time is divided by
            harness_recheck_s=recheck,
            made_s=made_s,  # a call on fresh inputs: how long this process took to make them
        )  # before the worker hears it: the runner has the verdict by the time the worker reports the case
        del outputs
        _release_cache(device)  # before the answer: the worker's next timed window never sees a cudaFree here
        handoff.send(sock, {"passed": result.passed, "message": result.message})


if __name__ == "__main__":
    code = 1
    try:
        code = main()
    except BaseException:
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
