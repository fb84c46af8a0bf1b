"""Standalone dev bench for qr_v2 kernel variants (no `tracker` import).

Implements, from /work/shared/qr_v2_spec.md: input generation (torch.Generator on the device seeded with the
case seed, randn (batch, n, n), case recipe), the gates (Q = householder_product in float32, residuals in
float64, factor gate 20*n*eps32*||A||_1 per matrix, orthogonality 100*n*eps32 on the worst), and the
benchmark timing method (256 MiB L2 flush, CUDA events around a plain loop over `count` inputs, sample =
elapsed/count, mean over repetitions). Repetitions are capped (--reps) to keep development runs short.

Usage:
  python3 scripts/qr_devbench.py --suite bench --reps 5 kernels/graphed.py kernels/X.py
  python3 scripts/qr_devbench.py --suite test kernels/X.py
  python3 scripts/qr_devbench.py --suite bench --cases 3,4 'kernels/X.py@_NBO=128,_LEAF_ELEMS=8192'
  --profile: one eager pass of module._qr (if present) under torch.profiler per case, top kernels printed.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
import os
import sys
import time
import types
from typing import TypeVar

import torch

EPS32 = float(torch.finfo(torch.float32).eps)

BENCH = [
    (20, 32, 1, 43214, "dense"), (40, 176, 1, 423011, "dense"), (40, 352, 1, 123456, "dense"),
    (640, 512, 2, 1029, "dense"), (60, 1024, 2, 75342, "dense"), (8, 2048, 1, 224466, "dense"),
    (2, 4096, 1, 32412, "dense"), (640, 512, 2, 770001, "mixed"), (60, 1024, 2, 770002, "mixed"),
    (640, 512, 0, 770003, "rankdef"), (640, 512, 0, 770004, "clustered"), (60, 1024, 0, 770005, "nearrank"),
]  # fmt: skip
TESTS = [
    (20, 32, 1, 53124, "dense"), (40, 176, 1, 3321, "dense"), (40, 352, 1, 1200, "dense"),
    (16, 512, 2, 32523, "dense"), (4, 1024, 2, 4327, "dense"), (1, 4096, 1, 75342, "dense"),
    (16, 512, 4, 32524, "dense"), (16, 512, 0, 32525, "rankdef"), (16, 512, 0, 32526, "clustered"),
    (16, 512, 0, 32527, "band"), (16, 512, 0, 32528, "rowscale"), (16, 512, 0, 32529, "nearcollinear"),
    (4, 1024, 4, 4328, "dense"), (4, 1024, 0, 4329, "rankdef"), (4, 1024, 0, 4330, "nearrank"),
    (4, 1024, 0, 4331, "clustered"), (2, 2048, 2, 224466, "dense"), (2, 2048, 0, 224467, "rankdef"),
    (1, 4096, 0, 75343, "upper"), (16, 512, 2, 32530, "mixed"), (4, 1024, 2, 4332, "mixed"),
    (2, 2048, 2, 224468, "mixed"),
]  # fmt: skip
GEQRF_US = [281, 15118, 40192, 997736, 228252, 71808, 45924, 996888, 227957, 984225, 997725, 228200]


# ---------------- inputs (spec: "Input generation") ----------------
def colscale(a, cond):
    if cond > 0:
        return a * torch.logspace(0.0, -cond, a.shape[-1], dtype=torch.float32, device=a.device)
    return a


def _rank(n):
    return max(1, 3 * n // 4)


def p_dense(a, cond, gen):
    return colscale(a, cond)


def p_upper(a, cond, gen):
    n = a.shape[-1]
    a = torch.triu(a)
    a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.25, n, dtype=torch.float32, device=a.device))
    return colscale(a, cond)


def p_rankdef(a, cond, gen):
    a = a.clone()
    a[:, :, _rank(a.shape[-1]) :] = 0.0
    return colscale(a, cond)


def p_nearrank(a, cond, gen):
    b, n = a.shape[0], a.shape[-1]
    r = _rank(n)
    t = n - r
    if t > 0:
        noise = torch.randn((b, n, t), dtype=torch.float32, device=a.device, generator=gen)
        a = a.clone()
        a[:, :, r:] = a[:, :, :t] + 1e-5 * noise
    return colscale(a, cond)


def p_clustered(a, cond, gen):
    n = a.shape[-1]
    s = torch.ones(n, dtype=torch.float32, device=a.device)
    s[n // 2 :] = 4 * EPS32
    if n >= 8:
        s[max(0, n // 2 - 2) : min(n, n // 2 + 2)] = torch.sqrt(torch.tensor(EPS32, dtype=torch.float32))
    return a * s


def p_band(a, cond, gen):
    n = a.shape[-1]
    bw = max(2, min(32, n // 32))
    idx = torch.arange(n, device=a.device)
    a = a.masked_fill((idx[:, None] - idx[None, :]).abs() > bw, 0.0)
    a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.5, n, dtype=torch.float32, device=a.device))
    return colscale(a, cond)


def p_nearcollinear(a, cond, gen):
    b, n = a.shape[0], a.shape[-1]
    base = torch.randn((b, n, 1), dtype=torch.float32, device=a.device, generator=gen)
    noise = torch.randn((b, n, n), dtype=torch.float32, device=a.device, generator=gen)
    return colscale(base.expand(b, n, n) + 1e-4 * noise, cond)


def p_rowscale(a, cond, gen):
    n = a.shape[-1]
    return a * torch.logspace(0.0, -max(cond, 4), n, dtype=torch.float32, device=a.device).view(1, n, 1)


MIXED = ("dense", "rankdef", "nearrank", "clustered", "band", "rowscale", "nearcollinear")


def p_mixed(a, cond, gen):
    b = a.shape[0]
    w = torch.tensor((6.0, 1, 1, 1, 1, 1, 1), dtype=torch.float32, device=a.device)
    prof = torch.multinomial(w, b, replacement=True, generator=gen)
    if b >= 2:
        dense = prof == 0
        if not bool(dense.any()):
            pos = torch.randint(0, b, (1,), device=a.device, generator=gen)
            prof[pos] = 0
        elif bool(dense.all()):
            pos = torch.randint(0, b, (1,), device=a.device, generator=gen)
            prof[pos] = torch.randint(1, 7, (1,), device=a.device, generator=gen)
    a = a.clone()
    for i, name in enumerate(MIXED):
        m = prof == i
        if bool(m.any()):
            a[m] = PROFILES[name](a[m], cond, gen)
    return a


PROFILES = {
    "dense": p_dense, "upper": p_upper, "rankdef": p_rankdef, "nearrank": p_nearrank, "clustered": p_clustered,
    "band": p_band, "nearcollinear": p_nearcollinear, "rowscale": p_rowscale, "mixed": p_mixed,
}  # fmt: skip


def generate(batch, n, cond, seed, case, dev):
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    a = torch.randn((batch, n, n), dtype=torch.float32, device=dev, generator=gen)
    return PROFILES[case](a, float(cond), gen).contiguous()


def input_count(batch, n):
    return max(1, min(50, (256 * 1024 * 1024) // (batch * n * n * 4)))


# ---------------- gates (spec: "Correctness gates") ----------------
def norm1(x):
    return x.abs().sum(dim=-2).amax(dim=-1)


def check(a, out):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        return False, "output is not a 2-tuple", {}
    h, tau = out
    b, n, _ = a.shape
    for name, t, shp in (("H", h, (b, n, n)), ("tau", tau, (b, n))):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shp or t.dtype != torch.float32:
            return False, f"{name} bad type/shape/dtype", {}
        if t.device != a.device:
            return False, f"{name} on wrong device", {}
        if not bool(torch.isfinite(t).all()):
            return False, f"{name} not finite", {}
    q = torch.linalg.householder_product(h, tau)
    r = torch.triu(h)
    if not bool(torch.isfinite(q).all()):
        return False, "Q not finite", {}
    a64, q64, r64 = a.double(), q.double(), r.double()
    p = q64.transpose(-1, -2) @ a64
    if not bool(torch.isfinite(p).all()):
        return False, "Q^T A not finite", {}
    an = norm1(a64).clamp_min(torch.finfo(torch.float64).tiny)
    fs = EPS32 * n * an
    factor = norm1(r64 - p)
    eye = torch.eye(n, dtype=torch.float64, device=a.device)
    orth = norm1(q64.transpose(-1, -2) @ q64 - eye)
    res = {
        "factor": float((factor / fs).max()),
        "tril": float((norm1(torch.tril(p, -1)) / fs).max()),
        "recon": float((norm1(q64 @ r64 - a64) / fs).max()),
        "orth": float(orth.max() / (n * EPS32)),
    }
    ratio = factor / (20.0 * fs)
    w = int(ratio.argmax())
    if float(ratio[w]) > 1.0:
        return False, f"factor gate failed on matrix {w}: scaled {float(factor[w] / fs[w]):.2f} > 20", res
    w = int(orth.argmax())
    if float(orth[w]) > 100.0 * n * EPS32:
        return False, f"orth gate failed on matrix {w}: scaled {float(orth[w]) / (n * EPS32):.2f} > 100", res
    return True, "", res


# ---------------- loading ----------------
def install_task_shim():
    if "task" in sys.modules:
        return
    m = types.ModuleType("task")
    m.input_t = TypeVar("input_t", bound=torch.Tensor)
    m.output_t = TypeVar("output_t", bound=tuple)
    m.TestSpec = dict
    sys.modules["task"] = m


_NLOAD = [0]


def load(spec):
    path, _, ov = spec.partition("@")
    _NLOAD[0] += 1
    name = f"variant_{_NLOAD[0]}"
    s = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(s)
    sys.modules[name] = mod
    s.loader.exec_module(mod)
    if ov:
        for item in ov.split(","):
            k, _, v = item.partition("=")
            setattr(mod, k.strip(), ast.literal_eval(v.strip()))
    return mod


# ---------------- timing (spec: "Timing method"), reps capped ----------------
def time_case(fn, inputs, reps, budget_s):
    dev = inputs[0].device
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=dev)
    samples = []
    t0 = time.time()
    for i in range(reps):
        torch.cuda.synchronize(dev)
        flush.fill_(float(i))
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        for x in inputs:
            fn(x)
        e.record()
        torch.cuda.synchronize(dev)
        samples.append(s.elapsed_time(e) * 1000.0 / len(inputs))
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
    install_task_shim()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    suite = BENCH if args.suite == "bench" else TESTS
    idx = [int(c) for c in args.cases.split(",")] if args.cases else list(range(len(suite)))
    results = {}
    for spec in args.variants:
        mod = load(spec)
        fn = mod.custom_kernel
        rows = []
        print(f"=== {spec}", flush=True)
        for ci in idx:
            batch, n, cond, seed, case = suite[ci]
            if args.seed is not None:
                seed = seed + (seed + args.seed) * (seed + args.seed + 1) // 2
            cnt = input_count(batch, n) if (args.suite == "bench" and not args.no_time) else 1
            inputs = [generate(batch, n, cond, seed + 42 * (i + 1), case, dev) for i in range(cnt)]
            if args.suite == "test":
                inputs = [generate(batch, n, cond, seed, case, dev)]
            keep = [x.clone() for x in inputs]
            t0 = time.time()
            try:
                outs = [fn(x.clone()) for x in inputs]
                torch.cuda.synchronize()
                first_s = time.time() - t0
                ok, msg, res = True, "", {}
                worst = {}
                for a, o in zip(keep, outs):
                    ok1, msg1, r1 = check(a, o)
                    for k, v in r1.items():
                        worst[k] = max(worst.get(k, 0.0), v)
                    if not ok1:
                        ok, msg = False, msg1
                        break
                res = worst
            except Exception as ex:  # noqa: BLE001
                ok, msg, res, first_s = False, f"EXC {type(ex).__name__}: {ex}"[:300], {}, 0.0
            mean = best = float("nan")
            nrep = 0
            if ok and not args.no_time and dev.type == "cuda":
                smp = time_case(fn, inputs, args.reps, args.budget)
                mutated = any(not torch.equal(x, k) for x, k in zip(inputs, keep))
                if mutated:
                    ok, msg = False, "input mutated"
                mean, best, nrep = sum(smp) / len(smp), min(smp), len(smp)
            row = dict(case=ci, shape=f"{batch}x{n}", kind=case, ok=ok, msg=msg, mean_us=mean, best_us=best,
                       reps=nrep, first_s=round(first_s, 2), **{k: round(v, 3) for k, v in res.items()})
            rows.append(row)
            rs = " ".join(f"{k}={v:.3f}" for k, v in res.items())
            print(f"  [{ci:2d}] {batch}x{n} {case:9s} {'PASS' if ok else 'FAIL'} mean {mean:10.1f} best {best:10.1f} "
                  f"us reps {nrep} first {first_s:.1f}s {rs} {msg}", flush=True)
            if args.profile and ok and dev.type == "cuda":
                print(profile_case(mod, inputs[0]), flush=True)
            del inputs, keep, outs
            torch.cuda.empty_cache()
        results[spec] = rows
        if args.suite == "bench" and not args.no_time and len(rows) == 12 and all(r["ok"] for r in rows):
            gm = math.exp(sum(math.log(r["mean_us"]) for r in rows) / 12)
            print(f"  GEOMEAN {gm:.1f} us", flush=True)
        slower = [r["case"] for r in rows if args.suite == "bench" and r["mean_us"] > GEQRF_US[r["case"]]]
        if slower:
            print(f"  slower than geqrf on cases {slower}")
    print("\n==== summary (mean us) ====")
    for spec, rows in results.items():
        allok = all(r["ok"] for r in rows)
        cells = " ".join(f"{r['case']}:{r['mean_us']:.0f}" for r in rows)
        gm = ""
        if len(rows) == 12 and allok and args.suite == "bench" and not args.no_time:
            gm = f" GM {math.exp(sum(math.log(r['mean_us']) for r in rows) / 12):.0f}"
        print(f"{'ALLPASS' if allok else 'FAIL'} {spec}: {cells}{gm}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
