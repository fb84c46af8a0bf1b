"""The worker process: imports one variant once, then generates, runs and times every case of the run.

Started by the runner as `python -m tracker.capture.worker`, inside the sandbox (tracker.capture.sandbox)
unless the run says otherwise. The job arrives on stdin (never in a file, an argument or the environment), and
events go back through a pipe that the runner passed as an inherited fd. Before the kernel is imported the
worker moves that fd to a random private number and forgets where it came from, and every event carries an
HMAC (SHA-256) under a key that also came on stdin.

The worker does not judge outputs: each call's or repetition's outputs go to the checker process
(tracker.capture.checker) as plain bytes, and the runner records the checker's verdicts. A kernel can still
find the pipe and the key in this process and forge events; what it can forge is its own timing events, which
the runner cross-checks (tracker.capture.plausibility), never a verdict.

Once it has emitted `done` it ends with os._exit, so threads the kernel left behind cannot keep it alive. If
the tracker goes away the sandbox ends with it (bwrap --die-with-parent); without a sandbox, a death signal
and a thread watching getppid() end the worker and its process group.
"""

from __future__ import annotations

import ctypes
import fcntl
import glob
import importlib.util
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.capture import handoff
from tracker.capture.channel import Events
from tracker.capture.evidence import FIRST_PASS, FRESH_PASS

FRESH_CALLS = 2  # calls on fresh inputs after a case's loop (plausibility's identity-cache and hidden-work checks)

SHIM_DIR = Path(__file__).resolve().parent / "shim"
PR_SET_PDEATHSIG = 1


def load_variant(path: str, task_dir: Path = SHIM_DIR):
    """Import a contest file unmodified: `task` comes from the shim (or the problem folder), the module is named
    `submission`."""
    sys.path.insert(0, str(task_dir))
    sys.path.insert(1, str(Path(path).resolve().parent))
    if Path(path).name != "submission.py":
        # spawned children (multiprocessing's spawn) import the kernel's functions from `submission` by name, as the
        # contest's own submission.py: a copy under that name on the path they inherit, in the run's own folder
        alias = Path(tempfile.mkdtemp(prefix="submission-"))
        shutil.copyfile(path, alias / "submission.py")
        sys.path.insert(1, str(alias))  # before the kernel's folder, which may hold another submission.py
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    kernel = getattr(module, "custom_kernel", None)
    if not callable(kernel):
        raise AttributeError(f"{path} defines no callable custom_kernel(data)")
    return kernel


def _kernel_error(exc: BaseException) -> str:
    traceback.print_exc()
    return f"custom_kernel raised {type(exc).__name__}: {exc}"


class RemoteCheck:
    """The checker's verdict on one call's or repetition's outputs: they go over as bytes, the answer comes back."""

    def __init__(self, fd: int, device: Any) -> None:
        import socket

        # A random high fd, like the event channel, so the number says nothing.
        self._sock = socket.socket(fileno=fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, random.randrange(300, 900)))
        os.close(fd)
        self.device = device
        self._sender = handoff.Sender(device)

    def prepare(self, pos: int) -> None:
        """Let the checker make a case's inputs while this process makes its own (no reply): so the wait for the
        first verdict, and the idle GPU before the first timed repetition, are no longer than in the harness."""
        handoff.send(self._sock, {"pos": pos, "prepare": True})

    def submit(self, pos: int, rep: int, outputs: list) -> Callable[[], Any]:
        """Send the outputs to be judged; returns the wait for the verdict, so this process can do its own
        shadow check meanwhile (the harness's gap between repetitions is one check long, not two)."""
        from tracker.workloads.base import CheckResult

        message: dict[str, Any] = {"pos": pos, "rep": rep}
        fd = None
        try:
            message["outputs"], fd = self._sender.pack(outputs)
        except handoff.BadOutput as exc:
            message["error"] = str(exc)
        handoff.send(self._sock, message, fd)  # the Sender keeps its memfd for the next repetition

        def verdict() -> CheckResult:
            reply, _ = handoff.recv(self._sock)
            if reply is None:
                raise RuntimeError("the checker process went away")
            return CheckResult(bool(reply.get("passed")), str(reply.get("message", "")))

        return verdict

    def fresh_seed(self, pos: int) -> int:
        """The seed of the case's call on fresh inputs, drawn by the checker only now (it makes the same inputs)."""
        handoff.send(self._sock, {"pos": pos, "fresh": True})
        reply, _ = handoff.recv(self._sock)
        if reply is None or type(reply.get("seed")) is not int:
            raise RuntimeError("the checker drew no seed for the call on fresh inputs")
        return reply["seed"]

    def __call__(self, pos: int, rep: int, outputs: list) -> Any:
        return self.submit(pos, rep, outputs)()

    def for_case(self, pos: int) -> Callable[[list, list], Callable[[], Any]]:
        """run_loop's check(copies, outputs) for the timed repetitions of one case (repetition 0, 1, ...): it
        returns the wait for the verdict."""
        reps = iter(range(1 << 30))
        return lambda _copies, outputs: self.submit(pos, next(reps), outputs)


