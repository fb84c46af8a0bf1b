"""Issue 23's untried route, its numerics first: a leaf panel by CholeskyQR2 with Householder reconstruction.

The cooperative leaf of kernels/fused_wy.py (2x4096, 8x2048) pays two cross-program reductions per column, 64 per
32-column leaf, and is half of 2x4096's time. CholeskyQR2 needs two Gram products per leaf (one reduction each)
and reconstructs the Householder form from Q by an unpivoted LU of E - Q S with the signs S chosen as it goes
(pivots 1 + |q_jj| >= 1), so the leaf's reductions drop from 64 to about 3. Its risk is numerical: in float32 it
holds for panels with condition number up to about 1e3, and the gates' rank-deficient, near-rank and clustered
inputs have worse. So every panel checks itself (both Cholesky factorizations succeed and the second Gram is
near the identity) and falls back to Householder (LAPACK geqrf here, the existing leaf in a kernel) per matrix.

This script runs a blocked QR (32-column leaves, WY trailing updates) with that leaf in float32 in PyTorch, on
every case type and shape of the qr_v2 suite (or the ones named), checks each output with the tracker's gates
(check_qr) and reports the fallback rate: a route whose leaves mostly fall back on the benchmark inputs is dead
before any kernel is written. Not a kernel, not timed.

    python scripts/cholqr_leaf_study.py [--suite benchmarks|tests|both] [--cases 5,6] [--seed S] [--device cpu|cuda]
                                        [--leaf torch|triton] [--json F]
    python scripts/cholqr_leaf_study.py --time-leaf kernels/fused_wy.py [--json F]     (GPU: the leaf's time)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, ".")
from tracker.workloads.qr_v2.checks import _wy_t, check_qr  # noqa: E402
from tracker.workloads.qr_v2.inputs import generate  # noqa: E402
from tracker.workloads.qr_v2.suites import QR_V2, hidden_seed  # noqa: E402

LEAF = 32
GRAM_TOLERANCE = 0.1  # max |Q1^T Q1 - I| after the first pass at which the second pass still reaches float32


def cholqr2(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q (b, m, k) with orthonormal columns, R (b, k, k) upper, and per matrix whether both passes held."""
    eye = torch.eye(p.shape[-1], dtype=p.dtype, device=p.device)
    r1, info1 = torch.linalg.cholesky_ex(p.mT @ p, upper=True)
    q1 = torch.linalg.solve_triangular(r1, p, upper=True, left=False)
    g2 = q1.mT @ q1
    r2, info2 = torch.linalg.cholesky_ex(g2, upper=True)
    q = torch.linalg.solve_triangular(r2, q1, upper=True, left=False)
    near = (g2 - eye).abs().amax(dim=(-2, -1)) < GRAM_TOLERANCE
    ok = (info1 == 0) & (info2 == 0) & near & torch.isfinite(q).all(dim=(-2, -1))
    return q, r2 @ r1, ok


