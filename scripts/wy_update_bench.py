"""Microbenchmark of the WY trailing update A2 -= V T^T V^T A2 on the qr_v2 update shapes (issue 23).

Compares the parent's cuBLAS fp32 route (three bmm) with kernels/fused_wy.py's fused Triton kernel over a few
configurations and precisions: median time (triton.testing.do_bench), TFLOP/s (4 b m n k), effective GB/s over
the fewest bytes (A2 read and written once), and the error against a float64 update of the same inputs
(max |out - ref| / max |ref|). V is unit lower triangular with Householder-like tau, T from it.

    python scripts/wy_update_bench.py [--out FILE.json] [--quick]
"""

import argparse
import json
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, ".")
from tracker.capture.worker import load_variant  # noqa: E402

MAIN = [(640, 512, 448, 64), (60, 1024, 960, 64)]
OTHER = [(640, 320, 256, 64), (640, 128, 64, 64), (640, 512, 32, 32), (60, 512, 448, 64), (60, 1024, 32, 32)]
CONFIGS = [  # BM, BN, warps, stages, prec (call 1: stages 3 best, bigger tiles and 8 warps slower)
    (64, 64, 4, 3, "tf32x3"), (64, 64, 4, 4, "tf32x3"), (64, 32, 4, 3, "tf32x3"), (64, 32, 2, 3, "tf32x3"),
    (64, 64, 4, 3, "tf32"),
]  # fmt: skip
VTS = [(64, 64, 4, 3), (64, 64, 4, 2), (64, 32, 4, 3)]  # the pre-split kernel: BM, BN, warps, stages
VT = [  # the transposed-V kernel: BM, BN, warps, stages, prec, trans_w
    (64, 64, 4, 3, "tf32x3", False), (64, 64, 4, 3, "tf32x3", True), (64, 64, 4, 3, "tf32", False),
]  # fmt: skip


@triton.jit
def _wy_fused_vt_kernel(
    v_ptr, vt_ptr, t_ptr, a_ptr, M, N, K, v_sb, v_sm, vt_sb, vt_sk, t_sb, t_sk, a_sb, a_sm,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr, STAGES: tl.constexpr,
    TRANS_W: tl.constexpr,
):  # fmt: skip
    """fused_wy's kernel with phase 1 reading a transposed copy V^T (K, M) of V, so that one operand of
    V^T A is K-major in shared memory (what tf32 wgmma wants); TRANS_W computes W^T = A^T V instead."""
    pid_n = tl.program_id(0)
    pid_b = tl.program_id(1).to(tl.int64)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    nmask = offs_n < N
    kmask = offs_k < K
    abase = a_ptr + pid_b * a_sb
    if TRANS_W:
        wt = tl.zeros([BN, BK], dtype=tl.float32)
    else:
        w = tl.zeros([BK, BN], dtype=tl.float32)
    for m0 in tl.range(0, M, BM, num_stages=STAGES):
        offs_m = m0 + tl.arange(0, BM)
        mm = offs_m < M
        vt = tl.load(vt_ptr + pid_b * vt_sb + offs_k[:, None] * vt_sk + offs_m[None, :],
                     mask=kmask[:, None] & mm[None, :], other=0.0)  # fmt: skip
        a = tl.load(abase + offs_m[:, None] * a_sm + offs_n[None, :], mask=mm[:, None] & nmask[None, :], other=0.0)
        if TRANS_W:
            wt = tl.dot(tl.trans(a), tl.trans(vt), wt, input_precision=PREC)
        else:
            w = tl.dot(vt, a, w, input_precision=PREC)
    if TRANS_W:
        w = tl.trans(wt)
    tt = tl.load(t_ptr + pid_b * t_sb + offs_k[None, :] * t_sk + offs_k[:, None],
                 mask=kmask[:, None] & kmask[None, :], other=0.0)  # fmt: skip
    w2 = tl.dot(tt, w, input_precision=PREC)
    vbase = v_ptr + pid_b * v_sb
    for m0 in tl.range(0, M, BM, num_stages=STAGES):
        offs_m = m0 + tl.arange(0, BM)
        mm = offs_m < M
        v = tl.load(vbase + offs_m[:, None] * v_sm + offs_k[None, :], mask=mm[:, None] & kmask[None, :], other=0.0)
        ap = abase + offs_m[:, None] * a_sm + offs_n[None, :]
        am = mm[:, None] & nmask[None, :]
        a = tl.load(ap, mask=am, other=0.0)
        a = a - tl.dot(v, w2, input_precision=PREC)
        tl.store(ap, a, mask=am)


