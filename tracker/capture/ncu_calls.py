"""The program Nsight Compute profiles: one case of a variant, one call inside a profiler range.

Started by tracker.capture.ncu_pass as `ncu --profile-from-start off ... python -m tracker.capture.ncu_calls`,
in the worker's sandbox, after the timed run. The job (variant, problem, suite, mode, case, seed) comes on
stdin. It imports the kernel, makes the case's first input, calls the kernel once unprofiled (compilation and
caches stay out of the profile) and once between cudaProfilerStart and cudaProfilerStop, which is all ncu
measures. Nothing here is checked or timed: the run's timings and verdicts were taken before this started.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    job = json.loads(sys.stdin.read())
    import torch

    from tracker.capture.timing import clone_data
    from tracker.capture.worker import SHIM_DIR, load_variant
    from tracker.workloads import cases_for, get_suite, get_workload

    workload = get_workload(job.get("problem"))
    kernel = load_variant(job["variant_path"], getattr(workload, "task_dir", SHIM_DIR))
    case = cases_for(get_suite(workload, job["suite"]), job["mode"])[job["case_idx"]]
    if job.get("seed") is not None:
        case = workload.hidden_seed(case, int(job["seed"]))
    device = torch.device("cuda")
    data = workload.generate(case, device=device)
    kernel(clone_data(data))  # the unprofiled call works on a copy: a kernel may write into its input
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    try:
        kernel(data)
        torch.cuda.synchronize()
    finally:
        torch.cuda.profiler.stop()
    print(f"profiled case {job['case_idx']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
