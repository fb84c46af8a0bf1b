from task import input_t, output_t

"""Fused 3xTF32 WY trailing update for batch-rich shapes, outer T from the leaf T's.

Idea: on 640x512 (4 of 12 terms) ~5.4 of 8.8 ms are cuBLAS fp32 SIMT GEMMs (A2 -= V T^T V^T A2 as three bmm).
One Triton kernel per (matrix, column tile) does the whole update: W = V^T A2[:, tile] over all rows, W2 = T^T W,
A2[:, tile] -= V W2, every product a tensor-core dot with split operands (tf32x3: a_hi*b_hi + a_hi*b_lo +
a_lo*b_hi, fp32 accumulate), so W never goes to memory and one launch replaces three. The outer panel's T is
merged from the leaf T's (T12 = -T1 (V1^T V2) T2) instead of a triangular solve. Few-matrix shapes keep the
parent's split-K / cooperative route.
Parent: coop_hybrid_ept64
Hypothesis (v1, run 5778ad57824f: 3,520 us, 640x512 9.25 -> 7.66 ms, but 2x4096 25.8 -> 28.1 ms from the T
merge's tall-skinny cuBLAS products): v2 takes one Gram product V^T V per outer panel (the split-K Triton kernel
for few tall matrices), 3 pipeline stages in the fused kernel (microbenchmark 1,045 -> 950 us on the first
640x512 update) and the leaf tile 8192 for batches >= 256 (fused_wy_leaf8k: 640x512 -0.3 ms): 640x512 ~7.1 ms,
60x1024 ~6.6, 2x4096 <= 25.8: geomean ~3,400 us (measured: run 7980a68485d4, 3,312 us). Knob _FUSED_VT: phase
1 of the trailing update reads a transposed copy of V (K-major operand for tf32 wgmma); microbenchmark 942 ->
756 us on the first 640x512 update, 404 -> 338 on 60x1024; as knob variant fused_wy_vt (run d42688781019): 3,276 us,
60x1024 6.23 -> 6.00 ms, 640x512 equal; now the default. Knobs _LEAF_VT (the leaf writes V^T), _T_BUILD (outer T
by one kernel) and _REUSE (buffers zeroed once per call): together as knob variant fused_wy_ltr (run
89a5b2574255): 3,208 us, 640x512 7.06 -> 6.66 ms, 60x1024 5.99 -> 5.60 ms; now the defaults.
Session 20, routing knobs on top (each a knob variant, promoted, now the defaults): _FUSED_MIN_BATCH=32 (every
batch of 32 or more on the fused kernel) and _NBO_HUGE=256 (256-wide outer panels for n > 2048): fused_wy_mix,
run 2d792fa02786, 3,036 us; _COOP_MIN_BM=64 (64 cooperative leaf programs per matrix of 2x4096): fused_wy_coopbm64,
run 6032b9055f01, 2,987 us.
Session 22: the profile of the best (run 5d0ab286802d) showed a 317 us copy of A into H on 640x512; knob
_SRC_FIRST (the first outer panel's leaf and fused updates read A and write H, no copy): fused_wy_src, run
ad8502b53bf3, 2,944 us; now the default.
Session 23: knob _ONE_REDUCE (the tile QR's column step with one reduction pair) rejected, run 8a01590b6bc0 3,149
us (the knob is gone; its source is the run's).
Session 24: knobs _PRESPLIT (V^T split into TF32 parts by the leaf; run 8f447ebcd040 3,009 us, the knob gone since),
_MIN_WARPS=1, _EPT=128 and _GRAPH_MAX_ELEMS=2^25 rejected in the screen (kernels/NOTES.md).
Session 28: knobs _LEAN (the tile QR step masks and scales the [BW] vector z instead of the tile: one FMA per
element) and _SMALL_FAST (20x32 eagerly through the compiled kernel's launcher, no graph, no copies; Triton's
binder and the graph cost more CPU time per call than the factorisation takes on the GPU): fused_wy_lean, run
42f9cd710249, 2,798 us (20x32 41 -> 23 us, 40x176 -7%, 40x352 -4%); now the defaults.
Session 29: knobs _COOP_TAGGED (the cooperative leaf's step waits on its partials, which start as a sentinel NaN,
not on a counter), _LEAN_COOP (_LEAN's step there) and _LEAF_ELEMS_FEW=8192 (8-wide leaves for 40-matrix batches):
fused_wy_tagged, run 40dd18af1bdb, 2,829 us against 2,767-2,824 for three runs of fused_wy_lean; on the cases they
reach, 8x2048 9,439 against 10,247-10,272 us and 2x4096 20,947 against 21,892-22,086 (paired screen: 0.909, 0.941,
40x352 0.982), while code they do not touch drifted +5%; now the defaults (session 30). Session 30: the Gluon leaf
(whole columns per warp, one barrier a step) and a runner launch for every route kernel rejected in the screen
(kernels/NOTES.md), their knobs gone. Session 33: knob _CHOLQR (leaf panels by CholeskyQR2 with Householder
reconstruction, the Householder leaf for the matrices whose panel did not hold; scripts/cholqr_leaf_study.py),
checked in Triton's interpreter, not yet run on a GPU.
Session 36 (no GPU): knobs _T_TREE (the T builder merges leaf T's pairwise by levels) and _MIN_WARPS_MANY (one warp
per leaf program for 640-matrix batches, with _EPT_MANY=128 and _LEAF_ELEMS_MANY=4096), interpreted, not yet run.
Session 43 (H200): knob _FUSED_PREC="tf32x2" (two TF32 products on the trailing updates of n >= 512):
fused_wy_x2, run 91f17483358c, 2,727 us, its 22 tests passed under seeds 1234 and 98765; 640x512 6,138 / 6,062 /
6,071 against this file's 6,684 / 6,488 / timed out and 60x1024 4,766 against 5,064 in the next runs on the same
card (66fdc4fc242e); now the default. Rejected in the paired screen (kernels/NOTES.md): intra-panel updates in
programs of 16 or 32 columns (640x512 +4%; the knob is gone), left-looking leaves (_LEFT_LOOK: +42% / +52%; the
knob is gone since session 46), the few-matrix trailing updates on the Triton split route (8x2048 +6%, 2x4096 +7%).
Session 44 (H100): rejected in the paired screen, 16-wide cooperative leaves (_COOP_NB=16: 8x2048 +1.8%) and
narrower outer panels (_NBO_HUGE=128: 2x4096 +4.2%; _NBO_BIG=64: 8x2048 +5.9%).
Session 45 (H100): rejected, the trailing updates that go to cuBLAS (2x4096's 4.5 ms and 8x2048's 2.7 ms of float32
SIMT GEMMs in the profile of run e11abefc6b6d) as two TF32 products on operands rounded beforehand: paired screen
8x2048 +22%, 2x4096 +5.5% (the rounding passes cost more than the tensor cores save; run 64f6c0c7093e holds its
source; the knob is gone).
Session 46 (H100): rejected, graphs whose outputs are returned without the clone (_GRAPH_POOL=2, two more graphs a
shape of 2^24 elements or more, replayed while nothing else holds their outputs): paired screen 60x1024 -1.8%,
8x2048 +4.2%, 2x4096 +4.3% (the knob is gone; kernels/NOTES.md).
Session 50 (H200): knobs _T_MERGE_KERNEL (the few-matrix shapes merge each outer panel's T in one launch) and
_GRAPH_ADDR (the graphed shapes read the caller's input through address slots, no copy-in): fused_wy_tmk_ga, run
2aaa7d503d4d, 2,562 us against fused_wy_x2's 2,727 (8x2048 9,398 -> 8,919, 2x4096 20,246 -> 19,279, 60x1024
4,766 -> 4,637); each knob's 22 tests passed under the default seed and seeds 1234 and 98765; now the defaults.
Session 53 (H100): knob _SMALL_LANES (20x32's 32 x 32 matrices by a one-warp Gluon kernel, a column per lane, column
j shuffled to every lane, every sum in a lane's registers, the steps unrolled): fused_wy_lanes, run 934f4523cece,
2,632 us on an H100; 20x32's best repetition 15.8-16.5 us in five runs against 19.5-19.6 in four runs of the file
before it (tracker ab 3fce8f7bd02a: mean ratio 0.953, p = 0.39); its 22 tests passed under three seeds; now the
default.
Sessions 54-55 (H100), rejected and removed: a Gluon lane leaf (two lanes a column, rows over the warps) for the
leaves of few-matrix batches, correct to 2e-7 but slower in every paired screen (40x352 +21% with every leaf, +7% with
its 16-wide leaves alone); carrying a panel's trailing update as tiles inside the next panel's cooperative leaf
launches (_CARRY: best 8x2048 0.966, 2x4096 0.920 against the file, behind the 4-warp leaf alone).
Session 55 (H100): the cooperative leaf at 4 warps, not 2 (_COOP_WARPS): paired 8x2048 0.955, 2x4096 0.881 against 2
warps (8 warps: 1.09, 1.19 against 4); fused_wy_coop4, run 7d3c53b08323, 2,623 us on an H100 (8x2048 9,069 -> 8,679,
2x4096 19,420 -> 17,313 against fused_wy_lanes's run 934f4523cece); 22 tests under three seeds; now the default.
Session 56 (H100), rejected and removed: T built by program 0 alone while the partials arrive (_COOP_T_LATE: 8x2048
0.988, 2x4096 1.046), two cooperative programs an SM (_COOP_PER_SM=2: 8x2048 1.03, 60x1024 1.11). Lost as well:
cooperative leaves for 512- and 256-row panels (_COOP_MIN_ROWS: 1.015-1.052), outer panels of 64/128 (1.07-1.11).
Also removed: P[j, :] read from the one program holding row j, not summed over all (_COOP_RJ_OWNER): polling that
one slot as a [BW] vector never saw it filled (NaN on every input); read as a masked tile it held the gates and ran
3.5% slower (2x4096, eager). Session 57 (H100), rejected and removed: the few-matrix trailing updates on cuBLAS
(float32, SIMT) as two products of 128 x 128 tensor-core tiles in tf32x2, rounding inside the product (_BIG_TC:
8x2048 1.034, 2x4096 1.051; BK 64 1.022 / 1.035; W = V^T A2 split-K beside it 1.064 / 1.069). Session 57: knob
_GRAPH_POOL (640x512 graphed, two graphs whose outputs return without a clone): fused_wy_gpool, run bd5fb85faec0,
passed its 22 tests under three seeds; 2,629 us on another H100 than the file's 2,623, its 640x512 means 0.2-4.7%
lower with no repetition over 8.1 ms (the file's reach 15-30 ms); not yet compared on one card. Session 57 (CPU):
knob _SMALL_POOL (20x32's outputs handed out again from a ring once nothing else holds them), not yet run.
"""

import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402

try:
    import triton
    import triton.language as tl

    _HAVE_TRITON = True
except ImportError:  # pragma: no cover
    _HAVE_TRITON = False

try:  # Triton's explicit-layout language: the one-warp whole-matrix kernel (knob _SMALL_LANES)
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    _HAVE_GLUON = True
except ImportError:  # pragma: no cover
    _HAVE_GLUON = False

_SMALL_MAX = 128
_SENTINEL_BITS = 0x7FBADBAD  # an unfilled partial of the cooperative leaf: a NaN payload no GPU arithmetic returns
_LEAF_ELEMS = 16384  # leaf tile BM*nb, about 32 fp32 per thread at 16 warps
_MAX_LEAF_ROWS = 4096  # taller: leaf [BM, 8] would spill; use the PyTorch route
_NB_TORCH = 32
_NBO = 64  # outer (trailing-update) panel width for n <= 1024
_NBO_BIG = 128  # ... and for 1024 < n <= 2048
_NBO_HUGE = 256  # ... and for n > 2048 (measured: fused_wy_mix, run 2d792fa02786; 8x2048 lost with 256)

