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
import re
import statistics
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

# Compiled for the GPU even where a CPU test run left the interpreter on (it would hand back interpreted kernels).
os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tracker.capture.worker import load_variant  # noqa: E402

FAMILY = ROOT / "kernels" / "fused_wy.py"
# (batch, rows): the first leaf of each benchmark shape; the width and warps come from the family file's rules
SHAPES = [(640, 512), (640, 256), (60, 1024), (40, 176), (40, 352), (8, 64)]


# The CTA-wide barrier: gl.thread_barrier in Triton 3.6 (the H200's), gl.barrier from 3.7.
_cta_barrier = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier


@gluon.jit
def _add2(a0, b0, a1, b1):
    return a0 + a1, b0 + b1


@gluon.jit
def _gtile_qr_kernel(
    src, dst, tau_ptr, v_ptr, t_ptr, vt_ptr, m, w, kmax,
    s_sb, s_sr, d_sb, d_sr, tau_sb, v_sb, v_sr, t_sb, t_sr, vt_sb, vt_sk,
    BM: gl.constexpr, BW: gl.constexpr, WRITE_VT: gl.constexpr, WRITE_VTT: gl.constexpr, NW: gl.constexpr,
):  # fmt: skip
    """fused_wy's _tile_qr_kernel (same arguments and outputs), the tile held as [BM, NW, CPW]: rows over the
    lanes and registers, warp k owning columns k*CPW .. k*CPW + CPW - 1. T comes after the loop, from the saved
    z vectors (dlarft's recurrence), in a layout where each thread holds whole rows."""
    CPW: gl.constexpr = BW // NW
    RPT: gl.constexpr = BM // 32
    L3: gl.constexpr = gl.BlockedLayout([RPT, 1, CPW], [32, 1, 1], [1, NW, 1], [0, 2, 1])
    LX: gl.constexpr = gl.SliceLayout(2, L3)  # [BM, NW]
    LR: gl.constexpr = gl.SliceLayout(1, LX)  # [BM]: the rows, whole in every warp
    LC: gl.constexpr = gl.SliceLayout(0, L3)  # [NW, CPW]: the columns, each warp its own
    TPC: gl.constexpr = BW // 4 if BW // 4 < 32 else 32
    LS: gl.constexpr = gl.BlockedLayout([1, 4], [32 // TPC, TPC], [NW, 1], [1, 0])  # coalesced along a row
    LT: gl.constexpr = gl.BlockedLayout([4, 1], [32, 1], [1, NW], [0, 1])  # coalesced along a column (V^T)
    LZ: gl.constexpr = gl.BlockedLayout([1, 1, CPW], [32, 1, 1], [1, NW, 1], [2, 1, 0])
    R: gl.constexpr = gl.BlockedLayout([1, BW], [32, 1], [NW, 1], [1, 0])
    L1: gl.constexpr = gl.BlockedLayout([1], [32], [NW], [0])
    pid = gl.program_id(0).to(gl.int64)

    r2 = gl.arange(0, BM, layout=gl.SliceLayout(1, LS))
    c2 = gl.arange(0, BW, layout=gl.SliceLayout(0, LS))
    m2 = (r2[:, None] < m) & (c2[None, :] < w)
    p2 = gl.load(src + pid * s_sb + r2[:, None] * s_sr + c2[None, :], mask=m2, other=0.0)
    p = gl.convert_layout(gl.reshape(p2, [BM, NW, CPW]), L3)

    rows = gl.arange(0, BM, layout=LR)
    wi = gl.arange(0, NW, layout=gl.SliceLayout(1, LC))
    ki = gl.arange(0, CPW, layout=gl.SliceLayout(0, LC))
    cols = wi[:, None] * CPW + ki[None, :]
    taus = gl.zeros([NW, CPW], gl.float32, LC)
    bufa = gl.allocate_shared_memory(gl.float32, [NW * BM], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    bufb = gl.allocate_shared_memory(gl.float32, [NW * BM], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    zr = gl.arange(0, BW, layout=gl.SliceLayout(1, gl.SliceLayout(2, LZ)))
    zmat = gl.zeros([BW, NW, CPW], gl.float32, LZ)  # row j: z of step j (V_prev^T v_j in its first j entries)
    for j in range(0, kmax):
        colj = cols == j
        part = gl.sum(gl.where(gl.expand_dims(colj, 0), p, 0.0), axis=2)  # nonzero in column j's warp only
        # The step's one exchange between warps: every warp stores its partial column, all read the owner's. Two
        # buffers, so that the next step's stores never meet this step's loads: one barrier a step. The owner's
        # slice is picked by a uniform branch (a shared-memory view takes a constant offset only).
        flat = gl.reshape(gl.permute(part, [1, 0]), [NW * BM])
        x = gl.zeros([BM], gl.float32, LR)
        if j % 2 == 0:
            bufa.store(flat)
            _cta_barrier()
            for k in gl.static_range(NW):
                if j // CPW == k:
                    x = bufa.slice(k * BM, BM).load(LR)
        else:
            bufb.store(flat)
            _cta_barrier()
            for k in gl.static_range(NW):
                if j // CPW == k:
                    x = bufb.slice(k * BM, BM).load(LR)
        below = rows > j
        xb = gl.where(below, x, 0.0)
        alpha, xn2 = gl.reduce((gl.where(rows == j, x, 0.0), xb * xb), 0, _add2)
        nrm = gl.sqrt(alpha * alpha + xn2)
        zero = xn2 == 0.0
        beta = gl.where(zero, alpha, gl.where(alpha >= 0.0, -nrm, nrm))
        tau = gl.where(zero, 0.0, (beta - alpha) / gl.where(zero, 1.0, beta))
        inv = 1.0 / gl.where(zero, 1.0, alpha - beta)
        v = gl.where(below, xb * inv, gl.where(rows == j, 1.0, 0.0))
        v3 = gl.expand_dims(gl.expand_dims(v, 1), 2)
        z = gl.sum(v3 * p, axis=0)  # over the rows: inside each warp
        p = p - v3 * gl.expand_dims(gl.where(cols > j, tau * z, 0.0), 0)
        newcol = gl.where(rows == j, beta, gl.where(below, v, x))
        p = gl.where(gl.expand_dims(colj, 0), gl.expand_dims(gl.expand_dims(newcol, 1), 2), p)
        taus = gl.where(colj, tau, taus)
        zc = gl.convert_layout(gl.where(cols < j, z, 0.0), gl.SliceLayout(0, LZ))
        zmat = gl.where(gl.expand_dims(gl.expand_dims(zr == j, 1), 2), gl.expand_dims(zc, 0), zmat)

    h = gl.convert_layout(gl.reshape(p, [BM, BW]), LS)
    gl.store(dst + pid * d_sb + r2[:, None] * d_sr + c2[None, :], h, mask=m2)
    c1 = gl.arange(0, BW, layout=L1)
    gl.store(tau_ptr + pid * tau_sb + c1, gl.convert_layout(gl.reshape(taus, [BW]), L1), mask=c1 < kmax)
    if WRITE_VT:
        vv = gl.where(r2[:, None] > c2[None, :], h, gl.where(r2[:, None] == c2[None, :], 1.0, 0.0))
        gl.store(v_ptr + pid * v_sb + r2[:, None] * v_sr + c2[None, :], vv, mask=m2)
        if WRITE_VTT:
            rt = gl.arange(0, BM, layout=gl.SliceLayout(1, LT))
            ct = gl.arange(0, BW, layout=gl.SliceLayout(0, LT))
            gl.store(vt_ptr + pid * vt_sb + ct[None, :] * vt_sk + rt[:, None], gl.convert_layout(vv, LT),
                     mask=(rt[:, None] < m) & (ct[None, :] < w))  # fmt: skip
        # row j of the z's from shared memory (a broadcast load; the loop is unrolled, so the offset is constant)
        zs = gl.allocate_shared_memory(gl.float32, [BW * BW], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        zs.store(gl.reshape(zmat, [BW * BW]))
        _cta_barrier()
        tr = gl.convert_layout(gl.reshape(taus, [BW]), gl.SliceLayout(0, R))
        ri = gl.arange(0, BW, layout=gl.SliceLayout(1, R))
        ci = gl.arange(0, BW, layout=gl.SliceLayout(0, R))
        tmat = gl.zeros([BW, BW], gl.float32, R)
        for j in gl.static_range(BW):  # past kmax tau is 0 and the column stays 0
            zl = gl.where(ci < j, zs.slice(j * BW, BW).load(gl.SliceLayout(0, R)), 0.0)
            tj = gl.sum(gl.where(ci == j, tr, 0.0), axis=0)
            tc = -tj * gl.sum(tmat * zl[None, :], axis=1)
            tc = gl.where(ri == j, tj, gl.where(ri < j, tc, 0.0))
            tmat = gl.where(ci[None, :] == j, tc[:, None], tmat)
        gl.store(
            t_ptr + pid * t_sb + ri[:, None] * t_sr + ci[None, :], tmat, mask=(ri[:, None] < w) & (ci[None, :] < w)
        )


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
        _gtile_qr_kernel[(b,)](*args, BM=bm, BW=bw, WRITE_VT=True, WRITE_VTT=True, NW=warps, num_warps=warps)


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
    """The Gluon leaf compiled for sm_90a on this machine (no GPU): registers and the step loop's counts."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import sass_report
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    load_variant(str(FAMILY))
    fw = sys.modules["submission"]
    width, bm, warps = leaf_plan(fw, batch, rows)
    const = dict(BM=bm, BW=fw.triton.next_power_of_2(width), WRITE_VT=True, WRITE_VTT=True, NW=warps)
    sig = sass_report.signature(_gtile_qr_kernel, {"src", "dst"}, const)
    attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t != "constexpr"}
    src = GluonASTSource(_gtile_qr_kernel, sig, constexprs=const, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        Path(ptx).write_text(compiled.asm["ptx"])
        log = subprocess.run([os.path.join(tools, "ptxas"), "-v", "--gpu-name", "sm_90a", ptx, "-o", cubin],
                             capture_output=True, text=True, check=True).stderr  # fmt: skip
        text = subprocess.run([os.path.join(tools, "cuobjdump"), "-sass", cubin], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
    return dict(batch=batch, rows=rows, width=width, warps=warps,
                registers=int(re.search(r"Used (\d+) registers", log).group(1)),
                spill_bytes=int(re.search(r"(\d+) bytes spill stores", log).group(1)),
                **sass_report.sass_counts(text))  # fmt: skip


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