def run_test_case(kernel, case, pos, device, workload, remote: RemoteCheck) -> dict[str, Any]:
    from tracker.capture.timing import clone_data, inputs_changed

    a = workload.generate(case, device=device)
    copy = clone_data(a)
    try:
        out = kernel(a)
    except BaseException as exc:  # KeyboardInterrupt and SystemExit too: a failure of this kernel, not a crash
        return {"passed": False, "message": _kernel_error(exc)}
    mutation = inputs_changed([a], [copy]) if workload.flags_mutation else ""
    if mutation:
        return {"passed": False, "message": mutation}
    result = remote(pos, FIRST_PASS, [out])
    return {"passed": result.passed, "message": result.message}


REP_EVENT_INTERVAL_S = 0.25  # progress events within a case: at most ~4 a second


def rep_reporter(emit: Callable[..., None], case_idx: int, rules) -> Callable[[int, float], None]:
    """An on_rep hook for run_loop that emits `rep` events (done, expected, case elapsed, case ETA), throttled."""
    from tracker.capture.timing import MAX_LOOP_S, reps_expected

    start = time.monotonic()
    last = [0.0]
    total_us = [0.0]

    def on_rep(i: int, sample_us: float) -> None:
        total_us[0] += sample_us
        now = time.monotonic()
        if now - last[0] < REP_EVENT_INTERVAL_S:
            return
        last[0] = now
        done = i + 1
        elapsed = now - start
        expected = reps_expected(rules, total_us[0] / done)
        eta = min(max(expected - done, 0) * elapsed / done, max(MAX_LOOP_S - elapsed, 0.0))
        emit("rep", case_idx=case_idx, done=done, expected=expected, case_elapsed_s=elapsed, case_eta_s=eta)

    return on_rep


def run_benchmark_case(
    kernel, case, pos, device, clock, rules, workload, remote, on_rep=None, await_slow_checker=True
) -> dict[str, Any]:
    from tracker.capture.timing import clone_data, first_pass, harness_rechecks_here, run_loop

    remote.prepare(pos)
    inputs = workload.benchmark_inputs(case, device)
    copies = [clone_data(x) for x in inputs]
    try:
        outs, mutation = first_pass(kernel, inputs, copies, workload.flags_mutation)
        if mutation:
            return {"passed": False, "message": mutation}
        rechecked = [0.0]  # seconds in the harness's recheck, for the run's time split
        shadow = (lambda c, o: _shadow(workload, c, o, rechecked)) if harness_rechecks_here(device.type) else None
        verdict = remote.submit(pos, FIRST_PASS, outs)
        if shadow is not None:
            shadow(copies, outs)  # the harness checks the untimed pass in its own process too
        first = verdict()
        if not first.passed:
            return {"passed": False, "message": first.message}
        timed = run_loop(
            kernel,
            inputs,
            copies,
            clock,
            rules,
            check=remote.for_case(pos),
            flag_mutation=workload.flags_mutation,
            on_rep=on_rep,
            shadow_check=shadow,
            first_outputs=outs,
            await_slow_checker=await_slow_checker,
        )
    except BaseException as exc:  # KeyboardInterrupt and SystemExit too: a failure of this kernel, not a crash
        return {"passed": False, "message": _kernel_error(exc)}
    result: dict[str, Any] = {
        "passed": timed.passed, "message": timed.message, "samples": timed.samples, "inputs": len(inputs),
        "recheck_s": rechecked[0],
    }  # fmt: skip
    if timed.checker_last_from is not None:  # into the run's log: whether a fidelity round ran in this order
        print(
            f"case {case.spec}: the checker judged longer than this process's own check at repetition "
            f"{timed.checker_last_from}; from the next one on its verdict was awaited first",
            file=sys.stderr,
        )
    if timed.passed:
        try:  # one more call on fresh inputs (new objects, other values of the same shapes): a cache keyed by the
            # input object misses, and so does one keyed by the values, even one filled at import time (the seed is
            # the checker's, drawn now); the checker judges these outputs too, so a miss cannot return garbage fast.
            # They are made inside the timed window: work a kernel hides in their making is timed there too. Each
            # of FRESH_CALLS calls has its own seed; the faster is judged, so one stall of a busy machine in one of
            # them does not read as a cache.
            fresh_us, made_us = [], []
            for _ in range(FRESH_CALLS):
                fresh_case = workload.hidden_seed(case, remote.fresh_seed(pos))
                made_s, seconds, fresh, outputs = clock.time_made(
                    lambda c=fresh_case: workload.benchmark_inputs(c, device), lambda xs: [kernel(x) for x in xs]
                )
                fresh_us.append(seconds / len(fresh) * 1e6)
                made_us.append(made_s / len(fresh) * 1e6)
                checked = remote(pos, FRESH_PASS, outputs)
                del outputs
                if not checked.passed:
                    return {**result, "passed": False, "message": f"the call on fresh inputs: {checked.message}"}
        except BaseException as exc:
            return {"passed": False, "message": _kernel_error(exc)}
        result.update(fresh_us=min(fresh_us), made_us=made_us)
    return result


