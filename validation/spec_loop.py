"""The contest's benchmark loop written straight from the method's words, to check the tracker's timings against.

    python validation/spec_loop.py kernels/graphed.py --cases 0,1,2 [--flush fresh|reuse] [--json OUT]

Deliberately independent of tracker/capture (its worker, timing loop and clock): only the input recipe and the
gates are shared, since they are not what is being compared. It runs in this one process, as the contest's
evaluator runs the kernel in the process that imported it. Per case:

- generate the `count` inputs and keep copies for checking; one untimed pass over clones, every output checked;
- each repetition: synchronize; flush L2 by writing a 256 MiB buffer (a new one each time, as the contest does,
  or the same one with --flush reuse); record a start event; call custom_kernel on each input in a plain loop
  (the same input objects every repetition); record the end event; synchronize; sample = elapsed / count;
  then recheck every output, outside the timed window;
- stop after repetition i when i > 1, more than 0.1 s has passed, and the relative standard error is below 0.001,
  or mean x runs > 10 s, or 120 s have passed; at most 200 repetitions. Case 0 is warmed up first (0.1 s).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tracker" / "capture" / "shim"))  # contest files do `from task import ...`

from tracker.workloads.qr_v2.checks import check_outputs  # noqa: E402
from tracker.workloads.qr_v2.inputs import benchmark_inputs  # noqa: E402
from tracker.workloads.qr_v2.suites import QR_V2  # noqa: E402

FLUSH_BYTES = 256 * 1024 * 1024


def load(path: str):
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    return module.custom_kernel


def flush(buffer: torch.Tensor | None) -> None:
    if buffer is not None:
        buffer.fill_(42)
        return
    dummy = torch.empty(FLUSH_BYTES // 8, dtype=torch.int64, device="cuda")
    dummy.fill_(42)
    del dummy


def time_case(kernel, inputs, copies, buffer, *, recheck: bool, budget_s: float) -> list[float]:
    samples: list[float] = []
    start_wall = time.perf_counter()
    for i in range(200):
        torch.cuda.synchronize()
        flush(buffer)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        outputs = []
        for x in inputs:
            outputs.append(kernel(x))
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / len(inputs))
        if recheck:
            result = check_outputs(copies, outputs)
            if not result.passed:
                raise RuntimeError(f"repetition {i}: {result.message}")
        del outputs
        if i > 1 and time.perf_counter() - start_wall > 0.1:
            mean = sum(samples) / len(samples)
            std = math.sqrt(sum((s - mean) ** 2 for s in samples) / (len(samples) - 1))
            err = std / math.sqrt(len(samples))
            if err / mean < 0.001 or mean * 1e-6 * len(samples) > budget_s or time.perf_counter() - start_wall > 120:
                break
    return samples


def tracker_loop(kernel, inputs, copies, *, warm: bool) -> list[float]:
    from tracker.capture.timing import MODE_RULES, Clock, run_loop

    rules = MODE_RULES["benchmark"]
    clock = Clock(torch.device("cuda"))
    if warm:
        run_loop(kernel, inputs, inputs, clock, rules, recheck=False, budget_s=rules.warmup_s)
    result = run_loop(kernel, inputs, copies, clock, rules)
    if not result.passed:
        raise RuntimeError(result.message)
    return result.samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel")
    parser.add_argument("--cases", default="0,1,2")
    parser.add_argument("--flush", choices=("fresh", "reuse"), default="fresh")
    parser.add_argument(
        "--loop",
        choices=("spec", "tracker"),
        default="spec",
        help="spec: the loop above; tracker: the tracker's own timing loop, called in this process (to tell a "
        "difference of loops from a difference of processes)",
    )
    parser.add_argument("--json", help="write {case: {mean_us, runs, samples}} here")
    args = parser.parse_args()
    kernel = load(args.kernel)
    buffer = torch.empty(FLUSH_BYTES // 8, dtype=torch.int64, device="cuda") if args.flush == "reuse" else None
    indices = [int(x) for x in args.cases.split(",")]
    results = {}
    for pos, idx in enumerate(indices):
        case = QR_V2.benchmarks[idx]
        inputs = benchmark_inputs(case, "cuda")
        copies = [x.clone() for x in inputs]
        first = check_outputs(copies, [kernel(x.clone()) for x in inputs])
        if not first.passed:
            print(f"case {idx}: {first.message}")
            return 1
        if args.loop == "tracker":
            samples = tracker_loop(kernel, inputs, copies, warm=pos == 0)
        else:
            if pos == 0:  # warm-up of the first case only, untimed and unchecked
                time_case(kernel, inputs, copies, buffer, recheck=False, budget_s=0.1)
            samples = time_case(kernel, inputs, copies, buffer, recheck=True, budget_s=10.0)
        mean = sum(samples) / len(samples)
        results[case.label] = {"case_idx": idx, "mean_us": mean, "runs": len(samples), "samples": samples}
        print(f"{idx:2d} {case.label:24s} mean {mean:10.2f} us  runs {len(samples)}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