def reconstruct(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Householder form of Q's columns: Y (b, m, k) unit lower trapezoidal, T (b, k, k) upper and signs s (b, k)
    with the first k columns of I - Y T Y^T equal to Q diag(s). E - Q diag(s) = Y U by an unpivoted LU (E the
    first k columns of I), s_j = -sign of the eliminated q_jj, so every pivot is 1 + |q_jj|; then T = U Y1^-T."""
    b, m, k = q.shape
    qt = q.clone()
    y = torch.zeros_like(q)
    u = torch.zeros(b, k, k, dtype=q.dtype, device=q.device)
    s = torch.empty(b, k, dtype=q.dtype, device=q.device)
    for j in range(k):
        qjj = qt[:, j, j]
        s[:, j] = torch.where(qjj >= 0, -1.0, 1.0)
        pivot = 1 + qjj.abs()
        u[:, j, j] = pivot
        y[:, j, j] = 1
        y[:, j + 1 :, j] = -s[:, j, None] * qt[:, j + 1 :, j] / pivot[:, None]
        # the E part of later columns is untouched by this step (its row j is zero there), so only Q's is updated
        qt[:, j + 1 :, j + 1 :] -= y[:, j + 1 :, j, None] * qt[:, j, None, j + 1 :]
        u[:, j, j + 1 :] = qt[:, j, j + 1 :]
    u = torch.triu(u, 1) * -s[:, None, :] + torch.diag_embed(torch.diagonal(u, dim1=-2, dim2=-1))
    t = torch.linalg.solve_triangular(y[:, :k, :].mT, u, upper=True, left=False, unitriangular=True)
    return y, t, s


try:  # the leaf as Triton kernels (`--leaf triton`; on a CPU with TRITON_INTERPRET=1)
    import triton
    import triton.language as tl
except ImportError:  # the torch leaf needs none of it
    triton = None

if triton is not None:

    @triton.jit
    def _gram_part(x_ptr, sb, sr, m, part_ptr, BM: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr):
        """One block of rows of one matrix's panel: its share X^T X of the Gram, as a partial (no atomics, so the
        sum is the same in every run)."""
        b, blk = tl.program_id(0), tl.program_id(1)
        rows = blk * BM + tl.arange(0, BM)
        cols = tl.arange(0, K)
        x = tl.load(x_ptr + b * sb + rows[:, None] * sr + cols[None, :], mask=(rows < m)[:, None], other=0.0)
        g = tl.dot(tl.trans(x), x, input_precision=PREC)
        base = part_ptr + (b * tl.num_programs(1) + blk) * K * K
        tl.store(base + cols[:, None] * K + cols[None, :], g)

    @triton.jit
    def _sum_parts(part_ptr, nblk, K: tl.constexpr):
        b = tl.program_id(0)
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        g = tl.zeros((K, K), dtype=tl.float32)
        for blk in range(nblk):
            g += tl.load(part_ptr + (b * nblk + blk) * K * K + ri[:, None] * K + ci[None, :])
        return g

    @triton.jit
    def _cholesky(g, K: tl.constexpr):
        """Upper R with R^T R = g, R^T too, and whether every pivot was positive and finite."""
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        r = tl.zeros((K, K), dtype=tl.float32)
        rt = tl.zeros((K, K), dtype=tl.float32)
        ok = True
        for j in range(K):
            row = tl.sum(tl.where(ri[:, None] == j, g, 0.0), axis=0)  # g[j, :]
            col = tl.sum(tl.where(ci[None, :] == j, g, 0.0), axis=1)  # g[:, j], the same numbers (g is symmetric)
            d = tl.sum(tl.where(ci == j, row, 0.0))
            ok = ok & (d > 0) & (d < float("inf"))
            inv = 1.0 / tl.sqrt(tl.maximum(d, 1e-30))
            rrow = tl.where(ci >= j, row * inv, 0.0)
            rcol = tl.where(ri >= j, col * inv, 0.0)
            r = tl.where(ri[:, None] == j, rrow[None, :], r)
            rt = tl.where(ci[None, :] == j, rcol[:, None], rt)
            g = g - rcol[:, None] * rrow[None, :]
        return r, rt, ok

    @triton.jit
    def _inverse_upper(r, rt, K: tl.constexpr):
        """R^-1 of an upper triangular R (given R^T too), column by column: X R = I."""
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        x = tl.zeros((K, K), dtype=tl.float32)
        for c in range(K):
            v = tl.sum(tl.where(ri[:, None] == c, rt, 0.0), axis=0)  # v[k] = R[k, c]
            rcc = tl.sum(tl.where(ci == c, v, 0.0))
            v = tl.where(ci < c, v, 0.0)
            xcol = (tl.where(ri == c, 1.0, 0.0) - tl.sum(x * v[None, :], axis=1)) / rcc
            x = tl.where(ci[None, :] == c, xcol[:, None], x)
        return x

    @triton.jit
    def _first_pass(part_ptr, nblk, w_ptr, r_ptr, ok_ptr, K: tl.constexpr):
        """One program per matrix: the Gram's Cholesky R1 and W1 = R1^-1."""
        b = tl.program_id(0)
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        r, rt, ok = _cholesky(_sum_parts(part_ptr, nblk, K), K)
        w = _inverse_upper(r, rt, K)
        at = b * K * K + ri[:, None] * K + ci[None, :]
        tl.store(w_ptr + at, w)
        tl.store(r_ptr + at, r)
        tl.store(ok_ptr + b, ok.to(tl.int32))

    @triton.jit
    def _apply_w(x_ptr, sb, sr, m, w_ptr, q_ptr, part_ptr, BM: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr):
        """Q1 = X W1 for one block of rows, and that block's share of the second Gram Q1^T Q1."""
        b, blk = tl.program_id(0), tl.program_id(1)
        rows = blk * BM + tl.arange(0, BM)
        cols = tl.arange(0, K)
        live = (rows < m)[:, None]
        x = tl.load(x_ptr + b * sb + rows[:, None] * sr + cols[None, :], mask=live, other=0.0)
        w = tl.load(w_ptr + b * K * K + cols[:, None] * K + cols[None, :])
        q = tl.dot(x, w, input_precision=PREC)
        tl.store(q_ptr + b * m * K + rows[:, None] * K + cols[None, :], q, mask=live)
        g = tl.dot(tl.trans(q), q, input_precision=PREC)
        tl.store(part_ptr + (b * tl.num_programs(1) + blk) * K * K + cols[:, None] * K + cols[None, :], g)

    @triton.jit
    def _second_pass(part_ptr, nblk, q_ptr, m, r1_ptr, ok_ptr, z_ptr, t_ptr, h_ptr, y_ptr,
                     K: tl.constexpr, GRAM_TOL: tl.constexpr, PREC: tl.constexpr):  # fmt: skip
        """One program per matrix: the second Cholesky (R2, W2), R = R2 R1, the top block of Q = Q1 W2 and its
        signed LU (E - Q S = Y U); writes the top K rows of H (Y below the diagonal, S R on and above it) and of
        Y, T = U Y1^-T, and Z = -W2 S U^-1, which turns the rows of Q1 below the top block into those of Y."""
        b = tl.program_id(0)
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        at = b * K * K + ri[:, None] * K + ci[None, :]
        g2 = _sum_parts(part_ptr, nblk, K)
        near = tl.max(tl.max(tl.abs(g2 - tl.where(ri[:, None] == ci[None, :], 1.0, 0.0)), axis=1), axis=0)
        r2, r2t, ok = _cholesky(g2, K)
        ok = ok & (near < GRAM_TOL) & (tl.load(ok_ptr + b) != 0)
        w2 = _inverse_upper(r2, r2t, K)
        r = tl.dot(r2, tl.load(r1_ptr + at), input_precision=PREC)
        qt = tl.dot(tl.load(q_ptr + b * m * K + ri[:, None] * K + ci[None, :]), w2, input_precision=PREC)
        u = tl.zeros((K, K), dtype=tl.float32)
        y1 = tl.zeros((K, K), dtype=tl.float32)
        s_row = tl.zeros((K,), dtype=tl.float32)  # the signs along columns
        s_col = tl.zeros((K,), dtype=tl.float32)  # ... and along rows
        for j in range(K):
            row = tl.sum(tl.where(ri[:, None] == j, qt, 0.0), axis=0)
            col = tl.sum(tl.where(ci[None, :] == j, qt, 0.0), axis=1)
            qjj = tl.sum(tl.where(ci == j, row, 0.0))
            sj = tl.where(qjj >= 0, -1.0, 1.0)
            pivot = 1.0 + tl.abs(qjj)
            lcol = tl.where(ri > j, -sj * col / pivot, tl.where(ri == j, 1.0, 0.0))
            y1 = tl.where(ci[None, :] == j, lcol[:, None], y1)
            u = tl.where(ri[:, None] == j, tl.where(ci == j, pivot, tl.where(ci > j, row, 0.0))[None, :], u)
            s_row = tl.where(ci == j, sj, s_row)
            s_col = tl.where(ri == j, sj, s_col)
            # only Q's part of E - Q S changes below row j (E's row j is zero right of the diagonal)
            qt = qt - tl.where(ri[:, None] > j, lcol[:, None] * row[None, :], 0.0)
        u = tl.where(ci[None, :] > ri[:, None], u * -s_row[None, :], u)
        # T Y1^T = U, column by column
        t = tl.zeros((K, K), dtype=tl.float32)
        for c in range(K):
            yrow = tl.sum(tl.where((ri[:, None] == c) & (ci[None, :] < c), y1, 0.0), axis=0)
            ucol = tl.sum(tl.where(ci[None, :] == c, u, 0.0), axis=1)
            t = tl.where(ci[None, :] == c, (ucol - tl.sum(t * yrow[None, :], axis=1))[:, None], t)
        ui = _inverse_upper(u, tl.trans(u), K)
        z = -tl.dot(w2 * s_row[None, :], ui, input_precision=PREC)
        tl.store(z_ptr + at, z)
        tl.store(t_ptr + at, t)
        top = b * m * K + ri[:, None] * K + ci[None, :]
        tl.store(h_ptr + top, tl.where(ci[None, :] < ri[:, None], y1, s_col[:, None] * r))
        tl.store(y_ptr + top, y1)
        tl.store(ok_ptr + b, ok.to(tl.int32))

    @triton.jit
    def _rows_y(q_ptr, m, z_ptr, h_ptr, y_ptr, BM: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr):
        """Rows below the top block: Y = Q1 Z, into H and Y."""
        b, blk = tl.program_id(0), tl.program_id(1)
        rows = blk * BM + tl.arange(0, BM)
        cols = tl.arange(0, K)
        live = ((rows < m) & (rows >= K))[:, None]
        at = b * m * K + rows[:, None] * K + cols[None, :]
        q = tl.load(q_ptr + at, mask=live, other=0.0)
        y = tl.dot(q, tl.load(z_ptr + b * K * K + cols[:, None] * K + cols[None, :]), input_precision=PREC)
        tl.store(h_ptr + at, y, mask=live)
        tl.store(y_ptr + at, y, mask=live)