def _shadow(workload, copies: list, outputs: list, spent: list[float]) -> None:
    """The harness's recheck in this process, verdict unused (see timing.run_loop's shadow_check); its seconds
    are added to spent[0]."""
    start = time.monotonic()
    try:
        workload.harness_recheck(copies, outputs)
    except Exception:  # malformed outputs: the checker's verdict says so
        pass
    spent[0] += time.monotonic() - start


def warm_up(kernel, case, device, clock, rules, workload) -> None:
    """Untimed, unchecked runs of a case for the mode's warm-up budget (compilation, caches, clocks)."""
    from tracker.capture.timing import run_loop

    inputs = workload.benchmark_inputs(case, device)
    try:
        run_loop(kernel, inputs, inputs, clock, rules, recheck=False, budget_s=rules.warmup_s)
    except BaseException:  # the case itself will report the error
        traceback.print_exc()


def _once(action: Callable[[], None]) -> Callable[[], None]:
    """`action`, run on the first call only."""
    done = [False]

    def call() -> None:
        if not done[0]:
            done[0] = True
            action()

    return call


def _on_first_return(kernel: Callable, then: Callable[[], None]) -> Callable:
    """The kernel, calling `then` when a call of it first returns (used for the first case only: the timed
    repetitions call the kernel itself, without this wrapper)."""

    def call(data: Any) -> Any:
        out = kernel(data)
        then()
        return out

    return call


def _read_job() -> dict[str, Any]:
    """The job from stdin, which is then pointed at /dev/null so nothing of it stays readable."""
    data = sys.stdin.buffer.read()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return json.loads(data)