if _HAVE_TRITON:

    @triton.jit
    def _add2(a0, b0, a1, b1):
        return a0 + a1, b0 + b1

    @triton.jit
    def _reflector(alpha, xn2):
        """LAPACK dlarfg from alpha and the squared norm below it: beta, tau and 1 / (alpha - beta), the scale of
        the vector below the diagonal (tau = 0 and beta = alpha when that part is exactly 0)."""
        nrm = tl.sqrt(alpha * alpha + xn2)
        zero = xn2 == 0.0
        beta = tl.where(zero, alpha, tl.where(alpha >= 0.0, -nrm, nrm))
        tau = tl.where(zero, 0.0, (beta - alpha) / tl.where(zero, 1.0, beta))
        return beta, tau, 1.0 / tl.where(zero, 1.0, alpha - beta)

    @triton.jit
    def _t_column(tmat, cols, j, tau, z):
        """T with its column j from step j's tau and z = V^T v_j (dlarft: T[:j, j] = -tau T[:j, :j] z[:j])."""
        zl = tl.where(cols < j, z, 0.0)
        tc = -tau * tl.sum(tmat * zl[None, :], axis=1)
        tc = tl.where(cols == j, tau, tl.where(cols < j, tc, 0.0))
        return tl.where(cols[None, :] == j, tc[:, None], tmat)

    @triton.jit
    def _tile_qr_kernel(
        src, dst, tau_ptr, v_ptr, t_ptr, vt_ptr, held_ptr, m, w, kmax,
        s_sb, s_sr, d_sb, d_sr, tau_sb, v_sb, v_sr, t_sb, t_sr, vt_sb, vt_sk,
        BM: tl.constexpr, BW: tl.constexpr, WRITE_VT: tl.constexpr, WRITE_VTT: tl.constexpr, LEAN: tl.constexpr,
        SKIP_HELD: tl.constexpr, SRC_ADDR: tl.constexpr = False,
    ):  # fmt: skip
        """SKIP_HELD: matrices whose flag in held_ptr is set were factored by the CholeskyQR2 leaf; not again.
        SRC_ADDR: src points at the address of the data (int64; knob _GRAPH_ADDR), not at the data."""
        if SRC_ADDR:
            src = tl.multiple_of(tl.load(src).to(tl.pointer_type(tl.float32)), 16)
        pid = tl.program_id(0).to(tl.int64)
        if SKIP_HELD:  # noqa: SIM102 (a constexpr: no load at all when off)
            if tl.load(held_ptr + pid) != 0:
                return
        rows = tl.arange(0, BM)
        cols = tl.arange(0, BW)
        msk = (rows[:, None] < m) & (cols[None, :] < w)
        p = tl.load(src + pid * s_sb + rows[:, None] * s_sr + cols[None, :], mask=msk, other=0.0)
        taus = tl.zeros([BW], dtype=tl.float32)
        tmat = tl.zeros([BW, BW], dtype=tl.float32)
        for j in range(0, kmax):
            colj = cols[None, :] == j
            x = tl.sum(tl.where(colj, p, 0.0), axis=1)
            below = rows > j
            xb = tl.where(below, x, 0.0)
            alpha, xn2 = tl.reduce((tl.where(rows == j, x, 0.0), xb * xb), 0, _add2)
            beta, tau, inv = _reflector(alpha, xn2)
            v = tl.where(below, xb * inv, tl.where(rows == j, 1.0, 0.0))
            # z[c] = v^T P[:, c]: the update coefficients for c > j and V_prev^T v for c < j
            z = tl.sum(v[:, None] * p, axis=0)
            if LEAN:  # the column mask and tau on the [BW] vector, one FMA per tile element
                p = p - v[:, None] * tl.where(cols > j, tau * z, 0.0)[None, :]
            else:
                p = p - tl.where(cols[None, :] > j, (tau * v)[:, None] * z[None, :], 0.0)
            newcol = tl.where(rows == j, beta, tl.where(below, v, x))
            p = tl.where(colj, newcol[:, None], p)
            taus = tl.where(cols == j, tau, taus)
            if WRITE_VT:
                tmat = _t_column(tmat, cols, j, tau, z)
        tl.store(dst + pid * d_sb + rows[:, None] * d_sr + cols[None, :], p, mask=msk)
        tl.store(tau_ptr + pid * tau_sb + cols, taus, mask=cols < kmax)
        if WRITE_VT:
            diag = cols[None, :]
            vv = tl.where(rows[:, None] > diag, p, tl.where(rows[:, None] == diag, 1.0, 0.0))
            tl.store(v_ptr + pid * v_sb + rows[:, None] * v_sr + cols[None, :], vv, mask=msk)
            if WRITE_VTT:  # V^T (w, m) too, for the K-major phase 1 of the fused update (no torch transpose)
                tl.store(vt_ptr + pid * vt_sb + cols[None, :] * vt_sk + rows[:, None], vv, mask=msk)
            tmask = (cols[:, None] < w) & (cols[None, :] < w)
            tl.store(t_ptr + pid * t_sb + cols[:, None] * t_sr + cols[None, :], tmat, mask=tmask)

    _SENTINEL = tl.constexpr(_SENTINEL_BITS)

    @triton.jit
    def _unfilled(a, b):
        """How many elements of the two tiles still hold the sentinel."""
        na = tl.sum((a.to(tl.int32, bitcast=True) == _SENTINEL).to(tl.int32))
        return na + tl.sum((b.to(tl.int32, bitcast=True) == _SENTINEL).to(tl.int32))

    @triton.jit
    def _wait_filled(pa, ma, pb, mb):
        """Tiles a and b (pointers, masks), loaded again until neither holds the sentinel (at most 200,000 times)."""
        a = tl.load(pa, mask=ma, other=0.0, volatile=True)
        b = tl.load(pb, mask=mb, other=0.0, volatile=True)
        left = _unfilled(a, b)
        spins = 0
        while (left > 0) & (spins < 200000):
            a = tl.load(pa, mask=ma, other=0.0, volatile=True)
            b = tl.load(pb, mask=mb, other=0.0, volatile=True)
            left = _unfilled(a, b)
            spins += 1
        return a, b

    @triton.jit
    def _coop_leaf_kernel(
        a_ptr, tau_ptr, v_ptr, t_ptr, part_ptr, cnt_ptr, held_ptr, m, w, kmax, nprog,
        a_sb, a_sr, tau_sb, v_sb, v_sr, t_sb, t_sr, part_sb, cnt_sb,
        BM: tl.constexpr, BW: tl.constexpr, PP: tl.constexpr, LEAN: tl.constexpr, TAGGED: tl.constexpr,
        SKIP_HELD: tl.constexpr,
    ):  # fmt: skip
        """Leaf panel (m x w) of matrix program_id(1) split by rows over nprog programs (BM rows each).

        Per step: partial (s, P[j, :]) -> part[b, j, pid, :], one counter barrier, sum of the partials.
        TAGGED: no counter; part starts filled with the bit pattern _SENTINEL, which no sum produces (a NaN a GPU
        never computes), and each program reloads the step's partials until none is left: the loads that wait are
        the loads of the data, one trip to L2 a step instead of an atomic, a polling atomic and the loads.
        SKIP_HELD: as in _tile_qr_kernel (every program of a matrix leaves, so no step waits on one that left).
        """
        pid = tl.program_id(0)
        bid = tl.program_id(1).to(tl.int64)
        if SKIP_HELD:  # noqa: SIM102 (as in _tile_qr_kernel)
            if tl.load(held_ptr + bid) != 0:
                return
        lrows = tl.arange(0, BM)
        rows = pid * BM + lrows
        cols = tl.arange(0, BW)
        pidx = tl.arange(0, PP)
        rmask = rows < m
        msk = rmask[:, None] & (cols[None, :] < w)
        aptr = a_ptr + bid * a_sb + rows[:, None] * a_sr + cols[None, :]
        p = tl.load(aptr, mask=msk, other=0.0)
        taus = tl.zeros([BW], dtype=tl.float32)
        tmat = tl.zeros([BW, BW], dtype=tl.float32)
        pbase = part_ptr + bid * part_sb
        cbase = cnt_ptr + bid * cnt_sb
        for j in range(0, kmax):
            colj = cols[None, :] == j
            x = tl.sum(tl.where(colj, p, 0.0), axis=1)
            below = rows > j
            xb = tl.where(below, x, 0.0)
            slot = pbase + (j * PP + pid) * (2 * BW)
            s_loc, rj_loc = tl.reduce((xb[:, None] * p, tl.where(rows[:, None] == j, p, 0.0)), 0, _add2)
            tl.store(slot + cols, s_loc)
            tl.store(slot + BW + cols, rj_loc)
            rd = pbase + (j * PP + pidx[:, None]) * (2 * BW) + cols[None, :]
            pm = (pidx[:, None] < nprog) & (cols[None, :] < BW)
            if TAGGED:
                ps, pr = _wait_filled(rd, pm, rd + BW, pm)
                s = tl.sum(ps, axis=0)
                rj = tl.sum(pr, axis=0)
            else:
                tl.debug_barrier()
                tl.atomic_add(cbase + j, 1)
                c = tl.atomic_add(cbase + j, 0)
                spins = 0
                while (c < nprog) & (spins < 200000):
                    c = tl.atomic_add(cbase + j, 0)
                    spins += 1
                tl.debug_barrier()
                s = tl.sum(tl.load(rd, mask=pm, other=0.0, cache_modifier=".cg"), axis=0)
                rj = tl.sum(tl.load(rd + BW, mask=pm, other=0.0, cache_modifier=".cg"), axis=0)
            alpha = tl.sum(tl.where(cols == j, rj, 0.0))
            xn2 = tl.sum(tl.where(cols == j, s, 0.0))
            beta, tau, inv = _reflector(alpha, xn2)
            v = tl.where(below, xb * inv, tl.where(rows == j, 1.0, 0.0))
            z = s * inv + rj
            if LEAN:
                p = p - v[:, None] * tl.where(cols > j, tau * z, 0.0)[None, :]
            else:
                p = p - tl.where(cols[None, :] > j, (tau * v)[:, None] * z[None, :], 0.0)
            newcol = tl.where(rows == j, beta, tl.where(below, v, x))
            p = tl.where(colj, newcol[:, None], p)
            taus = tl.where(cols == j, tau, taus)
            tmat = _t_column(tmat, cols, j, tau, z)
        tl.store(aptr, p, mask=msk)
        vv = tl.where(rows[:, None] > cols[None, :], p, tl.where(rows[:, None] == cols[None, :], 1.0, 0.0))
        tl.store(v_ptr + bid * v_sb + rows[:, None] * v_sr + cols[None, :], vv, mask=msk)
        if pid == 0:
            tl.store(tau_ptr + bid * tau_sb + cols, taus, mask=cols < kmax)
            tmask = (cols[:, None] < w) & (cols[None, :] < w)
            tl.store(t_ptr + bid * t_sb + cols[:, None] * t_sr + cols[None, :], tmat, mask=tmask)


if _HAVE_GLUON:

    @gluon.jit
    def _lane_bcast(p, lane):
        """Each element of p from the same register of lane `lane` of its warp (an int tensor broadcast to p's
        shape): one shuffle per element, no shared memory. With a column per lane, column j in every lane."""
        bits = gl.inline_asm_elementwise(
            "shfl.sync.idx.b32 $0, $1, $2, 31, -1;",
            "=r,r,r",
            [p.to(gl.int32, bitcast=True), lane],
            dtype=gl.int32,
            is_pure=True,
            pack=1,
        )
        return bits.to(gl.float32, bitcast=True)

    @gluon.jit
    def _lane_rows_sum(t, keep, rows, N: gl.constexpr, SPLIT: gl.constexpr):
        """Sum over a lane's rows of t where keep; SPLIT: as four chains of N / 4 rows added pairwise, a quarter of
        the dependent adds of one chain. Rows left out are -0.0, which the compiler drops (x + -0.0 == x)."""
        if not SPLIT:
            return gl.sum(gl.where(keep, t, -0.0), axis=0)
        q: gl.constexpr = N // 4
        s0 = gl.sum(gl.where(keep & (rows < q), t, -0.0), axis=0)
        s1 = gl.sum(gl.where(keep & (rows >= q) & (rows < 2 * q), t, -0.0), axis=0)
        s2 = gl.sum(gl.where(keep & (rows >= 2 * q) & (rows < 3 * q), t, -0.0), axis=0)
        s3 = gl.sum(gl.where(keep & (rows >= 3 * q), t, -0.0), axis=0)
        return (s0 + s1) + (s2 + s3)

    @gluon.jit
    def _lane_qr_kernel(src, dst, tau_ptr, s_sb, s_sr, d_sb, d_sr, tau_sb, N: gl.constexpr, SPLIT: gl.constexpr):
        """A whole N x N matrix (N = 32: 20x32) in one warp: lane c holds column c, all its rows in registers.
        Column j reaches every lane by shuffles (no shared memory, no barrier); every sum of a step is over a
        lane's own registers, its three sums side by side (xb . xb, xb . P[:, c], and P[j, c] taken as it is),
        with z = inv (xb . P[:, c]) + P[j, c] after the reflector, as in the cooperative leaf. The steps are
        unrolled, so every row test is known when compiled: a step touches rows j.. only, and the fill -0.0 (x +
        -0.0 == x) lets the rows above j drop out of its sums."""
        lay: gl.constexpr = gl.BlockedLayout([N, 1], [1, 32], [1, 1], [0, 1])
        pid = gl.program_id(0).to(gl.int64)
        rows = gl.expand_dims(gl.arange(0, N, layout=gl.SliceLayout(1, lay)), 1)
        cols1 = gl.arange(0, N, layout=gl.SliceLayout(0, lay))
        cols = gl.expand_dims(cols1, 0)
        p = gl.load(src + pid * s_sb + rows * s_sr + cols)
        taus = gl.zeros([N], gl.float32, gl.SliceLayout(0, lay))
        for j in gl.static_range(N):
            x = _lane_bcast(p, rows * 0 + j)  # x[r, c] = P[r, j]
            below = rows > j
            onj = rows == j
            xn2 = _lane_rows_sum(x * x, below, rows, N, SPLIT)
            s = _lane_rows_sum(x * p, below, rows, N, SPLIT)
            alpha = gl.sum(gl.where(onj, x, -0.0), axis=0)
            rj = gl.sum(gl.where(onj, p, -0.0), axis=0)
            beta, tau, inv = _reflector(alpha, xn2)
            coef = gl.expand_dims(gl.where(cols1 > j, tau * (s * inv + rj), 0.0), 0)
            v = x * gl.expand_dims(inv, 0)
            upd = gl.where(below, p - v * coef, gl.where(onj, p - coef, p))
            newcol = gl.where(below, v, gl.where(onj, gl.expand_dims(beta, 0), p))
            p = gl.where(cols == j, newcol, upd)
            taus = gl.where(cols1 == j, tau, taus)
        gl.store(dst + pid * d_sb + rows * d_sr + cols, p)
        gl.store(tau_ptr + pid * tau_sb + cols1, taus)


