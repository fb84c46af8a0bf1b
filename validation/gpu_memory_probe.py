"""Where a qr_v2 case's GPU memory goes, one step at a time, in one process (run on the GPU machine).

Session 39's 640x512 benchmark of fused_wy_x2 ran out of GPU memory with the worker at ~65 GiB and the checker at
~73 GiB; the gates' own working set was estimated at ~10 GiB. This prints, per step, the peak memory torch
allocated and reserved, so the step that holds the rest is named:

    python3 validation/gpu_memory_probe.py KERNEL_FILE [CASE_INDEX ...]     (default: case 3, 640x512)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracker.capture.worker import load_variant  # noqa: E402  (the worker's import: `task` from the shim)
from tracker.workloads import cases_for, get_suite, get_workload  # noqa: E402

GIB = float(1 << 30)


def _step(name: str, fn):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    print(
        f"  {name:<34} peak allocated {torch.cuda.max_memory_allocated() / GIB:7.2f} GiB, "
        f"peak reserved {torch.cuda.max_memory_reserved() / GIB:7.2f}, "
        f"now allocated {torch.cuda.memory_allocated() / GIB:7.2f}",
        flush=True,
    )
    return out


def _probe_case(kernel, workload, case) -> None:
    inputs = _step("inputs", lambda: workload.benchmark_inputs(case, torch.device("cuda")))
    copies = _step("copies", lambda: [x.clone() for x in inputs])
    outputs = _step("kernel, first call", lambda: [kernel(x) for x in inputs])
    for rep in range(3):
        outputs = _step(f"kernel, call {rep + 2}", lambda: [kernel(x) for x in inputs])
    _step("tracker's gates (chunked)", lambda: workload.check_outputs(copies, outputs))
    _step("harness's recheck (one pass)", lambda: workload.harness_recheck(copies, outputs))
    _step("harness's recheck, again", lambda: workload.harness_recheck(copies, outputs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel")
    parser.add_argument("cases", nargs="*", type=int, default=[3])
    parser.add_argument("--json", help="unused: scripts/h200_fused.sh's PROBE passes it; the figures are printed")
    args = parser.parse_args()
    kernel = load_variant(args.kernel)
    workload = get_workload("qr_v2")
    cases = cases_for(get_suite(workload, "qr_v2"), "benchmark")
    for idx in args.cases:
        print(f"case {idx} {cases[idx].label}", flush=True)
        _probe_case(kernel, workload, cases[idx])
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