def _exit(code: int) -> None:
    """Flush and leave at once: threads the kernel started must not keep a finished worker alive."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    os._exit(code)


def _die_with_parent(parent: int) -> None:
    """Without a sandbox: PR_SET_PDEATHSIG (Linux) turns the tracker's death into SIGTERM here, and a thread
    polling getppid() covers the rest; either ends this process group. In a sandbox bwrap does this: the worker is
    the namespace's first process with bwrap's SIGKILL as its parent-death signal (a SIGTERM set here would replace
    it, and a kernel can ignore SIGTERM), and its death ends every process in the namespace."""

    def orphaned(*_: Any) -> None:
        if os.getppid() == parent:  # a SIGTERM while the tracker lives
            return
        try:
            os.killpg(os.getpgid(0), signal.SIGKILL)  # the kernel's children too, and this process
        finally:
            os._exit(137)

    signal.signal(signal.SIGTERM, orphaned)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                orphaned()
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True, name="kb-parent-watch").start()
    if os.getppid() != parent:  # the parent died before the death signal was set
        orphaned()


def _helper_modules(variant_path: str) -> list[str]:
    """Files of modules the kernel imported from beside itself (helpers): the runner scans and records them."""
    folder = Path(variant_path).resolve().parent
    found = []
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.endswith(".py"):
            path = Path(file).resolve()
            if path.parent == folder or folder in path.parents:
                found.append(str(path))
    return sorted(set(found) - {str(Path(variant_path).resolve())})


NO_CUDA = "no CUDA device is available"  # the runner adds a hint where the machine has a GPU


def _no_cuda_reason() -> str:
    """Why torch sees no CUDA device, in its own words, and which NVIDIA device nodes this process sees."""
    import torch

    try:
        torch.cuda.init()
        said = "torch counts no device"
    except Exception as exc:  # noqa: BLE001 - any failure of the driver's start is the answer
        said = " ".join(str(exc).split())[:300]
    nodes = sorted(os.path.basename(p) for p in glob.glob("/dev/nvidia*"))
    return f"{said} (device nodes: {', '.join(nodes) or 'none'})"


def main() -> int:
    job = _read_job()
    key = bytes.fromhex(job.pop("key"))
    events = Events(job.pop("channel_fd"), key)
    del key
    if job.get("runner_pid") is not None:  # else in the sandbox, whose SIGKILL on the tracker's death must stand
        _die_with_parent(job["runner_pid"])
    import torch

    want = job.get("device", "auto")
    if want == "cuda" and not torch.cuda.is_available():
        events.emit("error", message=f"--device cuda asked for, but {NO_CUDA}: {_no_cuda_reason()}")
        return 2
    device = torch.device("cuda" if want != "cpu" and torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton variants run in the interpreter on a CPU

    from tracker.capture.envinfo import capture_environment
    from tracker.capture.profiling import profile_call
    from tracker.capture.timing import Clock, rules_for
    from tracker.workloads import cases_for, get_suite, get_workload

    events.emit("env", **capture_environment(device))
    events.emit("import_start")
    try:
        workload = get_workload(job.get("problem"))
        kernel = load_variant(job["variant_path"], getattr(workload, "task_dir", SHIM_DIR))
    except BaseException as exc:
        traceback.print_exc()
        events.emit(
            "error",
            message=f"compile failed: importing the variant failed: {type(exc).__name__}: {exc}",
        )
        return 3
    try:
        getattr(workload, "reference", None)  # a problem folder's reference.py, imported after the kernel's task
    except BaseException as exc:
        traceback.print_exc()
        events.emit("error", message=f"importing the problem's reference.py failed: {type(exc).__name__}: {exc}")
        return 3
    remote = RemoteCheck(job["check_fd"], device)
    events.emit("import_done")

    mode = job["mode"]
    suite = get_suite(workload, job["suite"])
    all_cases = cases_for(suite, mode)
    indices = job.get("cases") or list(range(len(all_cases)))
    cases = [all_cases[i] for i in indices]
    if job.get("seed") is not None:
        cases = [workload.hidden_seed(c, int(job["seed"])) for c in cases]
    rules = rules_for(mode, suite.max_reps)
    clock = Clock(device) if rules is not None else None  # test mode times nothing
    # The compile budget ends when the first call returns (Triton JIT, load_inline builds); the run's timeout
    # covers everything after it, the rest of the warm-up included.
    compiled = _once(lambda: events.emit("compiled"))
    first = _on_first_return(kernel, compiled)
    if rules is not None and cases:
        for i, case in enumerate(cases):
            if i == 0 or rules.warm_every_case:
                warm_up(first if i == 0 else kernel, case, device, clock, rules, workload)
            compiled()  # a first call that raised ends the budget too
    elif not cases:
        compiled()

    for pos, (idx, case) in enumerate(zip(indices, cases, strict=True)):
        events.emit("case_start", case_idx=idx, position=pos, total=len(cases), spec=case.spec)
        if mode == "test":
            result = run_test_case(first if pos == 0 else kernel, case, pos, device, workload, remote)
        else:
            on_rep = rep_reporter(events.emit, idx, rules)
            result = run_benchmark_case(
                kernel, case, pos, device, clock, rules, workload, remote, on_rep,
                await_slow_checker=job.get("checker_order") != "overlap",
            )  # fmt: skip
        inputs = 1 if mode == "test" else result.pop("inputs", case.input_count())
        flops, nbytes = workload.work(case)
        compiled()
        events.emit(
            "case_done",
            case_idx=idx,
            case={**case.to_dict(), "inputs": inputs},
            columns=workload.case_columns(case),
            spec=case.spec,
            flops=flops,
            bytes=nbytes,
            **result,
        )

    events.emit("timing_done", helpers=_helper_modules(job["variant_path"]))
    if job.get("profile"):
        trace_dir = Path(job["trace_dir"])
        for idx, case in zip(indices, cases, strict=True):
            try:
                prof = profile_call(kernel, workload.generate(case, device=device), trace_dir / f"case{idx}.json")
            except BaseException as exc:
                prof = {
                    "error": f"profiling failed: {type(exc).__name__}: {exc}",
                    "kernels": [],
                }
            events.emit("profile", case_idx=idx, **prof)
    events.emit("done")
    return 0


if __name__ == "__main__":
    code = 1
    try:
        code = main()
    except BaseException:
        traceback.print_exc()
    _exit(code)
