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

sys.path.insert(0, ".")
from tracker.capture.worker import load_variant  # noqa: E402

MAIN = [(640, 512, 448, 64), (60, 1024, 960, 64)]
OTHER = [(640, 320, 256, 64), (640, 128, 64, 64), (640, 512, 32, 32), (60, 512, 448, 64), (60, 1024, 32, 32)]
CONFIGS = [  # BM, BN, warps, stages, prec (call 1: stages 3 best, bigger tiles and 8 warps slower)
    (64, 64, 4, 3, "tf32x3"), (64, 64, 4, 4, "tf32x3"), (64, 32, 4, 3, "tf32x3"), (64, 32, 2, 3, "tf32x3"),
    (64, 64, 4, 3, "tf32"),
]  # fmt: skip
VT = [
    (64, 64, 4, 3, "tf32x3"),
    (64, 64, 4, 2, "tf32x3"),
]  # _FUSED_VT: V^T copy in phase 1 (BM, BN, warps, stages, prec)
# Measured on the H200 (call 2, 640x512x448x64 / 60x1024x960x64, us): fused (64,64,4,3) 942 / 404; the same with V^T
# (W^T = A^T V) 756 / 338; with V^T and plain tf32 671 / 278 (error 2.7e-3); a manual 3xTF32 from a V^T split into
# hi/lo once per update (A split in registers, tf32 dots) 882 (762 with 2 stages) / 339, 953 / 353 with the split,
# and error 8e-6 (truncated split) against 7.6e-7: dropped.


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
        methods += [("vt", c) for c in (VT if shape in MAIN else VT[:1])] + [("vt+tr", VT[0])]
        vt = v.transpose(1, 2).contiguous()
        for name, cfg in methods:
            if name.startswith("vt"):
                mod._FUSED_BM, mod._FUSED_BN, mod._FUSED_WARPS, mod._FUSED_STAGES, mod._FUSED_PREC = cfg

                def fn(a2, v, t, vt=vt, tr=name == "vt+tr"):
                    mod._apply_qt_vt_(a2, v, v.transpose(1, 2).contiguous() if tr else vt, t, None, mod._FUSED_PREC)

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
        del v, t, a, ref, vt
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