def triton_leaf(p: torch.Tensor, bm: int = 128, prec: str = "ieee", warps: int = 4):
    """The same leaf in five launches (Gram partials, first Cholesky and inverse, Q1 and the second Gram's
    partials, second Cholesky with the signed LU of the top block, the rows of Y): H (b, m, k), Y, T and whether
    each matrix's panel held. k must be 16, 32 or 64 (a power of two for tl.dot), m >= k. `warps`: of the two
    one-program kernels, whose 32-step loops are chains of reductions over a k x k tile."""
    b, m, k = p.shape
    nblk = triton.cdiv(m, bm)
    f32 = dict(dtype=torch.float32, device=p.device)
    part = torch.empty(b, nblk, k, k, **f32)
    w1, r1, z, t = (torch.empty(b, k, k, **f32) for _ in range(4))
    q1, h, y = (torch.empty(b, m, k, **f32) for _ in range(3))
    ok = torch.empty(b, dtype=torch.int32, device=p.device)
    sb, sr = p.stride(0), p.stride(1)
    assert p.stride(2) == 1, "the panel's columns must be contiguous"
    _gram_part[(b, nblk)](p, sb, sr, m, part, BM=bm, K=k, PREC=prec)
    _first_pass[(b,)](part, nblk, w1, r1, ok, K=k, num_warps=warps)
    _apply_w[(b, nblk)](p, sb, sr, m, w1, q1, part, BM=bm, K=k, PREC=prec)
    _second_pass[(b,)](part, nblk, q1, m, r1, ok, z, t, h, y, K=k, GRAM_TOL=GRAM_TOLERANCE, PREC=prec,
                       num_warps=warps)  # fmt: skip
    _rows_y[(b, nblk)](q1, m, z, h, y, BM=bm, K=k, PREC=prec)
    return h, y, t, ok.bool()


