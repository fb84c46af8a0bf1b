"""Development screen for qr_v2 kernel variants: the tracker's suite, inputs and gates, repetitions capped.

Nothing is recorded: a quick ranking of variants (and knob settings) before they get a tracker run. The inputs,
the gates and the hidden-seed transform are the tracker's own (tracker/workloads/qr_v2), the variant is imported
as the contest imports it (tracker.capture.worker.load_variant) and each repetition is timed by the tracker's
clock (its L2 flush and CUDA events); only the stop rule differs: at most --reps repetitions, fewer once --budget
seconds have passed after the second.

Usage:
  python3 scripts/qr_devbench.py --suite bench --reps 5 kernels/graphed.py kernels/X.py
  python3 scripts/qr_devbench.py --suite test kernels/X.py
  python3 scripts/qr_devbench.py --suite bench --cases 3,4 'kernels/X.py@_NBO=128,_LEAF_ELEMS=8192'
  --profile: one eager pass of module._qr (if present) under torch.profiler per case, top kernels printed.
  Without a GPU the gates still run (--no-time is implied).
"""

import argparse
import ast
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from tracker.capture.timing import Clock, clone_data  # noqa: E402
from tracker.capture.worker import load_variant  # noqa: E402
from tracker.workloads import for_suite  # noqa: E402

# torch.geqrf on the H200 per benchmark case (us, run 389e8131031e): a variant slower than this is flagged
GEQRF_US = [281, 15118, 40192, 997736, 228252, 71808, 45924, 996888, 227957, 984225, 997725, 228200]


def knob_values(mod, spec: str, where: str) -> list[tuple[str, object]]:
    """(constant, value) for each comma-separated NAME=VALUE of spec (VALUE a Python literal; a bare NAME: True),
    each a constant the module has: a misspelt knob would otherwise screen or probe the unchanged file. where: what
    an error names first."""
    out = []
    for item in filter(None, spec.split(",")):
        name, sep, text = (part.strip() for part in item.partition("="))
        if not hasattr(mod, name):
            raise SystemExit(f"{where}: the family file has no constant {name}")
        try:
            out.append((name, ast.literal_eval(text) if sep else True))
        except (ValueError, SyntaxError):
            raise SystemExit(f"{where}: {text!r} is not a Python literal (e.g. {name}=2)") from None
    return out


def load(spec: str):
    """custom_kernel and its module from 'PATH[@KNOB=VALUE,...]', the knobs set on the module after import."""
    path, _, knobs = spec.partition("@")
    fn = load_variant(path)
    mod = sys.modules["submission"]
    for name, value in knob_values(mod, knobs, path):
        setattr(mod, name, value)
    return fn, mod


def graph_us(step, reps: int, per_graph: int = 1) -> float:
    """GPU microseconds of one `step`: a CUDA graph of `per_graph` steps replayed `reps` times between two events
    (the step is run once first, outside the capture, so that it compiles)."""
    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per_graph):
            step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / (reps * per_graph)


def time_case(fn, inputs, clock, reps, budget_s):
    samples = []
    t0 = time.time()
    for i in range(reps):
        seconds, _ = clock.time_loop(lambda: [fn(x) for x in inputs])
        samples.append(seconds * 1e6 / len(inputs))
        if i >= 1 and time.time() - t0 > budget_s:
            break
    return samples


def profile_case(mod, x, top=12):
    from torch.profiler import ProfilerActivity, profile

    fn = getattr(mod, "_qr", None)
    if fn is None:
        return "no _qr"
    fn(x.clone())
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x.clone())
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=top, max_name_column_width=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--suite", default="bench", choices=["bench", "test"])
    ap.add_argument("--cases", default="")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timing per case (after rep 2)")
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--seed", type=int, default=None, help="hidden run seed")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    workload, qr_v2 = for_suite("qr_v2")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    timed = args.suite == "bench" and not args.no_time and dev.type == "cuda"
    clock = Clock(dev) if timed else None
    cases = qr_v2.benchmarks if args.suite == "bench" else qr_v2.tests
    idx = [int(c) for c in args.cases.split(",")] if args.cases else list(range(len(cases)))
    results = {}
    for spec in args.variants:
        fn, mod = load(spec)
        rows = []
        print(f"=== {spec}", flush=True)
        for ci in idx:
            case = cases[ci] if args.seed is None else workload.hidden_seed(cases[ci], args.seed)
            inputs = workload.benchmark_inputs(case, dev) if timed else [workload.generate(case, device=dev)]
            keep = [clone_data(x) for x in inputs]
            t0 = time.time()
            try:
                outs = [fn(clone_data(x)) for x in inputs]
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                first_s = time.time() - t0
                verdict = workload.check_outputs(keep, outs)
                ok, msg, res = verdict.passed, verdict.message, verdict.residuals
            except Exception as ex:  # noqa: BLE001
                ok, msg, res, first_s = False, f"EXC {type(ex).__name__}: {ex}"[:300], {}, 0.0
            mean = best = float("nan")
            nrep = 0
            if ok and timed:
                smp = time_case(fn, inputs, clock, args.reps, args.budget)
                if any(not torch.equal(x, k) for x, k in zip(inputs, keep, strict=True)):
                    ok, msg = False, "input mutated"
                mean, best, nrep = sum(smp) / len(smp), min(smp), len(smp)
            row = dict(
                case=ci, shape=f"{case.batch}x{case.n}", kind=case.case, ok=ok, msg=msg, mean_us=mean, best_us=best,
                reps=nrep, first_s=round(first_s, 2), **{k.removesuffix("_res"): round(v, 3) for k, v in res.items()},
            )  # fmt: skip
            rows.append(row)
            rs = " ".join(f"{k.removesuffix('_res')}={v:.3f}" for k, v in res.items())
            print(
                f"  [{ci:2d}] {case.batch}x{case.n} {case.case:9s} {'PASS' if ok else 'FAIL'} mean {mean:10.1f} "
                f"best {best:10.1f} us reps {nrep} first {first_s:.1f}s {rs} {msg}",
                flush=True,
            )
            if args.profile and ok and dev.type == "cuda":
                print(profile_case(mod, inputs[0]), flush=True)
            del inputs, keep
            outs = None
            if dev.type == "cuda":
                torch.cuda.empty_cache()
        results[spec] = rows
        if timed and len(rows) == 12 and all(r["ok"] for r in rows):
            gm = math.exp(sum(math.log(r["mean_us"]) for r in rows) / 12)
            print(f"  GEOMEAN {gm:.1f} us", flush=True)
        slower = [r["case"] for r in rows if timed and r["mean_us"] > GEQRF_US[r["case"]]]
        if slower:
            print(f"  slower than geqrf on cases {slower}")
    print("\n==== summary (mean us) ====")
    for spec, rows in results.items():
        allok = all(r["ok"] for r in rows)
        cells = " ".join(f"{r['case']}:{r['mean_us']:.0f}" for r in rows)
        gm = ""
        if len(rows) == 12 and allok and timed:
            gm = f" GM {math.exp(sum(math.log(r['mean_us']) for r in rows) / 12):.0f}"
        print(f"{'ALLPASS' if allok else 'FAIL'} {spec}: {cells}{gm}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
