"""How long each repetition's recheck takes on each qr_v2 benchmark case, in both processes that run one.

Every repetition of a benchmark run is rechecked, as in the contest: the checker process judges it with the
workload's batched check (`check_outputs`, the run's `checking` time) while the timing process runs the
harness's own recheck (`harness_recheck`: each output on its own, the spec's float32 product), and the next
repetition waits for both. This times each on the case's benchmark inputs with correct outputs (torch.geqrf),
the checker for each compact-WY panel width given, and prints the median of --reps per case (ms).

    python scripts/checker_bench.py [--panels 32,64] [--reps 5] [--json FILE]
"""

import argparse
import json
import statistics
import sys
import time

import torch

sys.path.insert(0, ".")
from tracker.workloads import cases_for, get_suite, get_workload  # noqa: E402
from tracker.workloads.qr_v2 import checks  # noqa: E402


def _checker(workload, inputs, outputs) -> None:
    result = workload.check_outputs(inputs, outputs)
    assert result.passed, result.message


def _median_ms(check, *args, reps: int) -> float:
    """Median wall time of `reps` calls of check(*args) after a warm-up."""
    times = []
    for _ in range(reps + 1):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        check(*args)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times[1:]) * 1e3, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panels", default=str(checks.WY_PANEL), help="comma-separated WY panel widths")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the rows to FILE as JSON")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    workload = get_workload("qr_v2")
    rows = []
    for idx, case in enumerate(cases_for(get_suite(workload, "qr_v2"), "benchmark")):
        inputs = workload.benchmark_inputs(case, device)
        outputs = [tuple(torch.geqrf(a)) for a in inputs]
        row = {"case": idx, "label": case.label, "inputs": len(inputs)}
        for width in (int(w) for w in args.panels.split(",")):
            checks.WY_PANEL = width
            row[f"checker_w{width}"] = _median_ms(_checker, workload, inputs, outputs, reps=args.reps)
        row["harness"] = _median_ms(workload.harness_recheck, inputs, outputs, reps=args.reps)
        rows.append(row)
        print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