def _use_triton(x: torch.Tensor) -> bool:
    return _HAVE_TRITON and (x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")


_EPT = 64  # leaf tile elements per thread (parent: 32)


_MANY = 256  # batches this large: leaf tile _LEAF_ELEMS_MANY with _EPT_MANY per thread (knobs; parent: as others)
_LEAF_ELEMS_MANY = 8192  # measured on 640x512: fused_wy_leaf8k 7.40 ms vs 7.67 with 16384 (ept 64)
_EPT_MANY = 32
# 1 with _EPT_MANY=128 and _LEAF_ELEMS_MANY=4096: a warp per leaf program (512x8, 256x16, 128x32 leaves, ptxas sm_90a
# 255 registers, 24 B of spills at 512x8): the step's reductions all shuffles, no barrier, and all 640 matrices of
# 640x512 at once (8 warps per SM) instead of 264 programs of 8 warps in three waves per leaf
_MIN_WARPS_MANY = 2


_MIN_WARPS = 2  # 1: a 32x32 tile in one warp, its reductions all shuffles (ptxas sm_90a: 125 registers, no spills)
_LEAN = True  # tile QR step: column mask and tau applied to the [BW] vector z, one FMA per element (else 3 ops)
_FEW_BATCH = 48  # batches smaller than this (40x176, 40x352: 40 programs a leaf, latency-bound) ...
_LEAF_ELEMS_FEW = 8192  # ... with leaves of at most 512 rows: leaf tile elements (fused_wy_tagged; was 16384)
_SMALL_WARPS = 0  # warps of the whole-matrix tile (n <= _SMALL_MAX); 0: by elements per thread as the leaves
_LEAN_COOP = True  # _LEAN's step in the cooperative leaf (2x4096, 8x2048)
_SMALL_FAST = True  # whole-matrix route eager through the compiled kernel's launcher: no graph, copies, binder
_SMALL_LANES = True  # 32 x 32 matrices (20x32) by the one-warp Gluon kernel, a column per lane (session 53)
_LANES_SPLIT = True  # ... its sums over rows as four shorter chains (more instructions, less latency)


def _warps(elems: int, ept: int = _EPT, least: int | None = None) -> int:
    """About `ept` tile elements per thread (32: ptxas ~100-130 registers, no spills, sm_90a), at least `least`
    warps (default _MIN_WARPS)."""
    return max(_MIN_WARPS if least is None else least, min(16, elems // (32 * ept)))


def _lanes_take(a: torch.Tensor) -> bool:
    """The one-warp kernel's shape: 32 x 32, a column per lane."""
    return _SMALL_LANES and _HAVE_GLUON and a.is_cuda and a.shape[1] == a.shape[2] == 32


def _small_args(a, h, tau):
    """The whole-matrix launch: its kernel, its tensor arguments, its integer arguments, its constexprs (in the
    kernel's order) and its warps."""
    b, m, n = a.shape
    if _lanes_take(a):
        ints = (a.stride(0), a.stride(1), h.stride(0), h.stride(1), tau.stride(0))
        return _lane_qr_kernel, (a, h, tau), ints, dict(N=32, SPLIT=_LANES_SPLIT), 1
    bm, bw = triton.next_power_of_2(m), triton.next_power_of_2(n)
    ints = (m, n, n, a.stride(0), a.stride(1), h.stride(0), h.stride(1), tau.stride(0), 0, 0, 0, 0, 0, 0)
    meta = dict(BM=bm, BW=bw, WRITE_VT=False, WRITE_VTT=False, LEAN=_LEAN, SKIP_HELD=False)
    return _tile_qr_kernel, (a, h, tau, h, h, h, h), ints, meta, _SMALL_WARPS or _warps(bm * bw)


def _small_qr(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b, m, n = a.shape
    h = torch.empty_like(a)
    tau = torch.empty((b, n), dtype=a.dtype, device=a.device)
    kernel, ptrs, ints, meta, warps = _small_args(a, h, tau)
    kernel[(b,)](*ptrs, *ints, **meta, num_warps=warps)
    return h, tau


_LAUNCHERS: dict = {}
# Pairs of the small route's outputs kept a shape and handed out again once nothing else holds them (0: off). 20x32's
# call is mostly host time, which its events time: the two allocations are about 2.5 of the 3.3 us of Python before
# the launch (CPU tensors, session 53). The harness holds one repetition's outputs (up to 50 calls) into the next,
# so a shape cycles through about twice its batch.
_SMALL_POOL = 0
_RINGS: dict = {}


def _refs(e: list) -> list[int]:
    """References to the tensors e[0] and e[1] and to their memory (storages e[2], e[3]), counted the same way
    whenever asked."""
    return [sys.getrefcount(e[0]), sys.getrefcount(e[1]), torch._C._storage_Use_Count(e[2]),
            torch._C._storage_Use_Count(e[3])]  # fmt: skip


def _tracked(e: list) -> list:
    """e = [H, tau], held by nothing but e: e with their storages and _refs appended, which _untouched compares."""
    e += [e[0].untyped_storage()._cdata, e[1].untyped_storage()._cdata]
    e += _refs(e)
    return e


def _untouched(e: list) -> bool:
    """Nothing but e holds its H and tau: no other reference to either tensor, no other tensor over their memory
    (a view, or the reshaped tensor custom_kernel returns), as when _tracked counted them."""
    return _refs(e) == e[4:8]


class _OutputRing:
    """One shape's output pairs (H, tau) in a ring. The next pair is handed out again only if nothing but the ring
    holds it (_untouched); else a new pair joins the ring in front of it, up to _SMALL_POOL pairs, and past that
    every call allocates. Reuse follows the order of work on the GPU queue, as the caching allocator's does."""

    def __init__(self) -> None:
        self.pairs: list[list] = []  # _tracked pairs
        self.next = 0

    def take(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pairs = self.pairs
        if pairs:
            e = pairs[self.next]
            if _untouched(e):
                self.next = (self.next + 1) % len(pairs)
                return e[0], e[1]
        e = list(_fresh_outputs(a))
        if len(pairs) < _SMALL_POOL:
            pairs.insert(self.next, _tracked(e))
            self.next = (self.next + 1) % len(pairs)
        return e[0], e[1]


def _fresh_outputs(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(a), torch.empty((a.shape[0], a.shape[2]), dtype=a.dtype, device=a.device)


def _small_outputs(a: torch.Tensor, key: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    if not _SMALL_POOL:
        return _fresh_outputs(a)
    ring = _RINGS.get(key)
    if ring is None:
        ring = _RINGS[key] = _OutputRing()
    return ring.take(a)


def _small_fast(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """_small_qr for a contiguous, 16-byte aligned CUDA batch, launched through the compiled kernel's own launcher
    once the first call has compiled it: Triton's binder (argument specialisation, cache key) costs more CPU time
    than the whole 20x32 factorisation takes on the GPU. The launcher is keyed by everything the kernel was
    specialised on (shape, so strides; device); pointers are fresh allocations or the start of one."""
    b, m, n = a.shape
    key = (b, m, n, a.device)
    ent = _LAUNCHERS.get(key)
    if ent is False:
        return _small_qr(a)
    h, tau = _small_outputs(a, key)
    if ent is None:
        kernel, ptrs, ints, meta, warps = _small_args(a, h, tau)
        k = kernel[(b,)](*ptrs, *ints, **meta, num_warps=warps)
        ent = _runner(kernel, k, (b,), len(ptrs) + len(ints), meta)
        if ent:
            launch, tail = ent
            rest = (*ints, *tail)
            extra = len(ptrs) - 3  # the unused pointer slots, filled with h as in the first launch
            try:  # the same launch again, so that a launcher this file does not know fails here, not later
                launch(a, h, tau, *(h,) * extra, *rest)
                ent = (launch, extra, rest)
            except (TypeError, ValueError, RuntimeError):
                ent = False
        _LAUNCHERS[key] = ent
    else:
        launch, extra, rest = ent
        launch(a, h, tau, *(h,) * extra, *rest)
    return h, tau


def _runner(kernel, compiled, grid, nargs: int, meta: dict):
    """The compiled kernel's runner for this grid and the constexprs after the first nargs parameters, in signature
    order (from meta or their defaults): what a launch passes after its runtime arguments. False where the compiled
    kernel has no runner (Triton < 3.3)."""
    if not hasattr(compiled, "packed_metadata"):
        return False
    return compiled[(*grid, 1, 1)[:3]], tuple(meta.get(q.name, q.default) for q in kernel.params[nargs:])


def _leaf(p, tau, v, t, vt=None, src=None, held=None):
    """Factor leaf panel view p (b, m, w) in place (from src, if given: same shape, unit column stride); write
    tau (b, w), V view (b, m, w), T view (b, w, w) and, if given, V^T view vt (b, w, m) with unit stride along m.
    held: int32 flags (b,) of matrices already factored (by _cholqr_leaf), left alone."""
    b, m, w = p.shape
    bm, bw = triton.next_power_of_2(m), triton.next_power_of_2(w)
    vts = (0, 0) if vt is None else (vt.stride(0), vt.stride(1))
    s = p if src is None else src
    sp, by_addr = _src_arg(s)
    _tile_qr_kernel[(b,)](
        sp, p, tau, v, t, v if vt is None else vt, tau if held is None else held, m, w, min(m, w), s.stride(0),
        s.stride(1), p.stride(0), p.stride(1), tau.stride(0), v.stride(0), v.stride(1), t.stride(0), t.stride(1),
        *vts, BM=bm, BW=bw, WRITE_VT=True, WRITE_VTT=vt is not None, LEAN=_LEAN, SKIP_HELD=held is not None,
        SRC_ADDR=by_addr,
        num_warps=_warps(bm * bw, _EPT_MANY, _MIN_WARPS_MANY) if b >= _MANY else _warps(bm * bw),
    )  # fmt: skip


def _t_factor(v: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    s = torch.triu(torch.bmm(v.transpose(1, 2), v), 1)
    mmat = s * tau[:, None, :]
    mmat.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    return torch.linalg.solve_triangular(mmat, torch.diag_embed(tau), upper=True, left=False, unitriangular=True)


_PREC = "tf32x3"
_TARGET_PROGRAMS = 264  # ~2 per SM on the H200 (132 SMs)
_GEMM_ON_CPU = False  # tests only: run the Triton GEMMs in the interpreter
_TORCH_GEMM_MIN_TILES = 264  # output tiles (64x64) at which cuBLAS fp32 bmm already fills the GPU
_TRITON_GEMM_MAX_BATCH = 8  # measured: 60x1024 all-Triton 7.42 ms vs cuBLAS 7.26 ms; 8x2048/2x4096 Triton wins
if _HAVE_TRITON:

    @triton.jit
    def _vta_kernel(
        v_ptr, a_ptr, w_ptr, M, K, N, rows_per_split, n_ntiles,
        v_sb, v_sm, a_sb, a_sm, w_sb, w_sk,
        BK: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr, ATOMIC: tl.constexpr, PREC: tl.constexpr,
    ):  # fmt: skip
        """W[b] (+)= V[b, rows of this split]^T A[b, same rows]; V (M, K), A (M, N), W (K, N); unit col strides."""
        pid0 = tl.program_id(0)
        pid_s = tl.program_id(1)
        pid_b = tl.program_id(2).to(tl.int64)
        pid_k = pid0 // n_ntiles
        pid_n = pid0 % n_ntiles
        offs_k = pid_k * BK + tl.arange(0, BK)
        offs_n = pid_n * BN + tl.arange(0, BN)
        kmask = offs_k < K
        nmask = offs_n < N
        m0 = pid_s * rows_per_split
        m1 = tl.minimum(M, m0 + rows_per_split)
        vbase = v_ptr + pid_b * v_sb
        abase = a_ptr + pid_b * a_sb
        acc = tl.zeros([BK, BN], dtype=tl.float32)
        for ms in range(m0, m1, BM):
            offs_m = ms + tl.arange(0, BM)
            mm = offs_m < m1
            v = tl.load(vbase + offs_m[:, None] * v_sm + offs_k[None, :], mask=mm[:, None] & kmask[None, :], other=0.0)
            a = tl.load(abase + offs_m[:, None] * a_sm + offs_n[None, :], mask=mm[:, None] & nmask[None, :], other=0.0)
            if PREC == "tf32x2":  # as the fused kernel: V rounded, the data split
                vr = _tf32_rn(tl.trans(v))
                ah = _tf32_rn(a)
                acc = tl.dot(vr, ah, tl.dot(vr, _tf32_rn(a - ah), acc, input_precision="tf32"), input_precision="tf32")
            else:
                acc += tl.dot(tl.trans(v), a, input_precision=PREC)
        wp = w_ptr + pid_b * w_sb + offs_k[:, None] * w_sk + offs_n[None, :]
        wm = kmask[:, None] & nmask[None, :]
        if ATOMIC:
            tl.atomic_add(wp, acc, mask=wm)
        else:
            tl.store(wp, acc, mask=wm)

    @triton.jit
    def _upd_kernel(
        v_ptr, w_ptr, a_ptr, M, K, N, v_sb, v_sm, w_sb, w_sk, a_sb, a_sm,
        BM: tl.constexpr, BN: tl.constexpr, BKC: tl.constexpr, PREC: tl.constexpr,
    ):  # fmt: skip
        """A[b] -= V[b] W[b]; V (M, K), W (K, N), A (M, N); unit col strides."""
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        pid_b = tl.program_id(2).to(tl.int64)
        offs_m = pid_m * BM + tl.arange(0, BM)
        offs_n = pid_n * BN + tl.arange(0, BN)
        mm = offs_m < M
        nmask = offs_n < N
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for k0 in range(0, K, BKC):
            offs_k = k0 + tl.arange(0, BKC)
            km = offs_k < K
            v = tl.load(v_ptr + pid_b * v_sb + offs_m[:, None] * v_sm + offs_k[None, :],
                        mask=mm[:, None] & km[None, :], other=0.0)  # fmt: skip
            w = tl.load(w_ptr + pid_b * w_sb + offs_k[:, None] * w_sk + offs_n[None, :],
                        mask=km[:, None] & nmask[None, :], other=0.0)  # fmt: skip
            if PREC == "tf32x2":  # V rounded, W split
                vr = _tf32_rn(v)
                wh = _tf32_rn(w)
                acc = tl.dot(vr, wh, tl.dot(vr, _tf32_rn(w - wh), acc, input_precision="tf32"), input_precision="tf32")
            else:
                acc += tl.dot(v, w, input_precision=PREC)
        ap = a_ptr + pid_b * a_sb + offs_m[:, None] * a_sm + offs_n[None, :]
        am = mm[:, None] & nmask[None, :]
        a = tl.load(ap, mask=am, other=0.0)
        tl.store(ap, a - acc, mask=am)


_FUSED = True  # batch-rich updates by the one fused kernel (else the parent's cuBLAS bmm)
# "tf32x2": two TF32 products, one operand split, on the trailing updates of n >= _X2_MIN_N (fused_wy_x2, run
# 91f17483358c, H200: 640x512 -6 to -8%, 60x1024 -6% against this file's tf32x3 on the same card); else "tf32x3"
_FUSED_PREC = "tf32x2"
# The gates scale with n (20 n eps32 ||A||_1), tf32x2's error does not: at n = 160 it fails rowscale (interpreted),
# at 512 and 1024 it stays under about half the gate (scripts/tf32_update_study.py, emulated on the CPU).
_X2_MIN_N = 512
_FUSED_BM = 64  # rows per step
_FUSED_BN = 64  # columns of A2 per program
_FUSED_WARPS = 4
_FUSED_STAGES = 3  # measured (wy_update_bench, H200): 640x512x448 950 us vs 1,045 with 2
_FUSED_MIN_PROGRAMS = 264  # batch x column tiles at least (else cuBLAS: too few programs for 132 SMs)
_FUSED_MIN_BATCH = 32  # batches this large take the fused kernel whatever their tiles (0: off; 60x1024 -7%)
_FUSED_VT = True  # trailing updates read a transposed copy of V in phase 1 (measured: fused_wy_vt, run d42688781019)
_SRC_FIRST = True  # the first outer panel reads the input, so H needs no copy of A (fused_wy_src, run ad8502b53bf3)

if _HAVE_TRITON:

    @triton.jit
    def _tf32_rn(x):
        """x rounded to the nearest TF32 value (ties away from zero, as cvt.rna.tf32.f32), held in a float32: a tf32
        dot of such values is exact where one of raw float32 values truncates them."""
        return ((x.to(tl.int32, bitcast=True) + 0x1000) & -8192).to(tl.float32, bitcast=True)

    @triton.jit
    def _dot_tf32x2(a, b, acc):
        """acc + a @ b as two TF32 products ("tf32x2"): b rounded, a split into a rounded head and tail. Half plain
        TF32's error (scripts/tf32_update_study.py), two products where tf32x3 takes three."""
        br = _tf32_rn(b)
        ah = _tf32_rn(a)
        acc = tl.dot(_tf32_rn(a - ah), br, acc, input_precision="tf32")
        return tl.dot(ah, br, acc, input_precision="tf32")

    @triton.jit
    def _wy_fused_kernel(
        v_ptr, t_ptr, a_ptr, M, N, K, v_sb, v_sm, t_sb, t_sk, a_sb, a_sm,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr, STAGES: tl.constexpr,
    ):  # fmt: skip
        """A[b][:, tile] -= V[b] (T[b]^T (V[b]^T A[b][:, tile])); V (M, K), T (K, K), A (M, N); unit col strides."""
        pid_n = tl.program_id(0)
        pid_b = tl.program_id(1).to(tl.int64)
        offs_n = pid_n * BN + tl.arange(0, BN)
        offs_k = tl.arange(0, BK)
        nmask = offs_n < N
        kmask = offs_k < K
        vbase = v_ptr + pid_b * v_sb
        abase = a_ptr + pid_b * a_sb
        w = tl.zeros([BK, BN], dtype=tl.float32)
        for m0 in tl.range(0, M, BM, num_stages=STAGES):
            offs_m = m0 + tl.arange(0, BM)
            mm = offs_m < M
            v = tl.load(vbase + offs_m[:, None] * v_sm + offs_k[None, :], mask=mm[:, None] & kmask[None, :], other=0.0)
            a = tl.load(abase + offs_m[:, None] * a_sm + offs_n[None, :], mask=mm[:, None] & nmask[None, :], other=0.0)
            w = tl.dot(tl.trans(v), a, w, input_precision=PREC)
        # T^T as a (BK, BK) tile: tt[i, j] = T[j, i]
        tt = tl.load(t_ptr + pid_b * t_sb + offs_k[None, :] * t_sk + offs_k[:, None],
                     mask=kmask[:, None] & kmask[None, :], other=0.0)  # fmt: skip
        w2 = tl.dot(tt, w, input_precision=PREC)
        for m0 in tl.range(0, M, BM, num_stages=STAGES):
            offs_m = m0 + tl.arange(0, BM)
            mm = offs_m < M
            v = tl.load(vbase + offs_m[:, None] * v_sm + offs_k[None, :], mask=mm[:, None] & kmask[None, :], other=0.0)
            ap = abase + offs_m[:, None] * a_sm + offs_n[None, :]
            am = mm[:, None] & nmask[None, :]
            a = tl.load(ap, mask=am, other=0.0)
            a = a - tl.dot(v, w2, input_precision=PREC)
            tl.store(ap, a, mask=am)

    @triton.jit
    def _wy_fused_vt_kernel(
        v_ptr, vt_ptr, t_ptr, a_ptr, s_ptr, M, N, K, v_sb, v_sm, vt_sb, vt_sk, t_sb, t_sk, a_sb, a_sm, s_sb, s_sm,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr, STAGES: tl.constexpr,
        SRC_ADDR: tl.constexpr = False,
    ):  # fmt: skip
        """_wy_fused_kernel with phase 1 as W^T = A^T V from a transposed copy V^T (K, M): the V tile is then a
        K-major operand in shared memory, as tf32 wgmma wants, and the A tile goes in registers. A2 is read from
        s_ptr and written to a_ptr (the same matrix but on the first panel, where s_ptr is the input). SRC_ADDR:
        as in _tile_qr_kernel, for s_ptr."""
        if SRC_ADDR:
            s_ptr = tl.multiple_of(tl.load(s_ptr).to(tl.pointer_type(tl.float32)), 16)
        pid_n = tl.program_id(0)
        pid_b = tl.program_id(1).to(tl.int64)
        offs_n = pid_n * BN + tl.arange(0, BN)
        offs_k = tl.arange(0, BK)
        nmask = offs_n < N
        kmask = offs_k < K
        abase = a_ptr + pid_b * a_sb
        sbase = s_ptr + pid_b * s_sb
        wt = tl.zeros([BN, BK], dtype=tl.float32)
        for m0 in tl.range(0, M, BM, num_stages=STAGES):
            offs_m = m0 + tl.arange(0, BM)
            mm = offs_m < M
            vt = tl.load(vt_ptr + pid_b * vt_sb + offs_k[:, None] * vt_sk + offs_m[None, :],
                         mask=kmask[:, None] & mm[None, :], other=0.0)  # fmt: skip
            a = tl.load(sbase + offs_m[:, None] * s_sm + offs_n[None, :], mask=mm[:, None] & nmask[None, :], other=0.0)
            if PREC == "tf32x2":
                wt = _dot_tf32x2(tl.trans(a), tl.trans(vt), wt)
            else:
                wt = tl.dot(tl.trans(a), tl.trans(vt), wt, input_precision=PREC)
        w = tl.trans(wt)
        tt = tl.load(t_ptr + pid_b * t_sb + offs_k[None, :] * t_sk + offs_k[:, None],
                     mask=kmask[:, None] & kmask[None, :], other=0.0)  # fmt: skip
        if PREC == "tf32x2":
            w2 = -tl.dot(tt, w, input_precision="tf32x3")  # negated: the update is then one accumulation
            w2h = _tf32_rn(w2)
            w2l = _tf32_rn(w2 - w2h)
        else:
            w2 = tl.dot(tt, w, input_precision=PREC)
        vbase = v_ptr + pid_b * v_sb
        for m0 in tl.range(0, M, BM, num_stages=STAGES):
            offs_m = m0 + tl.arange(0, BM)
            mm = offs_m < M
            v = tl.load(vbase + offs_m[:, None] * v_sm + offs_k[None, :], mask=mm[:, None] & kmask[None, :], other=0.0)
            ap = abase + offs_m[:, None] * a_sm + offs_n[None, :]
            am = mm[:, None] & nmask[None, :]
            a = tl.load(sbase + offs_m[:, None] * s_sm + offs_n[None, :], mask=am, other=0.0)
            if PREC == "tf32x2":
                vr = _tf32_rn(v)
                a = tl.dot(vr, w2h, tl.dot(vr, w2l, a, input_precision="tf32"), input_precision="tf32")
            else:
                a = a - tl.dot(v, w2, input_precision=PREC)
            tl.store(ap, a, mask=am)


# On by default since run 89a5b2574255 (the three together as knob variant fused_wy_ltr: 3,208 us against 3,276).
_LEAF_VT = True  # leaf kernels write V^T; every fused update reads it (no torch transpose copy per panel)
_T_BUILD = True  # batch-rich panels: outer T by one kernel (Gram + blockwise merge) instead of ~4 launches per leaf
_REUSE = True  # V, V^T and T buffers zeroed once per factorization, not once per outer panel
_TB_PREC = "tf32x3"
_T_TREE = False  # the T builder merges the leaf T's pairwise, 16 -> 32 -> 64 (two products a level), not one leaf
# after another (two products a leaf): 4 dependent products instead of 6 at 16-wide leaves, 6 instead of 14 at 8

if _HAVE_TRITON:

    @triton.jit
    def _t_build_kernel(
        v_ptr, t_ptr, M, K, v_sb, v_sm, t_sb, t_sk,
        BM: tl.constexpr, BK: tl.constexpr, NB: tl.constexpr, PREC: tl.constexpr, LEVELS: tl.constexpr,
    ):  # fmt: skip
        """Outer T (K x K) of matrix program_id(0) from V (M x K) and the leaf T's on T's diagonal blocks (width
        NB): G = V^T V over all rows, then per block c0: T[:c0, c0:c0+NB] = -T[:c0, :c0] G[:c0, blk] T[blk, blk]
        (LAPACK dlarft, blockwise), in registers; writes the whole K x K tile (zeros below the blocks).
        LEVELS > 0 (BK = NB * 2^LEVELS): the blocks merged in pairs instead, level by level (width s -> 2s): with T
        block diagonal at width s, the off-diagonal block of every pair (A, B) is -T_A G_AB T_B = -(T X T)_AB, where
        X is G on those blocks alone."""
        pid_b = tl.program_id(0).to(tl.int64)
        r = tl.arange(0, BK)
        kmask = r < K
        vbase = v_ptr + pid_b * v_sb
        g = tl.zeros([BK, BK], dtype=tl.float32)
        for m0 in range(0, M, BM):
            offs_m = m0 + tl.arange(0, BM)
            v = tl.load(vbase + offs_m[:, None] * v_sm + r[None, :], mask=(offs_m < M)[:, None] & kmask[None, :],
                        other=0.0)  # fmt: skip
            g = tl.dot(tl.trans(v), v, g, input_precision=PREC)
        tbase = t_ptr + pid_b * t_sb + r[:, None] * t_sk + r[None, :]
        inb = (r[:, None] // NB == r[None, :] // NB) & (r[:, None] <= r[None, :]) & kmask[:, None] & kmask[None, :]
        t = tl.load(tbase, mask=inb, other=0.0)
        for lvl in tl.static_range(LEVELS):
            blk_r, blk_c = r[:, None] // (NB << lvl), r[None, :] // (NB << lvl)
            pair = (blk_r % 2 == 0) & (blk_c == blk_r + 1)
            z = tl.dot(tl.dot(t, tl.where(pair, g, 0.0), input_precision=PREC), t, input_precision=PREC)
            t = tl.where(pair, -z, t)
        for c0 in tl.static_range(NB, NB if LEVELS > 0 else BK, NB):
            blkc = (r >= c0) & (r < c0 + NB)
            top = tl.where((r[:, None] < c0) & (r[None, :] < c0), t, 0.0)
            x = tl.where((r[:, None] < c0) & blkc[None, :], g, 0.0)
            d = tl.where(blkc[:, None] & blkc[None, :], t, 0.0)
            z = tl.dot(tl.dot(top, x, input_precision=PREC), d, input_precision=PREC)
            t = tl.where((r[:, None] < c0) & blkc[None, :], -z, t)
        tl.store(tbase, t, mask=kmask[:, None] & kmask[None, :])

    @triton.jit
    def _t_merge_kernel(
        g_ptr, t_ptr, K, g_sb, g_sr, t_sb, t_sr, NB: tl.constexpr, NBLK: tl.constexpr, PREC: tl.constexpr
    ):
        """Row block program_id(1) of matrix program_id(0)'s outer T (K x K, leaf T's on its diagonal blocks of
        width NB) from the Gram G = V^T V: T[i, j] = -(sum over i <= k < j of T[i, k] G[k, j]) T[j, j] for each
        j > i in turn (_t_merge_'s blockwise dlarft). A block reads only its own row's earlier blocks, so the row
        blocks are independent programs; each reads back what it wrote, after a barrier."""
        b = tl.program_id(0).to(tl.int64)
        i = tl.program_id(1)
        g_ptr += b * g_sb
        t_ptr += b * t_sb
        r = tl.arange(0, NB)
        rows = i * NB + r
        rmask = rows < K
        for j in range(i + 1, NBLK):
            cols = j * NB + r
            cmask = cols < K
            acc = tl.zeros((NB, NB), dtype=tl.float32)
            for k in range(i, j):
                ks = k * NB + r  # k < j: a whole block
                tik = tl.load(t_ptr + rows[:, None] * t_sr + ks[None, :], mask=rmask[:, None], other=0.0)
                gkj = tl.load(g_ptr + ks[:, None] * g_sr + cols[None, :], mask=cmask[None, :], other=0.0)
                acc = tl.dot(tik, gkj, acc, input_precision=PREC)
            tjj = tl.load(t_ptr + cols[:, None] * t_sr + cols[None, :], mask=cmask[:, None] & cmask[None, :], other=0.0)
            out = -tl.dot(acc, tjj, input_precision=PREC)
            tl.store(t_ptr + rows[:, None] * t_sr + cols[None, :], out, mask=rmask[:, None] & cmask[None, :])
            tl.debug_barrier()  # the next block of this row reads this one back

    @triton.jit
    def _addr_kernel(x_ptr, slot_ptr, off_ptr, n):
        """slot i = the address of element off[i] of x, for i < n (at most 8): knob _GRAPH_ADDR's slots, pointed at
        the caller's input before a replay."""
        r = tl.arange(0, 8)
        keep = r < n
        offs = tl.load(off_ptr + r, mask=keep, other=0)
        tl.store(slot_ptr + r, x_ptr.to(tl.int64, bitcast=True) + offs * 4, mask=keep)


def _t_build(vo: torch.Tensor, t: torch.Tensor, nb: int) -> torch.Tensor:
    b, m, k = vo.shape
    bk = max(16, triton.next_power_of_2(k))
    _t_build_kernel[(b,)](
        vo, t, m, k, vo.stride(0), vo.stride(1), t.stride(0), t.stride(1),
        BM=64, BK=bk, NB=nb, PREC=_TB_PREC, LEVELS=(bk // nb).bit_length() - 1 if _T_TREE else 0, num_warps=4,
    )  # fmt: skip
    return t


def _update_prec(n: int = 0) -> str:
    """The WY updates' products (the fused kernel's, and the split route's _vta/_upd): _FUSED_PREC, but tf32x3 in
    tf32x2's place except for the trailing updates of a matrix of n >= _X2_MIN_N columns (n 0: any other update)."""
    return "tf32x3" if _FUSED_PREC == "tf32x2" and n < _X2_MIN_N else _FUSED_PREC


def _fused_bn(n: int) -> int:
    return max(16, min(_FUSED_BN, triton.next_power_of_2(n)))


def _fused_pays(b: int, n: int) -> bool:
    many = 0 < _FUSED_MIN_BATCH <= b
    return n > 0 and (many or b * triton.cdiv(n, _fused_bn(n)) >= _FUSED_MIN_PROGRAMS)


def _use_fused(a2: torch.Tensor, v: torch.Tensor, t: torch.Tensor) -> bool:
    b, m, n = a2.shape
    k = v.shape[2]
    return (
        _FUSED and _HAVE_TRITON and (a2.is_cuda or _GEMM_ON_CPU) and m > 0 and n > 0 and 0 < k <= 128
        and a2.stride(2) == 1 and v.stride(2) == 1 and t.stride(2) == 1
        and _fused_pays(b, n)
    )  # fmt: skip


def _apply_qt_fused_(a2: torch.Tensor, v: torch.Tensor, t: torch.Tensor, prec: str | None = None) -> None:
    b, m, n = a2.shape
    k = v.shape[2]
    bn = _fused_bn(n)
    bk = max(16, triton.next_power_of_2(k))
    _wy_fused_kernel[(triton.cdiv(n, bn), b)](
        v, t, a2, m, n, k, v.stride(0), v.stride(1), t.stride(0), t.stride(1), a2.stride(0), a2.stride(1),
        BM=_FUSED_BM, BN=bn, BK=bk, PREC=prec or _update_prec(), STAGES=_FUSED_STAGES, num_warps=_FUSED_WARPS,
    )  # fmt: skip


def _apply_qt_torch_(a2: torch.Tensor, v: torch.Tensor, t: torch.Tensor) -> None:
    wmat = torch.bmm(t.transpose(1, 2), torch.bmm(v.transpose(1, 2), a2))
    a2.baddbmm_(v, wmat, alpha=-1.0)


def _apply_qt_vt_(a2: torch.Tensor, v: torch.Tensor, vt: torch.Tensor, t: torch.Tensor, src, prec: str) -> None:
    """As _apply_qt_fused_, phase 1 from vt = V^T (b, k, m), unit stride along m; a2 is read from src if given
    (same shape, unit stride along columns), else from itself. prec: the products' precision (_update_prec)."""
    b, m, n = a2.shape
    k = v.shape[2]
    bn = _fused_bn(n)
    bk = max(16, triton.next_power_of_2(k))
    s = a2 if src is None else src
    sp, by_addr = _src_arg(s)
    _wy_fused_vt_kernel[(triton.cdiv(n, bn), b)](
        v, vt, t, a2, sp, m, n, k, v.stride(0), v.stride(1), vt.stride(0), vt.stride(1), t.stride(0), t.stride(1),
        a2.stride(0), a2.stride(1), s.stride(0), s.stride(1), BM=_FUSED_BM, BN=bn, BK=bk, PREC=prec,
        STAGES=_FUSED_STAGES, SRC_ADDR=by_addr, num_warps=_FUSED_WARPS,
    )  # fmt: skip


def _vta_splitk(v: torch.Tensor, a2: torch.Tensor, prec: str | None = None) -> torch.Tensor:
    """W = V^T a2 per matrix by the split-K Triton kernel (rows split over programs, fp32 atomics); prec: its
    products' precision (default _PREC)."""
    b, m, n = a2.shape
    k = v.shape[2]
    bk = min(64, max(16, triton.next_power_of_2(k)))
    bn = 64
    bm = 64
    ktiles = triton.cdiv(k, bk)
    ntiles = triton.cdiv(n, bn)
    base = ktiles * ntiles * b
    splits = max(1, min(triton.cdiv(m, 4 * bm), triton.cdiv(_TARGET_PROGRAMS, base)))
    rps = triton.cdiv(triton.cdiv(m, splits), bm) * bm
    splits = triton.cdiv(m, rps)
    atomic = splits > 1
    w = (torch.zeros if atomic else torch.empty)((b, k, n), dtype=a2.dtype, device=a2.device)
    _vta_kernel[(ktiles * ntiles, splits, b)](
        v, a2, w, m, k, n, rps, ntiles, v.stride(0), v.stride(1), a2.stride(0), a2.stride(1),
        w.stride(0), w.stride(1), BK=bk, BN=bn, BM=bm, ATOMIC=atomic, PREC=prec or _PREC, num_warps=4, num_stages=3,
    )  # fmt: skip
    return w


def _apply_qt_(a2: torch.Tensor, v: torch.Tensor, t: torch.Tensor, prec: str | None = None) -> None:
    """a2 <- (I - V T V^T)^T a2 = a2 - V (T^T (V^T a2)); prec: the Triton products' precision (_update_prec; by
    default the intra-panel one), cuBLAS stays float32."""
    if _use_fused(a2, v, t):
        _apply_qt_fused_(a2, v, t, prec)
        return
    b, m, n = a2.shape
    k = v.shape[2]
    big = True
    if _HAVE_TRITON:
        big = b > _TRITON_GEMM_MAX_BATCH or b * triton.cdiv(n, 64) * triton.cdiv(k, 64) >= _TORCH_GEMM_MIN_TILES
    if (
        big or _PREC == "torch" or not (a2.is_cuda or _GEMM_ON_CPU) or not _HAVE_TRITON
        or a2.stride(2) != 1 or v.stride(2) != 1 or n == 0 or m == 0
    ):  # fmt: skip
        _apply_qt_torch_(a2, v, t)
        return
    w = _vta_splitk(v, a2, prec)
    w2 = torch.bmm(t.transpose(1, 2), w)
    bkc = min(32, max(16, triton.next_power_of_2(k)))
    _upd_kernel[(triton.cdiv(m, 64), triton.cdiv(n, 64), b)](
        v, w2, a2, m, k, n, v.stride(0), v.stride(1), w2.stride(0), w2.stride(1), a2.stride(0), a2.stride(1),
        BM=64, BN=64, BKC=bkc, PREC=prec or _PREC, num_warps=4, num_stages=3,
    )  # fmt: skip


def _leaf_width(rows: int, batch: int) -> int:
    bm = triton.next_power_of_2(rows)
    if batch >= _MANY:
        elems = _LEAF_ELEMS_MANY
    else:
        elems = _LEAF_ELEMS_FEW if batch < _FEW_BATCH and bm <= 512 else _LEAF_ELEMS
    return max(8, min(32, elems // bm))


_COOP = True
_COOP_NB = 32  # leaf width on the cooperative route
_COOP_MIN_ROWS = 1024  # leaf panels at least this tall (and few matrices) go cooperative
_COOP_MIN_BM = 64  # rows per program at least (fused_wy_coopbm64: 2x4096 22.6 -> 22.0 ms, 64 per matrix)
_COOP_MIN_PER = 4  # programs per matrix at least (measured: 60x1024 with 2 per matrix 7.58 ms vs 7.39 without)
_COOP_MAX_ELEMS = 16384  # rows per program x leaf width
_COOP_TAGGED = True  # the step's barrier by the partials themselves (a sentinel fill), not a counter
# warps of a cooperative leaf program; 0: by its tile (_warps: 2 on 2x4096 and 8x2048). At 2x4096's leaf (64 rows a
# program, 64 partial slots) ptxas sm_90a (Triton 3.6) gives 2 warps 255 registers and 1,856 SASS instructions, 4
# warps 143 and 1,224: a warp's share of each step's reductions halves.
# Measured (H100, paired, session 55): 4 warps 8x2048 0.955 and 2x4096 0.881 against 2; 8 warps 1.09 and 1.19 against 4
_COOP_WARPS = 4
_NSM: dict = {}


def _num_sms(dev) -> int:
    if dev not in _NSM:
        _NSM[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    return _NSM[dev]


def _coop_plan(a: torch.Tensor, mo: int, force: bool = False):
    """(programs per matrix, rows per program) for a cooperative leaf, or None."""
    if not (_COOP and a.is_cuda and _HAVE_TRITON) or (mo < _COOP_MIN_ROWS and not force):
        return None
    return _coop_shape(a.shape[0], mo, _num_sms(a.device))


def _coop_shape(b: int, mo: int, nsm: int):
    """_coop_plan's split of b leaf panels of mo rows over nsm SMs, or None. One program an SM: they spin on each
    other, so all must be resident (two an SM lost: 8x2048 +3%, 60x1024 +11%, session 56)."""
    per = nsm // b
    if per < _COOP_MIN_PER:
        return None
    nprog = min(triton.cdiv(mo, _COOP_MIN_BM), per)
    bm = triton.next_power_of_2(triton.cdiv(mo, nprog))
    nprog = triton.cdiv(mo, bm)
    if nprog < 2 or bm * _COOP_NB > _COOP_MAX_ELEMS:
        return None
    return nprog, bm


def _coop_leaf(p, tau, v, t, nprog, bm, held=None):
    b, m, w = p.shape
    pp = triton.next_power_of_2(nprog)
    bw = triton.next_power_of_2(w)
    kmax = min(m, w)
    if _COOP_TAGGED:  # every partial starts as the sentinel; no counters
        part = torch.full((b, kmax, pp, 2 * bw), _SENTINEL_BITS, dtype=torch.int32, device=p.device).view(torch.float32)
        cnt = part
    else:
        part = torch.empty((b, kmax, pp, 2 * bw), dtype=torch.float32, device=p.device)
        cnt = torch.zeros((b, kmax), dtype=torch.int32, device=p.device)
    _coop_leaf_kernel[(nprog, b)](
        p, tau, v, t, part, cnt, tau if held is None else held, m, w, kmax, nprog, p.stride(0), p.stride(1),
        tau.stride(0), v.stride(0), v.stride(1), t.stride(0), t.stride(1), part.stride(0), cnt.stride(0),
        BM=bm, BW=bw, PP=pp, LEAN=_LEAN_COOP, TAGGED=_COOP_TAGGED, SKIP_HELD=held is not None,
        num_warps=_COOP_WARPS or _warps(bm * bw),
    )  # fmt: skip


# ---- the CholeskyQR2 leaf (knob _CHOLQR; numerics: scripts/cholqr_leaf_study.py) ----
# A leaf panel's Q by two Cholesky passes over its Gram (a few row-block launches and two one-program-per-matrix
# steps, instead of two cross-program reductions per column), then the Householder form rebuilt from Q by an
# unpivoted LU of E - Q S, each sign in S chosen so that every pivot is at least 1. A panel whose Cholesky fails or
# whose second Gram is off the identity by _CHOLQR_GRAM_TOL or more (rank-deficient, near-rank, clustered inputs)
# is left as it was, and the Householder leaf factors that matrix (its SKIP_HELD).

# off: slower wherever screened, 7-11% on 2x4096 and 8x2048 (sessions 35, 38), 14-51% on 640x512 and 60x1024 with
# _CHOLQR_MIN_BATCH=32 (session 47, kernels/NOTES.md)
_CHOLQR = False
_CHOLQR_MIN_ROWS = 1024  # outer panels at least this tall take it (with leaves _CHOLQR_NB wide)
_CHOLQR_MIN_BATCH = 1  # ... in batches at least this large
_CHOLQR_NB = 32  # 16 or 32 (its tl.dot tiles); a narrower last leaf takes the Householder leaf
_CHOLQR_BM = 128  # rows per program of its row-block kernels
_CHOLQR_WARPS = 4  # of its two one-program-per-matrix kernels (chains of reductions over a K x K tile)
_CHOLQR_PREC = "ieee"  # the Gram products: a Cholesky squares the panel's condition number
_CHOLQR_GRAM_TOL = 0.1  # max |Q1^T Q1 - I| after the first pass at which the second still reaches float32

if _HAVE_TRITON:

    @triton.jit
    def _cq_gram_kernel(x_ptr, x_sb, x_sr, m, part_ptr, BM: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr):
        """One block of rows of one matrix's panel: its share X^T X of the Gram, as a partial (no atomics, so the
        sum is the same in every run)."""
        b, blk = tl.program_id(0).to(tl.int64), tl.program_id(1)
        rows = blk * BM + tl.arange(0, BM)
        cols = tl.arange(0, K)
        x = tl.load(x_ptr + b * x_sb + rows[:, None] * x_sr + cols[None, :], mask=(rows < m)[:, None], other=0.0)
        g = tl.dot(tl.trans(x), x, input_precision=PREC)
        tl.store(part_ptr + (b * tl.num_programs(1) + blk) * K * K + cols[:, None] * K + cols[None, :], g)

    @triton.jit
    def _cq_sum_parts(part_ptr, b, nblk, K: tl.constexpr):
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        g = tl.zeros((K, K), dtype=tl.float32)
        for blk in range(nblk):
            g += tl.load(part_ptr + (b * nblk + blk) * K * K + ri[:, None] * K + ci[None, :])
        return g

    @triton.jit
    def _cq_unit_inverse(n, K: tl.constexpr, PREC: tl.constexpr):
        """(I + N)^-1 for N strictly triangular (K <= 32, so N^32 = 0) as (I - N)(I + N^2)(I + N^4)(I + N^8)
        (I + N^16): eight K x K products, no chain of K dependent reductions as a substitution takes."""
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        eye = tl.where(ri[:, None] == ci[None, :], 1.0, 0.0)
        inv = eye - n
        p = n
        for _ in tl.static_range(4):
            p = tl.dot(p, p, input_precision=PREC)
            inv = tl.dot(inv, eye + p, input_precision=PREC)
        return inv

    @triton.jit
    def _cq_cholesky_inverse(g, K: tl.constexpr, PREC: tl.constexpr):
        """Upper R with R^T R = g, W = R^-1, and whether every pivot was positive and finite: an elimination of g
        without pivoting (three reductions a step: the row, the column, the pivot) makes D^(1/2) R; W comes after
        the loop from products (_cq_unit_inverse), where carrying [g | I] took a fourth reduction a step."""
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        piv_r = tl.zeros((K,), dtype=tl.float32)
        piv_c = tl.zeros((K,), dtype=tl.float32)
        ok = True
        for j in range(K):
            row = tl.sum(tl.where(ri[:, None] == j, g, 0.0), axis=0)
            col = tl.sum(tl.where(ci[None, :] == j, g, 0.0), axis=1)
            d = tl.sum(tl.where(ci == j, row, 0.0))
            ok = ok & (d > 0) & (d < float("inf"))
            g = g - tl.where(ri > j, col / d, 0.0)[:, None] * row[None, :]  # rows above j are final
            piv_r = tl.where(ri == j, d, piv_r)
            piv_c = tl.where(ci == j, d, piv_c)
        upper = ci[None, :] > ri[:, None]  # below the diagonal: rounding, not R
        r = tl.where(upper | (ci[None, :] == ri[:, None]), g / tl.sqrt(tl.maximum(piv_r, 1e-30))[:, None], 0.0)
        # R = D^(1/2) (I + N) with N = D^-1 times g's part above the diagonal, so W = (I + N)^-1 D^(-1/2)
        w = _cq_unit_inverse(tl.where(upper, g / tl.maximum(piv_r, 1e-30)[:, None], 0.0), K, PREC)
        return r, w / tl.sqrt(tl.maximum(piv_c, 1e-30))[None, :], ok

    @triton.jit
    def _cq_first_kernel(part_ptr, nblk, w_ptr, r_ptr, ok_ptr, K: tl.constexpr, PREC: tl.constexpr):
        """One program per matrix: the Gram's Cholesky R1 and W1 = R1^-1."""
        b = tl.program_id(0).to(tl.int64)
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        r, w, ok = _cq_cholesky_inverse(_cq_sum_parts(part_ptr, b, nblk, K), K, PREC)
        at = b * K * K + ri[:, None] * K + ci[None, :]
        tl.store(w_ptr + at, w)
        tl.store(r_ptr + at, r)
        tl.store(ok_ptr + b, ok.to(tl.int32))

    @triton.jit
    def _cq_apply_kernel(
        x_ptr, x_sb, x_sr, m, w_ptr, q_ptr, part_ptr, BM: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr
    ):
        """Q1 = X W1 for one block of rows, and that block's share of the second Gram Q1^T Q1."""
        b, blk = tl.program_id(0).to(tl.int64), tl.program_id(1)
        rows = blk * BM + tl.arange(0, BM)
        cols = tl.arange(0, K)
        live = (rows < m)[:, None]
        x = tl.load(x_ptr + b * x_sb + rows[:, None] * x_sr + cols[None, :], mask=live, other=0.0)
        q = tl.dot(x, tl.load(w_ptr + b * K * K + cols[:, None] * K + cols[None, :]), input_precision=PREC)
        tl.store(q_ptr + b * m * K + rows[:, None] * K + cols[None, :], q, mask=live)
        g = tl.dot(tl.trans(q), q, input_precision=PREC)
        tl.store(part_ptr + (b * tl.num_programs(1) + blk) * K * K + cols[:, None] * K + cols[None, :], g)

    @triton.jit
    def _cq_second_kernel(
        part_ptr, nblk, q_ptr, m, r1_ptr, ok_ptr, z_ptr, h_ptr, tau_ptr, v_ptr, t_ptr, vt_ptr,
        h_sb, h_sr, tau_sb, v_sb, v_sr, t_sb, t_sr, vt_sb, vt_sk,
        K: tl.constexpr, GRAM_TOL: tl.constexpr, PREC: tl.constexpr, WRITE_VTT: tl.constexpr,
    ):  # fmt: skip
        """One program per matrix: the second Cholesky (R2, W2), R = R2 R1, the top block of Q = Q1 W2 and its
        signed LU (E - Q S = Y U); where the panel held, the top K rows of H (Y below the diagonal, S R on and
        above it) and of V (and V^T), T = U Y1^-T and tau (T's diagonal); for every matrix Z = -W2 S U^-1, which
        turns the rows of Q1 below the top block into those of Y, and the flag."""
        b = tl.program_id(0).to(tl.int64)
        ri, ci = tl.arange(0, K), tl.arange(0, K)
        at = b * K * K + ri[:, None] * K + ci[None, :]
        g2 = _cq_sum_parts(part_ptr, b, nblk, K)
        near = tl.max(tl.max(tl.abs(g2 - tl.where(ri[:, None] == ci[None, :], 1.0, 0.0)), axis=1), axis=0)
        r2, w2, ok = _cq_cholesky_inverse(g2, K, PREC)
        ok = ok & (near < GRAM_TOL) & (tl.load(ok_ptr + b) != 0)
        r = tl.dot(r2, tl.load(r1_ptr + at), input_precision=PREC)
        qt = tl.dot(tl.load(q_ptr + b * m * K + ri[:, None] * K + ci[None, :]), w2, input_precision=PREC)
        u = tl.zeros((K, K), dtype=tl.float32)  # U's rows as the LU makes them, before the signs above its diagonal
        y1 = tl.zeros((K, K), dtype=tl.float32)
        s_row = tl.zeros((K,), dtype=tl.float32)  # the signs along columns
        s_col = tl.zeros((K,), dtype=tl.float32)  # ... and along rows
        # The LU alone in the loop (three reductions a step); T and U^-1 come after it from products, where solving
        # for their columns inside the loop took five more reductions a step.
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
        diag = ri[:, None] == ci[None, :]
        above = ri[:, None] < ci[None, :]
        # U as it ends: above the diagonal column j's sign flipped by s_j, the pivots (at least 1) on the diagonal
        uf = tl.where(above, -s_row[None, :] * u, tl.where(diag, u, 0.0))
        piv_c = tl.sum(tl.where(diag, u, 0.0), axis=0)
        piv_r = tl.sum(tl.where(diag, u, 0.0), axis=1)
        # T Y1^T = U, so T = U Y1^-T; U = (I + N) D with N = U's part above the diagonal over its column's pivot
        t = tl.dot(uf, tl.trans(_cq_unit_inverse(tl.where(ri[:, None] > ci[None, :], y1, 0.0), K, PREC)),
                   input_precision=PREC)  # fmt: skip
        ui = _cq_unit_inverse(tl.where(above, uf / piv_c[None, :], 0.0), K, PREC) / piv_r[:, None]
        tl.store(z_ptr + at, -tl.dot(w2 * s_row[None, :], ui, input_precision=PREC))
        tl.store(ok_ptr + b, ok.to(tl.int32))
        keep = (ri[:, None] < K) & ok  # a panel that did not hold stays as it was, for the Householder leaf
        tl.store(h_ptr + b * h_sb + ri[:, None] * h_sr + ci[None, :], tl.where(ci[None, :] < ri[:, None], y1,
                 s_col[:, None] * r), mask=keep)  # fmt: skip
        tl.store(v_ptr + b * v_sb + ri[:, None] * v_sr + ci[None, :], y1, mask=keep)
        if WRITE_VTT:
            tl.store(vt_ptr + b * vt_sb + ci[None, :] * vt_sk + ri[:, None], y1, mask=keep)
        tl.store(t_ptr + b * t_sb + ri[:, None] * t_sr + ci[None, :], t, mask=keep)
        tau = tl.sum(tl.where(ri[:, None] == ci[None, :], t, 0.0), axis=0)
        tl.store(tau_ptr + b * tau_sb + ci, tau, mask=(ci < K) & ok)

    @triton.jit
    def _cq_rows_kernel(
        q_ptr, m, z_ptr, ok_ptr, h_ptr, v_ptr, vt_ptr, h_sb, h_sr, v_sb, v_sr, vt_sb, vt_sk,
        BM: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr, WRITE_VTT: tl.constexpr,
    ):  # fmt: skip
        """Rows below the top block, where the panel held: Y = Q1 Z, into H and V (and V^T)."""
        b, blk = tl.program_id(0).to(tl.int64), tl.program_id(1)
        if tl.load(ok_ptr + b) == 0:
            return
        rows = blk * BM + tl.arange(0, BM)
        cols = tl.arange(0, K)
        live = ((rows < m) & (rows >= K))[:, None]
        q = tl.load(q_ptr + b * m * K + rows[:, None] * K + cols[None, :], mask=live, other=0.0)
        y = tl.dot(q, tl.load(z_ptr + b * K * K + cols[:, None] * K + cols[None, :]), input_precision=PREC)
        tl.store(h_ptr + b * h_sb + rows[:, None] * h_sr + cols[None, :], y, mask=live)
        tl.store(v_ptr + b * v_sb + rows[:, None] * v_sr + cols[None, :], y, mask=live)
        if WRITE_VTT:
            tl.store(vt_ptr + b * vt_sb + cols[None, :] * vt_sk + rows[:, None], y, mask=live)


def _cholqr_takes(mo: int, b: int) -> bool:
    """Whether an outer panel of mo rows of a batch of b matrices takes the CholeskyQR2 leaf."""
    return _CHOLQR and mo >= _CHOLQR_MIN_ROWS and b >= _CHOLQR_MIN_BATCH


def _cholqr_leaf(p, tau, v, t, vt=None, src=None, bm=None, prec=None, warps=None) -> torch.Tensor:
    """Leaf panel p (b, m, k), k 16 or 32 and m >= k, as _leaf takes it (the same outputs, from src if given), by
    CholeskyQR2: five launches. Returns int32 flags (b,): 1 where the panel held and was written, 0 where p, tau,
    v, t and vt were left alone for a Householder leaf (`held=`). bm, prec, warps: the knobs' values by default."""
    b, m, k = p.shape
    bm, prec, warps = bm or _CHOLQR_BM, prec or _CHOLQR_PREC, warps or _CHOLQR_WARPS
    x = p if src is None else src
    nblk = triton.cdiv(m, bm)
    f32 = dict(dtype=torch.float32, device=p.device)
    part = torch.empty(b, nblk, k, k, **f32)
    w1, r1, z = (torch.empty(b, k, k, **f32) for _ in range(3))
    q1 = torch.empty(b, m, k, **f32)
    ok = torch.empty(b, dtype=torch.int32, device=p.device)
    vt_ = v if vt is None else vt
    _cq_gram_kernel[(b, nblk)](x, x.stride(0), x.stride(1), m, part, BM=bm, K=k, PREC=prec)
    _cq_first_kernel[(b,)](part, nblk, w1, r1, ok, K=k, PREC=prec, num_warps=warps)
    _cq_apply_kernel[(b, nblk)](x, x.stride(0), x.stride(1), m, w1, q1, part, BM=bm, K=k, PREC=prec)
    _cq_second_kernel[(b,)](
        part, nblk, q1, m, r1, ok, z, p, tau, v, t, vt_, p.stride(0), p.stride(1), tau.stride(0), v.stride(0),
        v.stride(1), t.stride(0), t.stride(1), vt_.stride(0), vt_.stride(1),
        K=k, GRAM_TOL=_CHOLQR_GRAM_TOL, PREC=prec, WRITE_VTT=vt is not None, num_warps=warps,
    )  # fmt: skip
    _cq_rows_kernel[(b, nblk)](
        q1, m, z, ok, p, v, vt_, p.stride(0), p.stride(1), v.stride(0), v.stride(1), vt_.stride(0), vt_.stride(1),
        BM=bm, K=k, PREC=prec, WRITE_VTT=vt is not None,
    )  # fmt: skip
    return ok


_T_MERGE = True  # outer T from the leaf T's (parent: a triangular solve of the whole panel)
# the merge's blocks by one launch (a program per row block; float32 products) instead of two cuBLAS products, a
# negation and a copy per leaf: 2x4096 runs 121 such merges a call, about 1.3 ms of device time in 484 launches
# (profile of e11abefc6b6d, H100). Paired screen (H200, session 50): 8x2048 0.947, 2x4096 0.950.
_T_MERGE_KERNEL = True


def _gram(vo: torch.Tensor) -> torch.Tensor:
    """V^T V (b, w, w): the split-K Triton kernel for few tall matrices (cuBLAS runs K = 4096 on few SMs)."""
    b, m, w = vo.shape
    if (
        _HAVE_TRITON and (vo.is_cuda or _GEMM_ON_CPU) and b <= _TRITON_GEMM_MAX_BATCH and m >= 1024
        and vo.stride(2) == 1 and _PREC != "torch"
    ):  # fmt: skip
        return _vta_splitk(vo, vo)
    return torch.bmm(vo.transpose(1, 2), vo)


def _t_merge_(vo: torch.Tensor, tl_: torch.Tensor, nb: int) -> torch.Tensor:
    """Fill the upper off-diagonal blocks of tl_ (diagonal blocks: the leaf T's, width nb) in place:
    T[:c0, c0:c0+w] = -T[:c0, :c0] (V[:, :c0]^T V[:, c0:c0+w]) T[c0:c0+w, c0:c0+w] (LAPACK dlarft, blockwise);
    the V^T V blocks from one Gram product of the whole panel."""
    b, wo = vo.shape[0], vo.shape[2]
    g = _gram(vo)
    if _T_MERGE_KERNEL and _HAVE_TRITON and (vo.is_cuda or _GEMM_ON_CPU) and nb >= 16 and tl_.stride(2) == 1:
        nblk = triton.cdiv(wo, nb)
        if nblk > 1:
            _t_merge_kernel[(b, nblk - 1)](
                g, tl_, wo, g.stride(0), g.stride(1), tl_.stride(0), tl_.stride(1), NB=nb, NBLK=nblk, PREC="ieee",
            )  # fmt: skip
        return tl_
    for c0 in range(nb, wo, nb):
        w = min(nb, wo - c0)
        tl_[:, :c0, c0 : c0 + w] = -torch.bmm(
            torch.bmm(tl_[:, :c0, :c0], g[:, :c0, c0 : c0 + w]), tl_[:, c0 : c0 + w, c0 : c0 + w]
        )
    return tl_


def _reads_src(a: torch.Tensor, src: torch.Tensor, vo: torch.Tensor, tleaf: torch.Tensor, nb: int) -> bool:
    """Whether the first outer panel's kernels that read the input (its first leaf, that leaf's update of the
    panel and the trailing update) take the routes with a source pointer: the plain leaf (the caller checks) and
    the fused update with V^T; the others work in place only."""
    wo, n = vo.shape[2], a.shape[2]
    w = min(nb, wo)
    intra = w == wo or _use_fused(a[:, :, w:wo], vo[:, :, :w], tleaf[:, :w, :w])
    trailing = wo == n or (_FUSED_VT and _use_fused(a[:, :, wo:], vo, tleaf))
    return intra and trailing and src.shape == a.shape and src.stride(2) == 1


def _panel_wy_qr_(a: torch.Tensor, nbo: int, src: torch.Tensor | None = None) -> torch.Tensor:
    """Factor a in place; with src (the input, a's shape), a's contents are ignored and the first outer panel
    reads src instead of a copy of it in a (saves one pass over the matrix), where its kernels allow."""
    b, m, n = a.shape
    tau = torch.zeros((b, n), dtype=a.dtype, device=a.device)
    gpu = a.is_cuda or _GEMM_ON_CPU
    # tf32x2 on the trailing updates of matrices of n >= _X2_MIN_N alone; the intra-panel updates keep tf32x3
    # (with them too, 640x512 band reached 15.5 of the gate's 20 in scripts/tf32_update_study.py --leaf 16, else 11.7)
    x3, prec = _update_prec(), _update_prec(n)
    vtbuf = None
    if _REUSE:  # entries above the diagonal are never written nonzero, so one zero-fill serves every panel
        vbuf = torch.zeros((b, m, nbo), dtype=a.dtype, device=a.device)
        tbuf = torch.zeros((b, nbo, nbo), dtype=a.dtype, device=a.device)
    for k0 in range(0, n, nbo):
        wo = min(nbo, n - k0)
        mo = m - k0
        plan = _coop_plan(a, mo)
        chol = _cholqr_takes(mo, b)
        nb = _CHOLQR_NB if chol else _COOP_NB if plan is not None else _leaf_width(mo, b)
        # V^T only where a fused update will read it (the widest one: the trailing matrix, else the intra-panel one)
        want_vt = _LEAF_VT and gpu and plan is None and _fused_pays(b, max(n - k0 - wo, wo - nb))
        if _REUSE:
            vo, tleaf = vbuf[:, :mo, :wo], tbuf[:, :wo, :wo]
            if want_vt and vtbuf is None:
                vtbuf = torch.zeros((b, nbo, m), dtype=a.dtype, device=a.device)
            vt = vtbuf[:, :wo, :mo] if want_vt else None
        else:
            vo = torch.zeros((b, mo, wo), dtype=a.dtype, device=a.device)
            tleaf = torch.zeros((b, wo, wo), dtype=a.dtype, device=a.device)
            vt = torch.zeros((b, wo, mo), dtype=a.dtype, device=a.device) if want_vt else None
        if src is not None and k0 == 0 and not (plan is None and vt is not None and _reads_src(a, src, vo, tleaf, nb)):
            a.copy_(src)  # a route of this panel works in place: factor a copy, as without src
            _input_copied(src)
            src = None
        for c0 in range(0, wo, nb):
            w = min(nb, wo - c0)
            args = (
                a[:, k0 + c0 :, k0 + c0 : k0 + c0 + w], tau[:, k0 + c0 : k0 + c0 + w],
                vo[:, c0:, c0 : c0 + w], tleaf[:, c0 : c0 + w, c0 : c0 + w],
            )  # fmt: skip
            plan_c = _coop_plan(a, mo - c0, True) if plan is not None else None
            # on the first panel, columns right of the first leaf are read from src by c0 = 0's update only
            first = src is not None and k0 == 0 and c0 == 0
            vt_c, src_c = None if vt is None else vt[:, c0 : c0 + w, c0:], src[:, :, :w] if first else None
            # the CholeskyQR2 leaf first; the Householder leaf then factors only the matrices whose panel did not hold
            held = _cholqr_leaf(*args, vt_c, src_c) if chol and w in (16, 32) and mo - c0 >= w else None
            if held is not None and src_c is not None:
                _input_copied(src_c)  # the CholeskyQR2 leaf reads the input directly
            if plan_c is not None:
                _coop_leaf(*args, *plan_c, held=held)
            else:
                _leaf(*args, vt_c, src_c, held=held)
            if c0 + w < wo:
                a2 = a[:, k0 + c0 :, k0 + c0 + w : k0 + wo]
                vb, tb = vo[:, c0:, c0 : c0 + w], tleaf[:, c0 : c0 + w, c0 : c0 + w]
                if vt is not None and _use_fused(a2, vb, tb):
                    intra_src = src[:, :, w:wo] if first else None
                    _apply_qt_vt_(a2, vb, vt[:, c0 : c0 + w, c0:], tb, intra_src, x3)
                else:
                    _apply_qt_(a2, vb, tb)
        if k0 + wo < n:
            if wo <= nb:
                t = tleaf
            elif _T_BUILD and gpu and wo <= 64 and not (b <= _TRITON_GEMM_MAX_BATCH and mo >= 1024):
                # wo <= 64: ptxas (sm_90a) gives 254 registers, no spills at 64; a 128-wide panel's tf32x3 dots
                # ask for 256 KB of shared memory, over the H200's 227 KB
                t = _t_build(vo, tleaf, nb)
            else:
                t = _t_merge_(vo, tleaf, nb) if _T_MERGE else _t_factor(vo, tau[:, k0 : k0 + wo])
            a2 = a[:, k0:, k0 + wo :]
            if _FUSED_VT and _use_fused(a2, vo, t):
                vt_ = vt if vt is not None else vo.transpose(1, 2).contiguous()
                _apply_qt_vt_(a2, vo, vt_, t, src[:, :, wo:] if src is not None and k0 == 0 else None, prec)
            else:
                _apply_qt_(a2, vo, t, prec)
    return tau


# ---- pure-PyTorch fallback (CPU without the interpreter, or leaf panels too tall) ----


def _panel_qr_(p: torch.Tensor, tau: torch.Tensor) -> None:
    m, w = p.shape[1], p.shape[2]
    for j in range(min(m, w)):
        x = p[:, j:, j]
        alpha = x[:, 0]
        tail = x[:, 1:]
        xnorm = torch.linalg.vector_norm(tail, dim=-1)
        zero = xnorm == 0
        beta = -torch.copysign(torch.hypot(alpha, xnorm), alpha)
        beta = torch.where(zero, alpha, beta)
        t = torch.where(zero, torch.zeros_like(alpha), (beta - alpha) / beta)
        denom = torch.where(zero, torch.ones_like(alpha), alpha - beta)
        tail.div_(denom[:, None])
        p[:, j, j] = beta
        tau[:, j] = t
        if j + 1 < w:
            vfull = torch.cat([torch.ones_like(alpha)[:, None], tail], dim=1)
            c = p[:, j:, j + 1 :]
            wv = torch.bmm(vfull[:, None, :], c) * t[:, None, None]
            c.sub_(vfull[:, :, None] * wv)


def _blocked_qr_(a: torch.Tensor, nb: int = _NB_TORCH) -> torch.Tensor:
    b, m, n = a.shape
    tau = torch.zeros((b, n), dtype=a.dtype, device=a.device)
    for k0 in range(0, n, nb):
        w = min(nb, n - k0)
        p = a[:, k0:, k0 : k0 + w]
        _panel_qr_(p, tau[:, k0 : k0 + w])
        if k0 + w < n:
            v = torch.tril(p, -1)
            v[:, :w, :].diagonal(dim1=-2, dim2=-1).fill_(1.0)
            _apply_qt_(a[:, k0:, k0 + w :], v, _t_factor(v, tau[:, k0 : k0 + w]))
    return tau


def _outer_width(n: int) -> int:
    return _NBO if n <= 1024 else _NBO_BIG if n <= 2048 else _NBO_HUGE


def _qr(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b, m, n = a.shape
    if b == 0 or n == 0:
        return a.clone(), torch.zeros((b, n), dtype=a.dtype, device=a.device)
    if _use_triton(a):
        if n <= _SMALL_MAX and m <= 4 * _SMALL_MAX:
            return _small_qr(a.contiguous())
        if m <= _MAX_LEAF_ROWS:
            if _SRC_FIRST:
                h = torch.empty_like(a, memory_format=torch.contiguous_format)
                return h, _panel_wy_qr_(h, _outer_width(n), a)
            h = a.clone()
            return h, _panel_wy_qr_(h, _outer_width(n))
    h = a.clone()
    return h, _blocked_qr_(h)


_GRAPH_MAX_ELEMS = 1 << 26
_GRAPHS: dict = {}
# The graph's kernels read the caller's input where it is, through addresses in device memory, instead of a copy
# of it in the graph's own input (60x1024: about 170 us a call, 3.5%; the batch-rich shapes whose first outer
# panel reads the input from its kernels alone). Paired screen (H200, session 50): 40x176 0.998, 40x352 0.997,
# 60x1024 0.992.
_GRAPH_ADDR = True
_SLOTS = None  # the _InputSlots of the graph being set up, while its shape's first call and capture run


class _InputSlots:
    """Device memory holding the address of each view of the input that the graph's kernels read (the first outer
    panel's columns, at a few offsets). The views are registered while the shape's first call runs eagerly; the
    capture only looks them up; before each replay one launch (_addr_kernel) points the slots at the caller's
    tensor. Offsets are in whole 16-byte steps from a tensor's start, and CUDA allocations start 256-byte aligned,
    so every address a slot holds is 16-byte aligned, as the kernels' SRC_ADDR assumes."""

    def __init__(self, x: torch.Tensor):
        self.x = x
        self.offsets: list[int] = []  # elements from the input's start, in slot order
        self.slots = torch.zeros(8, dtype=torch.int64, device=x.device)
        self.deltas = torch.zeros(8, dtype=torch.int64, device=x.device)  # self.offsets on the device
        self.frozen = False  # set for the capture: it may only look views up
        self.usable = True  # False once a route reads the input other than through a slot

    def views(self, t: torch.Tensor) -> bool:
        return t is self.x or t._base is self.x

    def slot(self, view: torch.Tensor) -> torch.Tensor:
        off = view.storage_offset() - self.x.storage_offset()
        if off not in self.offsets:
            if self.frozen or len(self.offsets) == len(self.slots):
                raise RuntimeError("a view of the input the shape's first call did not read")  # capture: eager
            self.offsets.append(off)
            self.deltas[len(self.offsets) - 1] = off
            self.point_at(self.x)
        i = self.offsets.index(off)
        return self.slots[i : i + 1]

    def point_at(self, a: torch.Tensor) -> None:
        _addr_kernel[(1,)](a, self.slots, self.deltas, len(self.offsets))


def _aligned(t: torch.Tensor) -> bool:
    """t starts a whole number of 16-byte steps into its allocation (4 float32), so at a 16-byte aligned address."""
    return t.storage_offset() % 4 == 0


def _src_arg(src: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """What a kernel takes for the tensor it reads A from: the tensor, or, while a graph that reads the input by
    address is set up and src views that input, src's slot (the kernel's SRC_ADDR)."""
    if _SLOTS is not None and _SLOTS.usable and _SLOTS.views(src) and _aligned(src):
        return _SLOTS.slot(src), True
    return src, False


def _input_copied(src: torch.Tensor) -> None:
    """A route read the input other than through a kernel's src: the graph must copy the input in."""
    if _SLOTS is not None and _SLOTS.views(src):
        _SLOTS.usable = False


def _qr_by_address(x: torch.Tensor, slots: _InputSlots | None) -> tuple[torch.Tensor, torch.Tensor]:
    global _SLOTS
    _SLOTS = slots
    try:
        return _qr(x)
    finally:
        _SLOTS = None


# Batches of at least _GRAPH_POOL_MIN_BATCH matrices get _GRAPH_POOL more graphs whose outputs are returned as they
# are, no clone, while nothing else holds them (0: off); a call that finds them all held replays the cloning graph.
# 640x512 is graphed then too, though eager otherwise (over _GRAPH_MAX_ELEMS). Eager, 640x512's launching thread takes
# about 2.9 ms of the call's 6.2 (H100); a stall of the thread inside the call (none of them the allocator's or the
# garbage collector's) idles the GPU: 4-12 of 200 repetitions at 7-38 ms, +4-8% on the mean (validation/tail_probe.py,
# session 57). Graphed with the clone: no slow repetition, but the clone of H costs 0.23 ms. The harness holds one
# repetition's outputs into the next, so two pooled graphs alternate where a repetition is one call (640x512,
# 60x1024). Few-matrix batches keep one graph: a second one ran 8x2048 and 2x4096 4% slower (session 46).
_GRAPH_POOL = 0
_GRAPH_POOL_MIN_BATCH = 256


def _pooled(a: torch.Tensor) -> bool:
    return _GRAPH_POOL > 0 and a.shape[0] >= _GRAPH_POOL_MIN_BATCH


def _capture(x: torch.Tensor, slots: _InputSlots | None) -> list:
    """A graph of _qr(x): its _tracked outputs [H, tau, ...] with the graph last."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        e = list(_qr_by_address(x, slots))
    return _tracked(e) + [g]


def _graphed_qr(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    key = (tuple(a.shape), a.device)
    ent = _GRAPHS.get(key)
    if ent is None:
        x = a.clone()
        slots = _InputSlots(x) if _GRAPH_ADDR and _aligned(x) else None
        _qr_by_address(x, slots)  # compiles the Triton kernels and sets cuBLAS up outside the capture
        if slots is not None and not (slots.usable and slots.offsets):
            slots = None  # this shape's route reads the input otherwise: copy it in
        torch.cuda.synchronize(a.device)
        try:
            if slots is not None:
                slots.frozen = True
            # every graph now (the cloning one first): none is captured inside a timed call
            ent = ([_capture(x, slots) for _ in range(1 + (_GRAPH_POOL if _pooled(a) else 0))], x, slots)
        except RuntimeError:  # capture refused: run this shape eagerly from now on
            torch.cuda.synchronize(a.device)
            ent = False
        _GRAPHS[key] = ent
    if ent is False:
        return _qr(a)
    graphs, x, slots = ent
    # the first pooled graph whose outputs nothing else holds (their memory may be written again), else the first
    # graph, whose outputs are cloned
    free = next((e for e in graphs[1:] if _untouched(e)), None)
    graph = graphs[0] if free is None else free
    if slots is not None and a.stride() == x.stride() and _aligned(a):
        slots.point_at(a)  # the replay reads a where it is
    else:
        if slots is not None:
            slots.point_at(x)
        x.copy_(a)
    h, tau, g = graph[0], graph[1], graph[-1]
    g.replay()
    return (h.clone(), tau.clone()) if free is None else (h, tau)


def _route(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if a.is_cuda and _HAVE_TRITON and a.numel() > 0 and (a.numel() <= _GRAPH_MAX_ELEMS or _pooled(a)):
        return _graphed_qr(a)
    return _qr(a)


def _takes_small_fast(data: torch.Tensor) -> bool:
    """The 3-D, contiguous, aligned float32 CUDA batches of the whole-matrix route (no GEMM: no precision flag)."""
    if not (_SMALL_FAST and _HAVE_TRITON and data.is_cuda and data.dim() == 3 and data.dtype == torch.float32):
        return False
    b, m, n = data.shape
    return (
        0 < n <= _SMALL_MAX
        and n <= m <= 4 * _SMALL_MAX
        and b > 0
        and data.is_contiguous()
        and data.storage_offset() == 0  # the start of an allocation: the 16-byte alignment the launcher assumes
    )


def custom_kernel(data: input_t) -> output_t:
    if _takes_small_fast(data):
        return _small_fast(data)
    if data.dim() < 2 or data.dtype != torch.float32 or data.shape[-2] < data.shape[-1]:
        return torch.geqrf(data)
    lead = data.shape[:-2]
    m, n = data.shape[-2:]
    prec = torch.get_float32_matmul_precision()
    if prec != "highest":
        torch.set_float32_matmul_precision("highest")
    try:
        h, tau = _route(data.reshape(-1, m, n))
    finally:
        if prec != "highest":
            torch.set_float32_matmul_precision(prec)
    return h.reshape(*lead, m, n), tau.reshape(*lead, n)
