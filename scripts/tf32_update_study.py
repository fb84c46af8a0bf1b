"""Would plain TF32 in the WY trailing updates pass qr_v2's gates? An emulation on the CPU (issue 23).

A blocked Householder QR in float32 (64-wide outer panels, as kernels/fused_wy.py for n <= 1024; LAPACK's geqrf
for each panel, so only the updates differ) whose trailing updates A2 -= V (T^T (V^T A2)) and T's Gram products
are computed with operands rounded as tensor cores take them: `tf32` keeps 10 mantissa bits (truncated, as a
Triton tf32 dot hands float32 registers to the MMA), `tf32rn` rounds them to the nearest (cuBLAS's TF32),
`tf32x2` rounds the first operand and splits the second (two products), `tf32x3` is Triton's three-product split,
`ieee` plain float32; `+T` also builds T's Gram matrix so. The tracker's own gates (check_qr) judge (H, tau) on
every case type of inputs.py.

    python scripts/tf32_update_study.py [--shapes 640x512,60x1024] [--matrices 48] [--modes ieee,tf32x3,tf32]
"""

import argparse
import sys
import time

import torch

sys.path.insert(0, ".")
from qr_gates_seeds import TYPES, gate_case  # noqa: E402 - this folder is first on the path of a script

from tracker.workloads.qr_v2.checks import check_qr  # noqa: E402
from tracker.workloads.qr_v2.inputs import generate  # noqa: E402

NB = 64


def tf32(x: torch.Tensor, nearest: bool = False) -> torch.Tensor:
    """x with its low 13 mantissa bits cleared: the 10-bit mantissa an MMA reads from a float32 register; or
    rounded to the nearest (ties away, as cvt.rna.tf32.f32 and cuBLAS's TF32 round)."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 4096 if nearest else bits) & -8192).view(torch.float32)


def product(a: torch.Tensor, b: torch.Tensor, mode: str) -> torch.Tensor:
    if mode == "ieee":
        return a @ b
    if mode == "tf32rn":
        return tf32(a, True) @ tf32(b, True)
    if mode == "tf32x2":  # the first operand rounded, the second split: two products
        ar, bh = tf32(a, True), tf32(b, True)
        return ar @ tf32(b - bh, True) + ar @ bh
    ah, bh = tf32(a), tf32(b)
    if mode == "tf32":
        return ah @ bh
    return ah @ tf32(b - bh) + tf32(a - ah) @ bh + ah @ bh  # tf32x3: small terms first


def blocked_qr(
    a: torch.Tensor, mode: str, t_mode: str, nb: int = NB, leaf: int = 0, inner: str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """H and tau of `a` (batch, m, n) by nb-wide panels; each panel by geqrf, or with `leaf` by leaf-wide blocks
    whose updates inside the panel take `inner`'s products (the kernel's intra-panel updates; default `mode`)."""
    h = a.clone()
    batch, m, n = a.shape
    tau = torch.zeros(batch, n, dtype=a.dtype)
    for j in range(0, n, nb):
        w = min(nb, n - j)
        panel = h[:, j:, j : j + w]
        ph, pt = blocked_qr(panel, inner or mode, t_mode, leaf) if leaf else torch.geqrf(panel)
        h[:, j:, j : j + w], tau[:, j : j + w] = ph, pt
        if j + w == n:
            break
        v = torch.tril(ph, -1) + torch.eye(m - j, w, dtype=a.dtype)
        g = product(v.transpose(1, 2), v, t_mode)  # T from the Gram matrix, as the T builder does
        t = torch.zeros(batch, w, w, dtype=a.dtype)
        for i in range(w):
            t[:, i, i] = pt[:, i]
            if i:
                t[:, :i, i] = -pt[:, i, None] * (t[:, :i, :i] @ g[:, :i, i, None]).squeeze(-1)
        a2 = h[:, j:, j + w :]
        wv = product(v.transpose(1, 2), a2, mode)
        h[:, j:, j + w :] = a2 - product(v, t.transpose(1, 2) @ wv, mode)
    return h, tau


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="640x512,60x1024")
    ap.add_argument("--matrices", type=int, default=48, help="the first N matrices of each batch (CPU time)")
    ap.add_argument("--modes", default="ieee,tf32x3,tf32,tf32+T")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--seeds", default="0", help="hidden seeds, as `run --seed S` transforms the cases' (0: none)")
    ap.add_argument("--leaf", type=int, default=0, help="leaf width inside each panel (0: geqrf for the panel)")
    ap.add_argument("--inner", default=None, help="the intra-panel updates' products (default: the mode's)")
    args = ap.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    t0, bad = time.time(), {}
    for shape in args.shapes.split(","):
        b, n = (int(x) for x in shape.split("x"))
        for typ, s in ((t, int(s)) for t in TYPES for s in args.seeds.split(",")):
            if typ not in args.types.split(","):
                continue
            a = generate(gate_case(b, n, typ, s), device="cpu")[: args.matrices].contiguous()
            cells = []
            for mode in args.modes.split(","):
                update, t_mode = (mode.removesuffix("+T"), "tf32") if mode.endswith("+T") else (mode, "tf32x3")
                if mode == "ieee":
                    t_mode = "ieee"
                r = check_qr(a, blocked_qr(a, update, t_mode, leaf=args.leaf, inner=args.inner))
                bad[mode] = bad.get(mode, 0) + (not r.passed)
                res = r.residuals
                cells.append(f"{mode} {'ok' if r.passed else 'FAIL'} f{res.get('factor_res', 0):.2f} "
                             f"o{res.get('orth_res', 0):.2f}")  # fmt: skip
            print(f"{shape} {typ:13s} seed {s} " + " | ".join(cells) + f" [{time.time() - t0:.0f}s]", flush=True)
    print("failed cases per mode:", bad)


if __name__ == "__main__":
    main()