def fused_vt(a2, v, vt, t, bm, bn, warps, stages, prec, trans_w):
    b, m, n = a2.shape
    k = v.shape[2]
    bn = max(16, min(bn, triton.next_power_of_2(n)))
    bk = max(16, triton.next_power_of_2(k))
    _wy_fused_vt_kernel[(triton.cdiv(n, bn), b)](
        v, vt, t, a2, m, n, k, v.stride(0), v.stride(1), vt.stride(0), vt.stride(1), t.stride(0), t.stride(1),
        a2.stride(0), a2.stride(1), BM=bm, BN=bn, BK=bk, PREC=prec, STAGES=stages, TRANS_W=trans_w,
        num_warps=warps,
    )  # fmt: skip


def make(b, m, n, k, mod, gen):
    v = torch.randn((b, m, k), device="cuda", generator=gen) / m**0.5
    v = torch.tril(v, -1)
    v[:, :k].diagonal(dim1=-2, dim2=-1).fill_(1.0)
    tau = 2.0 / (v * v).sum(1)
    t = mod._t_factor(v, tau).contiguous()
    a = torch.randn((b, m, n), device="cuda", generator=gen)
    return v, t, a


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    load_variant("kernels/fused_wy.py")
    mod = sys.modules["submission"]
    torch.set_float32_matmul_precision("highest")
    gen = torch.Generator(device="cuda").manual_seed(1234)
    rows = []
    t0 = time.time()
    for shape in MAIN + OTHER:
        b, m, n, k = shape
        v, t, a = make(b, m, n, k, mod, gen)
        ref = a.double() - v.double() @ (t.double().transpose(1, 2) @ (v.double().transpose(1, 2) @ a.double()))
        scale = ref.abs().max().item()
        flop = 4.0 * b * m * n * k
        nbytes = 2.0 * b * m * n * 4
        configs = CONFIGS if shape in MAIN and not args.quick else [CONFIGS[0]]
        methods = [("torch", None)] + [("fused", c) for c in configs]
        if shape in MAIN:
            methods += [("vt", c) for c in VT]
            vt = v.transpose(1, 2).contiguous()
        methods += [("vts", c) for c in (VTS if shape in MAIN else VTS[:1])] + [("vts+sp", VTS[0])]
        vth, vtl = mod._split_t(v)
        for name, cfg in methods:
            if name.startswith("vts"):
                mod._FUSED_BM, mod._FUSED_BN, mod._FUSED_WARPS, mod._FUSED_STAGES = cfg

                def fn(a2, v, t, vth=vth, vtl=vtl, split=name == "vts+sp"):
                    if split:  # the real cost: V^T split once per update
                        mod._apply_qt_vts_(a2, v, *mod._split_t(v), t)
                    else:
                        mod._apply_qt_vts_(a2, v, vth, vtl, t)

            elif name == "vt":

                def fn(a2, v, t, cfg=cfg, vt=vt):
                    fused_vt(a2, v, vt, t, *cfg)
            elif cfg is None:
                fn = mod._apply_qt_torch_
            else:
                mod._FUSED_BM, mod._FUSED_BN, mod._FUSED_WARPS, mod._FUSED_STAGES, mod._FUSED_PREC = cfg
                fn = mod._apply_qt_fused_
            try:
                out = a.clone()
                fn(out, v, t)
                torch.cuda.synchronize()
                err = (out.double() - ref).abs().max().item() / scale
                work = a.clone()
                ms = triton.testing.do_bench(
                    lambda fn=fn, work=work, v=v, t=t: fn(work, v, t), warmup=10, rep=60, return_mode="median"
                )
            except Exception as e:  # a config that does not compile: record it and go on
                rows.append({"shape": shape, "method": name, "cfg": cfg, "error": repr(e)[:300]})
                print(shape, name, cfg, "FAILED", repr(e)[:200], flush=True)
                continue
            row = {"shape": shape, "method": name, "cfg": cfg, "ms": ms, "tflops": flop / ms / 1e9,
                   "gbs": nbytes / ms / 1e6, "relerr": err}  # fmt: skip
            rows.append(row)
            print(f"{str(shape):24s} {name:6s} {str(cfg):38s} {ms * 1e3:9.1f} us {row['tflops']:6.1f} TF/s "
                  f"{row['gbs']:6.0f} GB/s err {err:.2e}  [{time.time() - t0:.0f}s]", flush=True)  # fmt: skip
        del v, t, a, ref, vth, vtl
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