def householder_leaf(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fallback: LAPACK's Householder QR of the panel, as H (R above, Y below the diagonal), Y and T."""
    h, tau = torch.geqrf(p.cpu())
    h, tau = h.to(p.device), tau.to(p.device)
    k = p.shape[-1]
    y = torch.tril(h[:, :, :k], -1) + torch.eye(p.shape[-2], k, dtype=p.dtype, device=p.device)
    return h, y, _wy_t(y, tau)  # the checker's own T of a compact WY block


def torch_leaf(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The leaf in PyTorch: H (R above, Y below the diagonal), Y, T and whether each matrix's panel held."""
    k = p.shape[-1]
    q, r, ok = cholqr2(p)
    y, t, s = reconstruct(q)
    h = torch.tril(y, -1)
    h[:, :k, :] += torch.triu(s[:, :, None] * r)
    return h, y, t, ok


def blocked_qr(a: torch.Tensor, leaf=None) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """(H, tau) of every matrix, and how many (matrix, leaf) panels fell back out of how many."""
    a = a.clone()
    b, n, _ = a.shape
    tau = torch.zeros(b, n, dtype=a.dtype, device=a.device)
    fell = total = 0
    for k0 in range(0, n, LEAF):
        k = min(LEAF, n - k0)
        p = a[:, k0:, k0 : k0 + k]
        h, y, t, ok = (leaf if leaf is not None and k == LEAF else torch_leaf)(p)
        if not ok.all():
            hb, yb, tb = householder_leaf(p[~ok])
            h[~ok], y[~ok], t[~ok] = hb, yb, tb
        fell += int((~ok).sum())
        total += b
        a[:, k0:, k0 : k0 + k] = h
        tau[:, k0 : k0 + k] = torch.diagonal(t, dim1=-2, dim2=-1)
        a2 = a[:, k0:, k0 + k :]
        a2 -= y @ (t.mT @ (y.mT @ a2))
    return a, tau, fell, total


LEAF_SHAPES = ((2, 4096), (2, 2048), (8, 2048), (8, 1024), (60, 1024), (60, 512), (640, 512), (640, 256))


def time_leaves(family: str, reps: int = 50) -> list[dict]:
    """GPU time of one 32-column leaf per panel shape (batch, rows), each in a CUDA graph (as the family's route
    runs it), copy-in included on both sides: the family's own leaf (cooperative where its plan says so, else its
    tile-QR leaves over the same 32 columns) against this Triton leaf at three row blocks and two precisions, and
    with 1 or 2 warps in its one-program kernels."""
    from tracker.capture.worker import load_variant

    load_variant(family)
    fam = sys.modules["submission"]
    rows = []
    for b, m in LEAF_SHAPES:
        for name, us in _time_shape(fam, b, m, reps).items():
            rows.append({"batch": b, "rows": m, "leaf": name, "us": round(us, 2)})
            print(f"{b:4}x{m:<5} {name:24} {us:9.2f} us a leaf", flush=True)
    return rows


def _time_shape(fam, b: int, m: int, reps: int) -> dict[str, float]:
    src = torch.randn(b, m, LEAF, device="cuda")
    p = torch.empty_like(src)
    tau = torch.empty(b, LEAF, device="cuda")
    v = torch.zeros(b, m, LEAF, device="cuda")
    t = torch.zeros(b, LEAF, LEAF, device="cuda")
    plan = fam._coop_plan(p, m)
    nb = LEAF if plan else fam._leaf_width(m, b)

    def theirs():
        if plan:
            fam._coop_leaf(p, tau, v, t, *plan)
            return
        for c in range(0, LEAF, nb):  # narrower tile-QR leaves: a lower bound (their updates in between are left out)
            fam._leaf(p[:, c:, c : c + nb], tau[:, c : c + nb], v[:, c:, c : c + nb], t[:, c : c + nb, c : c + nb])

    contenders = {("cooperative" if plan else f"tile QR, {LEAF // nb} x {nb} wide"): theirs}
    for bm in (64, 128, 256):
        for prec in ("ieee", "tf32x3"):
            contenders[f"cholqr2 bm{bm} {prec}"] = lambda bm=bm, prec=prec: triton_leaf(p, bm, prec)
    for warps in (1, 2):
        contenders[f"cholqr2 bm128 ieee {warps}w"] = lambda warps=warps: triton_leaf(p, 128, "ieee", warps)
    out = {}
    for name, leaf in contenders.items():

        def step(leaf=leaf):
            p.copy_(src)
            leaf()

        step()  # compile
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(10):
                step()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        graph.replay()
        start.record()
        for _ in range(reps):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        out[name] = start.elapsed_time(end) * 1e3 / (reps * 10)
    return out


RESIDUALS = ("factor_res", "orth_res")  # scaled as the gates scale them (limits: tracker/workloads/qr_v2/gates.py)


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", choices=("benchmarks", "tests", "both"), default="both")
    ap.add_argument("--cases", help="case numbers within the chosen list, e.g. 5,6")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--leaf", choices=("torch", "triton"), default="torch", help="the leaf's implementation")
    ap.add_argument("--seed", type=int, help="a hidden seed, transformed per case as `run --seed` does")
    ap.add_argument("--json", help="write the rows here too")
    ap.add_argument("--time-leaf", metavar="FAMILY", help="on a GPU: time one leaf per panel shape against FAMILY's")
    args = ap.parse_args()
    if (args.time_leaf or args.leaf == "triton") and triton is None:
        ap.error("Triton is not installed: --time-leaf and --leaf triton need it")
    if args.time_leaf and not torch.cuda.is_available():
        ap.error("--time-leaf times CUDA graphs: it needs a GPU")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no GPU here (--device cpu; the Triton leaf then needs TRITON_INTERPRET=1)")
    if args.leaf == "triton" and args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        ap.error("--leaf triton on the CPU runs in Triton's interpreter: set TRITON_INTERPRET=1")
    if args.time_leaf:
        _write_json(args.json, time_leaves(args.time_leaf))
        return 0
    lists = {"benchmarks": QR_V2.benchmarks, "tests": QR_V2.tests}
    chosen = list(lists) if args.suite == "both" else [args.suite]
    try:
        wanted = None if not args.cases else {int(c) for c in args.cases.split(",")}
    except ValueError:
        ap.error(f"--cases {args.cases}: case numbers separated by commas, e.g. 5,6")
    rows, bad = [], 0
    for name in chosen:
        for i, case in enumerate(lists[name]):
            if wanted is not None and i not in wanted:
                continue
            start = time.time()
            if args.seed is not None:
                case = case.with_seed(hidden_seed(case.seed, args.seed))
            a = generate(case, device=args.device)
            h, tau, fell, total = blocked_qr(a, triton_leaf if args.leaf == "triton" else None)
            verdict = check_qr(a, (h, tau))
            bad += not verdict.passed
            lapack = check_qr(a, tuple(x.to(a.device) for x in torch.geqrf(a.cpu()))).residuals
            row = {"list": name, "case": i, "spec": f"{case.batch}x{case.n} {case.case} cond={case.cond:g}",
                   "passed": verdict.passed, "message": verdict.message, "fallback_panels": fell,
                   "panels": total, "seconds": round(time.time() - start, 1),
                   **{k: verdict.residuals.get(k) for k in RESIDUALS},
                   **{f"geqrf_{k}": lapack.get(k) for k in RESIDUALS}}  # fmt: skip
            rows.append(row)
            shown = "  ".join(f"{k} {_g(row[k])} (geqrf {_g(row['geqrf_' + k])})" for k in RESIDUALS)
            print(f"{name:10} {i:2} {row['spec']:32} {'pass' if verdict.passed else 'FAIL'}  "
                  f"fallback {fell}/{total}  {shown}  {row['seconds']} s  {verdict.message[:80]}",
                  flush=True)  # fmt: skip
    _write_json(args.json, rows)
    return 1 if bad else 0


def _write_json(path: str | None, rows: list[dict]) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
