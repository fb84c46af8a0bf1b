"""Which repetitions of a case's timed loop are slow, and what else happened in them (run on the GPU machine).

Session 40 saw 640x512 on the H100 with 4-14 of 200 repetitions at 7.5-40 ms against a 6.5 ms median, in every run,
with steady clocks. The suspects are the caching allocator (a cudaMalloc or cudaFree, or a retry after one failed,
inside a timed window) and the launching thread (the eager route launches ~60 kernels a call; a host stall longer
than the GPU's queue leaves the GPU idle inside the window), such as the cyclic garbage collector. This runs the
tracker's own loop (tracker.capture.timing.run_loop, the L2 flush and the events as in a run) in one process and
records per repetition: the device time per call, the host time per call spent in the kernel, the allocator's
counters after it, and the garbage collections (per generation) and their host time inside the kernel's calls.

    python3 validation/tail_probe.py KERNEL_FILE [--case 3] [--reps 200] [--no-recheck] [--expandable] [--gc-off]
        [--json OUT.json]

With the harness's recheck (the default, as the worker runs it) the process holds what the contest's does;
--no-recheck leaves it out, so a tail that goes with it is the recheck's memory; --expandable runs the allocator
with expandable segments (PYTORCH_CUDA_ALLOC_CONF), where a tail of cudaMalloc calls should go; --gc-off turns
the cyclic collector off for the loop (a diagnosis only: no harness does). The checker's
process is not part of this: every repetition is taken as passed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from time import perf_counter

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracker.capture.timing import MODE_RULES, Clock, clone_data, first_pass, run_loop  # noqa: E402
from tracker.capture.worker import load_variant  # noqa: E402  (the worker's import: `task` from the shim)
from tracker.workloads import cases_for, get_suite, get_workload  # noqa: E402
from tracker.workloads.base import CheckResult  # noqa: E402

ALLOCATOR_COUNTERS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")
SLOW = 1.15  # a repetition this many times the median is in the tail


def _allocator(device: torch.device) -> dict[str, int]:
    if device.type != "cuda":
        return {}
    stats = torch.cuda.memory_stats(device)
    counters = {k: int(stats.get(k, 0)) for k in ALLOCATOR_COUNTERS}
    counters["reserved_mib"] = int(stats.get("reserved_bytes.all.current", 0)) >> 20
    counters["allocated_mib"] = int(stats.get("allocated_bytes.all.current", 0)) >> 20
    return counters


def probe(kernel, workload, case, device: torch.device, reps: int, recheck: bool) -> dict:
    inputs = workload.benchmark_inputs(case, device)
    copies = [clone_data(x) for x in inputs]
    outs, _ = first_pass(kernel, inputs, copies, workload.flags_mutation)
    host = [0.0]
    inside = [False]  # in a timed kernel call
    collected = {"gc_gen0": 0, "gc_gen1": 0, "gc_gen2": 0, "gc_us": 0.0}
    gc_start = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if not inside[0]:
            return
        if phase == "start":
            gc_start[0] = perf_counter()
        else:
            collected[f"gc_gen{info['generation']}"] += 1
            collected["gc_us"] += (perf_counter() - gc_start[0]) * 1e6

    def timed_kernel(x):
        inside[0] = True
        t0 = perf_counter()
        out = kernel(x)
        host[0] += perf_counter() - t0
        inside[0] = False
        return out

    rows: list[dict] = []
    before = [_allocator(device)]

    def on_rep(i: int, sample_us: float) -> None:
        now = _allocator(device)
        delta = {k: now[k] - before[0].get(k, 0) for k in ALLOCATOR_COUNTERS if k in now}
        rows.append({"rep": i, "us": sample_us, "host_us": host[0] / len(inputs) * 1e6, **delta, **{
            k: now[k] for k in ("reserved_mib", "allocated_mib") if k in now}, **collected})  # fmt: skip
        before[0] = now
        host[0] = 0.0
        collected.update(gc_gen0=0, gc_gen1=0, gc_gen2=0, gc_us=0.0)

    def shadow(c, o):
        try:
            workload.harness_recheck(c, o)
        except Exception:
            pass

    # No stop rule: every one of `reps` repetitions, so two settings compare on the same count.
    rules = replace(MODE_RULES["benchmark"], max_reps=reps, case_budget_s=1e9)
    gc.callbacks.append(on_gc)
    try:
        run_loop(
            timed_kernel,
            inputs,
            copies,
            Clock(device),
            rules,
            check=lambda c, o: CheckResult(True),
            flag_mutation=workload.flags_mutation,
            on_rep=on_rep,
            shadow_check=shadow if recheck else None,
            first_outputs=outs,
        )
    finally:
        gc.callbacks.remove(on_gc)
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    return {"case": case.label, "recheck": recheck, "alloc_conf": conf, "gc": gc.isenabled(), "reps": rows,
            "summary": summarize(rows)}  # fmt: skip


def summarize(rows: list[dict]) -> dict:
    median = statistics.median(r["us"] for r in rows)
    tail = [r for r in rows if r["us"] > SLOW * median]
    rest = [r for r in rows if r["us"] <= SLOW * median]

    def share(group: list[dict], key: str) -> float | None:
        return round(sum(1 for r in group if r.get(key, 0) > 0) / len(group), 3) if group else None

    return {
        "median_us": round(median, 1),
        "mean_us": round(statistics.fmean(r["us"] for r in rows), 1),
        "tail": len(tail),
        "tail_reps": [r["rep"] for r in tail],
        "tail_us": [round(r["us"]) for r in tail],
        # the share of tail and of other repetitions with each allocator event: an event that goes with the tail
        # shows as a high share in the first and a low one in the second
        **{f"{k}_tail/rest": (share(tail, k), share(rest, k)) for k in ALLOCATOR_COUNTERS if k in rows[0]},
        "host_us_tail": [round(r["host_us"]) for r in tail],  # host time in the calls, per call as `us` is
        "host_us_median": round(statistics.median(r["host_us"] for r in rows), 1),
        # collections inside the calls: full (gen 2) ones and their host time, in the tail and elsewhere
        "gc_gen2_tail/rest": (share(tail, "gc_gen2"), share(rest, "gc_gen2")),
        "gc_any_tail/rest": (share(tail, "gc_us"), share(rest, "gc_us")),
        "gc_us_tail": [round(r["gc_us"]) for r in tail],
        "gc_us_max_rest": round(max((r["gc_us"] for r in rest), default=0.0)),
        "reserved_mib_last": rows[-1].get("reserved_mib"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel")
    parser.add_argument("--case", type=int, default=3, help="qr_v2 benchmark case index (default 3, 640x512)")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--no-recheck", action="store_true", help="leave out the harness's recheck")
    parser.add_argument("--expandable", action="store_true", help="the allocator with expandable segments")
    parser.add_argument("--gc-off", action="store_true", help="the cyclic garbage collector off for the loop")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", help="write every repetition and the summary here")
    args = parser.parse_args()
    if args.reps < 3:
        parser.error("--reps: at least 3")
    if args.expandable:  # read when the allocator starts, at the first CUDA allocation, which comes below
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    device = torch.device(args.device)
    kernel = load_variant(args.kernel)
    workload = get_workload("qr_v2")
    cases = cases_for(get_suite(workload, "qr_v2"), "benchmark")
    if not 0 <= args.case < len(cases):
        parser.error(f"--case: 0..{len(cases) - 1}")
    if args.gc_off:
        gc.disable()
    result = probe(kernel, workload, cases[args.case], device, args.reps, not args.no_recheck)
    print(json.dumps(result["summary"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
