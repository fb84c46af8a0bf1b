"""Probe of a family file on the GPU with one knob off and on, at one shape: the gates on every input type of qr_v2
(hidden seeds too), how far the two settings' outputs are apart, and the time of an eager call (CUDA events around
each call, the GPU idle before it, as the contest times its cases).

Written for the routes of kernels/fused_wy.py that only a GPU runs: its Gluon kernels (`_SMALL_LANES`: 20x32),
which Triton's interpreter does not run, and its cooperative leaf (8x2048, 2x4096), whose programs spin on each
other. So this probe is their correctness test before any tracker run. With --leaves it times and compares single
leaf launches, laid out as a case lays out its first leaf, instead of whole calls.

    python3 scripts/small_qr_probe.py kernels/fused_wy.py --knob _SMALL_LANES --batch 20 --n 32 --json out.json
    python3 scripts/small_qr_probe.py kernels/fused_wy.py --knob _LEAN_COOP --batch 2 --n 4096 --calls 20
    python3 scripts/small_qr_probe.py kernels/fused_wy.py --knob _COOP_MIN_BM=128 --batch 8 --n 2048 --calls 30
    python3 scripts/small_qr_probe.py kernels/fused_wy.py --knob _LEAN --leaves 40x176x32,40x352x16x352
"""

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from tracker.workloads import for_suite  # noqa: E402
from tracker.workloads.qr_v2.inputs import PROFILES  # noqa: E402
from tracker.workloads.qr_v2.suites import Case  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qr_devbench import graph_us, knob_values, load  # noqa: E402

# a knob setting: (constant, its value off, its value on) for each constant it sets
Setting = list[tuple[str, object, object]]


def knob_setting(mod, spec: str) -> Setting:
    """--knob NAME (off False, on True) or NAME=VALUE (off: the file's own value, on: VALUE, a Python literal), or
    several, comma-separated (one setting, all off or all on)."""
    out = []
    for item in spec.split(","):
        ((name, on),) = knob_values(mod, item, "--knob")
        out.append((name, getattr(mod, name) if "=" in item else False, on))
    return out


def set_knob(mod, knob: Setting, on: bool) -> None:
    for name, off, value in knob:
        setattr(mod, name, value if on else off)
    for cache in ("_LAUNCHERS", "_GRAPHS"):  # a launcher or graph made for the other route must not serve this one
        getattr(mod, cache, {}).clear()


