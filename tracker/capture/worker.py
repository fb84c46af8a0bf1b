"""The worker process: imports one variant once, then generates, checks and times every case of the run.

Started by the runner as `python -m tracker.worker JOB.json`. It reports through an append-only JSON-lines
events file (one line per finished case), so whatever it finished survives if it later hangs or crashes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

SHIM_DIR = Path(__file__).resolve().parent / "shim"


class Events:
    def __init__(self, path: str):
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def emit(self, event: str, **data: Any) -> None:
        self._file.write(json.dumps({"event": event, **data}, default=str) + "\n")
        self._file.flush()


def load_variant(path: str, task_dir: Path = SHIM_DIR):
    """Import a contest file unmodified: `task` comes from the shim (or the problem folder), the module is named
    `submission`."""
    sys.path.insert(0, str(task_dir))
    sys.path.insert(1, str(Path(path).resolve().parent))
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


def run_test_case(kernel, case, device, workload) -> dict[str, Any]:
    from tracker.capture.timing import clone_data, inputs_changed

    a = workload.generate(case, device=device)
    copy = clone_data(a)
    try:
        out = kernel(a)
    except Exception as exc:
        return {"passed": False, "message": _kernel_error(exc)}
    mutation = inputs_changed([a], [copy]) if workload.flags_mutation else ""
    if mutation:
        return {"passed": False, "message": mutation}
    try:
        result = workload.check(copy, out)
    except Exception as exc:  # a problem's own checker can raise on a malformed output
        return {"passed": False, "message": f"the checker raised {type(exc).__name__}: {exc}"}
    return {"passed": result.passed, "message": result.message, **result.residuals}


def run_benchmark_case(kernel, case, device, clock, rules, workload) -> dict[str, Any]:
    from tracker.capture.timing import clone_data, inputs_changed, run_loop, stats

    inputs = workload.benchmark_inputs(case, device)
    copies = [clone_data(x) for x in inputs]
    try:
        scratch = [clone_data(x) for x in inputs]  # the untimed pass works on clones, as the contest does
        first = workload.check_outputs(copies, [kernel(x) for x in scratch])
        mutation = inputs_changed(scratch, copies) if workload.flags_mutation else ""
        if mutation:
            return {"passed": False, "message": mutation}
        if not first.passed:
            return {"passed": False, "message": first.message, **first.residuals}
        timed = run_loop(
            kernel, inputs, copies, clock, rules, check=workload.check_outputs, flag_mutation=workload.flags_mutation
        )
    except Exception as exc:
        return {"passed": False, "message": _kernel_error(exc)}
    residuals = (timed.check or first).residuals
    result: dict[str, Any] = {
        "passed": timed.passed,
        "message": timed.message,
        **residuals,
    }
    result["samples"] = timed.samples
    if timed.samples:
        st = stats(timed.samples)
        result.update(
            runs=st.runs,
            mean_us=st.mean,
            std_us=st.std,
            err_us=st.err,
            best_us=st.best,
            worst_us=st.worst,
        )
    return result


def warm_up(kernel, case, device, clock, rules, workload) -> None:
    """Untimed, unchecked runs of a case for the mode's warm-up budget (compilation, caches, clocks)."""
    from tracker.capture.timing import run_loop

    inputs = workload.benchmark_inputs(case, device)
    try:
        run_loop(kernel, inputs, inputs, clock, rules, recheck=False, budget_s=rules.warmup_s)
    except Exception:  # the case itself will report the error
        traceback.print_exc()


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    events = Events(job["events_path"])
    import torch

    want = job.get("device", "auto")
    if want == "cuda" and not torch.cuda.is_available():
        events.emit("error", message="--device cuda asked for, but no CUDA device is available")
        return 2
    device = torch.device("cuda" if want != "cpu" and torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton variants run in the interpreter on a CPU

    from tracker.capture.envinfo import capture_environment
    from tracker.capture.profiling import profile_call
    from tracker.capture.timing import MODE_RULES, Clock
    from tracker.workloads import cases_for, get_suite, get_workload

    events.emit("env", **capture_environment(device))
    try:
        workload = get_workload(job.get("problem"))
        kernel = load_variant(job["variant_path"], getattr(workload, "task_dir", SHIM_DIR))
    except BaseException as exc:
        traceback.print_exc()
        events.emit(
            "error",
            message=f"importing the variant failed: {type(exc).__name__}: {exc}",
        )
        return 3
    try:
        getattr(workload, "reference", None)  # a problem folder's reference.py, imported after the kernel's task
    except BaseException as exc:
        traceback.print_exc()
        events.emit("error", message=f"importing the problem's reference.py failed: {type(exc).__name__}: {exc}")
        return 3

    mode = job["mode"]
    suite = get_suite(workload, job["suite"])
    all_cases = cases_for(suite, mode)
    indices = job.get("cases") or list(range(len(all_cases)))
    cases = [all_cases[i] for i in indices]
    if job.get("seed") is not None:
        cases = [workload.hidden_seed(c, int(job["seed"])) for c in cases]
    rules = MODE_RULES.get(mode)
    clock = Clock(device) if rules is not None else None  # test mode times nothing: no flush buffer
    if rules is not None and cases:
        for i, case in enumerate(cases):
            if i == 0 or rules.warm_every_case:
                warm_up(kernel, case, device, clock, rules, workload)

    for pos, (idx, case) in enumerate(zip(indices, cases, strict=True)):
        events.emit("case_start", case_idx=idx, position=pos, total=len(cases), spec=case.spec)
        if mode == "test":
            result = run_test_case(kernel, case, device, workload)
        else:
            result = run_benchmark_case(kernel, case, device, clock, rules, workload)
        inputs = 1 if mode == "test" else case.input_count()
        flops, nbytes = workload.work(case)
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

    events.emit("timing_done")
    if job.get("profile"):
        trace_dir = Path(job["trace_dir"])
        for idx, case in zip(indices, cases, strict=True):
            try:
                prof = profile_call(kernel, workload.generate(case, device=device), trace_dir / f"case{idx}.json")
            except Exception as exc:
                prof = {
                    "error": f"profiling failed: {type(exc).__name__}: {exc}",
                    "kernels": [],
                }
            events.emit("profile", case_idx=idx, **prof)
    events.emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
