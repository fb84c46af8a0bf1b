"""Issue 23 probe: the tile QR leaf with each warp owning whole columns, written in Gluon (Triton's explicit-layout
language), against the Triton leaf of kernels/fused_wy.py on the leaf shapes the benchmark runs. Same outputs?
Faster?

Why: the Triton leaf's column step exchanges data between warps for the pair (alpha, the norm) and for z = v^T P,
six barriers a step in its SASS (triton 3.6, sm_90a), because Triton spreads the tile's rows over the warps. With
the rows inside a warp (lanes and registers) and the columns over the warps, every reduction over rows stays in a
warp; only column j has to reach the other warps, through shared memory: one barrier a step. 40x176 and 40x352
are a chain of these steps; the leaves are 2.0 of 6.0 ms on 640x512 and 1.6 of 5.0 on 60x1024.

    python3 scripts/gluon_leaf_probe.py [--reps 20] [--json OUT]     on the GPU: check, then time both
    python3 scripts/gluon_leaf_probe.py --sass                         no GPU: what the step loop compiles to

Times are CUDA-graph replays of the leaf launch alone (GPU time, no launch cost), the median of --reps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from functools import partial
from pathlib import Path

# Compiled for the GPU even where a CPU test run left the interpreter on (it would hand back interpreted kernels).
os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tracker.capture.worker import load_variant  # noqa: E402

FAMILY = ROOT / "kernels" / "fused_wy.py"
# (batch, rows): the first leaf of each benchmark shape; the width and warps come from the family file's rules
SHAPES = [(640, 512), (640, 256), (60, 1024), (40, 176), (40, 352), (8, 64)]


def leaf_plan(fw, batch: int, rows: int) -> tuple[int, int, int]:
    """(width, padded rows, warps) of the family file's leaf for this batch and panel height."""
    width = fw._leaf_width(rows, batch)
    bm, bw = fw.triton.next_power_of_2(rows), fw.triton.next_power_of_2(width)
    return width, bm, fw._warps(bm * bw, fw._EPT_MANY if batch >= fw._MANY else fw._EPT)


def _buffers(a: torch.Tensor):
    b, m, w = a.shape
    z = dict(device=a.device, dtype=a.dtype)
    return (torch.empty_like(a), torch.zeros(b, w, **z), torch.zeros(b, m, w, **z), torch.zeros(b, w, w, **z),
            torch.zeros(b, w, m, **z))  # fmt: skip


def launch(fw, which: str, a: torch.Tensor, out, warps: int) -> None:
    """One leaf of a (b, m, w) into out = (H, tau, V, T, V^T) by the Triton kernel or the Gluon one."""
    b, m, w = a.shape
    h, tau, v, t, vt = out
    bm, bw = fw.triton.next_power_of_2(m), fw.triton.next_power_of_2(w)
    args = (a, h, tau, v, t, vt, m, w, min(m, w), a.stride(0), a.stride(1), h.stride(0), h.stride(1), tau.stride(0),
            v.stride(0), v.stride(1), t.stride(0), t.stride(1), vt.stride(0), vt.stride(1))  # fmt: skip
    if which == "triton":
        fw._tile_qr_kernel[(b,)](*args, BM=bm, BW=bw, WRITE_VT=True, WRITE_VTT=True, LEAN=fw._LEAN, num_warps=warps)
    else:
        fw._gtile_qr_kernel[(b,)](*args, BM=bm, BW=bw, WRITE_VT=True, WRITE_VTT=True, NW=warps, num_warps=warps)


def graph_time(fn, reps: int) -> float:
    """Median µs of one replay of a graph holding fn once, over reps replays."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1000.0)
    return statistics.median(times)


def probe(reps: int) -> list[dict]:
    load_variant(str(FAMILY))
    fw = sys.modules["submission"]
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows_out = []
    for batch, rows in SHAPES:
        width, bm, warps = leaf_plan(fw, batch, rows)
        a = torch.randn(batch, rows, width, device="cuda", generator=gen)
        ref, new = _buffers(a), _buffers(a)
        row = dict(batch=batch, rows=rows, width=width, warps=warps)
        try:
            launch(fw, "triton", a, ref, warps)
            launch(fw, "gluon", a, new, warps)
            torch.cuda.synchronize()
            names = ("H", "tau", "V", "T", "VT")
            row["max_rel_diff"] = {n: float((x - y).abs().max() / y.abs().max().clamp_min(1e-30))
                                   for n, x, y in zip(names, new, ref, strict=True)}  # fmt: skip
            row["same"] = all(d < 1e-4 for d in row["max_rel_diff"].values())
            row["triton_us"] = graph_time(partial(launch, fw, "triton", a, ref, warps), reps)
            row["gluon_us"] = graph_time(partial(launch, fw, "gluon", a, new, warps), reps)
            row["ratio"] = row["gluon_us"] / row["triton_us"]
        except Exception as exc:  # noqa: BLE001 - a shape the Gluon layouts do not cover is a result too
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        print(json.dumps(row), flush=True)
        rows_out.append(row)
    return rows_out


def sass(batch: int, rows: int) -> dict:
    """The Gluon leaf compiled for sm_90a on this machine (no GPU): scripts/sass_report.py's counts."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import sass_report

    load_variant(str(FAMILY))
    fw = sys.modules["submission"]
    width, bm, warps = leaf_plan(fw, batch, rows)
    const = dict(BM=bm, BW=fw.triton.next_power_of_2(width), WRITE_VT=True, WRITE_VTT=True, NW=warps)
    sig = sass_report.signature(fw._gtile_qr_kernel, {"src", "dst"}, const)
    counts = sass_report.report(fw._gtile_qr_kernel, sig, const, warps)
    return dict(batch=batch, rows=rows, width=width, warps=warps, **counts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--sass", action="store_true", help="no GPU: compile for sm_90a and count the step loop")
    args = ap.parse_args(argv)
    if args.sass:
        rows = [sass(b, m) for b, m in SHAPES[:3]]
        for r in rows:
            print(json.dumps(r))
    elif not torch.cuda.is_available():
        print("no GPU: run with --sass for the compiled counts", file=sys.stderr)
        return 2
    else:
        rows = probe(args.reps)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
