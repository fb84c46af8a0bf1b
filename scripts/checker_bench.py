"""How long the tracker's checker takes per recheck on each qr_v2 benchmark case (the run's `checking` time).

Every repetition of a benchmark run is rechecked, as in the contest, so the checker's time per check times the
repetitions is most of a run's wall time. This times `check_outputs` on each case's benchmark inputs with correct
outputs (torch.geqrf), for the compact-WY panel widths given, and prints the median of --reps checks per case.

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
            times = []
            for _ in range(args.reps + 1):  # the first is a warm-up
                if device.type == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                result = workload.check_outputs(inputs, outputs)
                times.append(time.perf_counter() - start)  # the verdict's float() reads already synchronised
                assert result.passed, result.message
            row[f"ms_w{width}"] = round(statistics.median(times[1:]) * 1e3, 2)
        rows.append(row)
        print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