def time_calls(fn, x: torch.Tensor, calls: int) -> list[float]:
    """Microseconds of each eager call, events around the call, the device drained before each."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return out


def leaf_outputs(mod, panel: torch.Tensor, n: int = 0) -> dict[str, torch.Tensor]:
    """What the family file's leaf (`_leaf`) writes for one panel: H (in place), tau, V, T and V^T. With n, each
    output is a view of a buffer laid out as a factorization of b x m x n matrices lays out its first leaf (H rows n
    long, V and T as wide as the outer panel, V^T rows m long), so the kernel meets the strides it meets in a case."""
    b, m, w = panel.shape
    n = max(n, w)
    wo = mod._outer_width(n) if n > w else w
    out = {"H": panel.new_zeros((b, m, n))[:, :, :w], "tau": panel.new_zeros((b, w))}
    out["H"].copy_(panel)
    out["V"] = panel.new_zeros((b, m, wo))[:, :, :w]
    out["T"], out["VT"] = panel.new_zeros((b, wo, wo))[:, :w, :w], panel.new_zeros((b, wo, m))[:, :w, :]
    mod._leaf(out["H"], out["tau"], out["V"], out["T"], out["VT"])
    return out


def parse_leaf(spec: str) -> tuple[int, int, int, int]:
    """BxMxW or BxMxWxN (N: the matrices' width, at least W; 0 when not given) as numbers, or a one-line error."""
    parts = spec.strip().lower().split("x")
    if len(parts) not in (3, 4) or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise SystemExit(f"--leaves: {spec!r} is not BxMxW or BxMxWxN with positive integers (e.g. 40x352x16x352)")
    b, m, w, n = (int(p) for p in (*parts, "0")[:4])
    if w > m or (n and n < w):
        raise SystemExit(f"--leaves: {spec!r} needs W <= M and N >= W")
    return b, m, w, n


def probe_leaves(mod, knob: Setting, leaves: list[tuple[str, tuple[int, int, int, int]]]) -> list[dict]:
    """Per leaf shape BxMxW[xN]: each output of the leaf with the knob off and on (max difference relative to the
    output's largest entry: which output a wrong kernel gets wrong) and the device time of one launch. With N, the
    panel is the first leaf of b x m x N matrices, with the strides it has there (`leaf_outputs`)."""
    rows = []
    for spec, (b, m, w, n) in leaves:
        gen = torch.Generator(device="cuda").manual_seed(b * m + w)
        panel = torch.randn((b, m, w), device="cuda", generator=gen)
        got, us = {}, {}
        for on in (False, True):
            set_knob(mod, knob, on)
            got[on] = leaf_outputs(mod, panel, n)
            us[on] = graph_us(lambda p=panel, n=n: leaf_outputs(mod, p, n), 200)
        torch.cuda.synchronize()
        rel = {
            k: float((got[True][k] - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
            for k, ref in got[False].items()
        }
        row = {"leaf": spec, "rel": rel, "us_off": round(us[False], 2), "us_on": round(us[True], 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("variant")
    ap.add_argument(
        "--knob",
        default="_SMALL_LANES",
        help="NAME (off False, on True) or NAME=VALUE (off: the file's); several: A=1,B",
    )
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--seeds", default="53124,1234,98765")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--leaves", default="", help="leaf panels BxMxW[xN],...: compare the leaf's outputs and times only")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    leaves = [(spec, parse_leaf(spec)) for spec in args.leaves.split(",")] if args.leaves else []
    workload, _ = for_suite("qr_v2")
    fn, mod = load(args.variant)
    knob = knob_setting(mod, args.knob)
    if leaves:
        rows = probe_leaves(mod, knob, leaves)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"leaves": rows}, f, indent=1)
        return
    rows, failed = [], 0
    for kind in PROFILES:
        for seed in (int(s) for s in args.seeds.split(",")):
            case = Case(
                batch=args.batch, n=args.n, cond=0 if kind not in ("dense", "mixed") else 2, seed=seed, case=kind
            )
            a = workload.generate(case, device="cuda")
            row = {"kind": kind, "seed": seed}
            outs = {}
            for on in (False, True):
                set_knob(mod, knob, on)
                for _ in range(2):  # the second call goes through the cached launcher
                    h, tau = fn(a.clone())
                torch.cuda.synchronize()
                verdict = workload.check_outputs([a], [(h, tau)])
                row[f"pass_{int(on)}"] = verdict.passed
                row[f"res_{int(on)}"] = {k: round(float(v), 3) for k, v in verdict.residuals.items()}
                outs[on] = (h, tau)
                failed += not verdict.passed
            (h0, t0), (h1, t1) = outs[False], outs[True]
            row["h_rel"] = float((h1 - h0).abs().max() / h0.abs().max().clamp_min(1e-30))
            row["tau_abs"] = float((t1 - t0).abs().max())
            rows.append(row)
            print(json.dumps(row), flush=True)
    timing = {}
    a = workload.generate(Case(batch=args.batch, n=args.n, cond=1, seed=43214), device="cuda")
    for _round in range(3):  # alternating, so a drift of the machine falls on both
        for on in (False, True):
            set_knob(mod, knob, on)
            fn(a)
            t = time_calls(fn, a, args.calls)
            timing.setdefault(f"knob_{int(on)}", []).append(
                {"median_us": statistics.median(t), "best_us": min(t), "mean_us": statistics.fmean(t)}
            )
    for key, vals in timing.items():
        print(key, " ".join(f"med {v['median_us']:.1f} best {v['best_us']:.1f} mean {v['mean_us']:.1f}" for v in vals))
    print(f"gates failed: {failed}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "timing": timing, "failed": failed}, f, indent=1)


if __name__ == "__main__":
    main()
