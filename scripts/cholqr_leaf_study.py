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
before any kernel is written. Not timed. The leaf as Triton kernels is kernels/fused_wy.py's (knob `_CHOLQR`,
off until the H200 says it is faster); `--leaf triton` puts it in this blocked QR (on a CPU in Triton's
interpreter), and `--time-leaf` times it on a GPU against the family's Householder leaf, per panel shape.

    python scripts/cholqr_leaf_study.py [--suite benchmarks|tests|both] [--cases 5,6] [--seed S] [--device cpu|cuda]
                                        [--leaf torch|triton] [--json F]
    python scripts/cholqr_leaf_study.py --time-leaf kernels/fused_wy.py [--json F]     (GPU: the leaf's time)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

import torch

sys.path.insert(0, ".")
from tracker.workloads.qr_v2.checks import _wy_t, check_qr  # noqa: E402
from tracker.workloads.qr_v2.inputs import generate  # noqa: E402
from tracker.workloads.qr_v2.suites import QR_V2, hidden_seed  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qr_devbench import graph_us  # noqa: E402


def cholqr2(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q (b, m, k) with orthonormal columns, R (b, k, k) upper, and per matrix whether both passes held."""
    eye = torch.eye(p.shape[-1], dtype=p.dtype, device=p.device)
    r1, info1 = torch.linalg.cholesky_ex(p.mT @ p, upper=True)
    q1 = torch.linalg.solve_triangular(r1, p, upper=True, left=False)
    g2 = q1.mT @ q1
    r2, info2 = torch.linalg.cholesky_ex(g2, upper=True)
    q = torch.linalg.solve_triangular(r2, q1, upper=True, left=False)
    near = (g2 - eye).abs().amax(dim=(-2, -1)) < family()._CHOLQR_GRAM_TOL
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


FAMILY = "kernels/fused_wy.py"  # the family file whose knob _CHOLQR this leaf is: its kernels, its tolerance
_FAMILIES: dict = {}


def family(path: str = FAMILY):
    """A family file, imported once as the contest imports it (its CholeskyQR2 kernels need Triton; the rest does
    not)."""
    if path not in _FAMILIES:
        from tracker.capture.worker import load_variant

        load_variant(path)
        _FAMILIES[path] = sys.modules["submission"]
    return _FAMILIES[path]


def triton_leaf(p: torch.Tensor, bm: int = 128, prec: str = "ieee", warps: int = 4):
    """The family's Triton leaf (five launches): H (b, m, k), Y, T and whether each matrix's panel held; where it
    did not, H, Y and T are not written (the family's Householder leaf factors that matrix). k 16 or 32, m >= k."""
    fam = family()
    b, m, k = p.shape
    h, y = torch.zeros_like(p), torch.zeros_like(p)
    tau, t = p.new_zeros(b, k), p.new_zeros(b, k, k)
    ok = fam._cholqr_leaf(h, tau, y, t, src=p, bm=bm, prec=prec, warps=warps)
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
    nb = family()._CHOLQR_NB
    for k0 in range(0, n, nb):
        k = min(nb, n - k0)
        p = a[:, k0:, k0 : k0 + k]
        h, y, t, ok = (leaf if leaf is not None and k == nb else torch_leaf)(p)
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


def time_leaves(path: str, reps: int = 50) -> list[dict]:
    """GPU time of one 32-column leaf per panel shape (batch, rows), each in a CUDA graph (as the family's route
    runs it), copy-in included: the family's Householder leaf (cooperative where its plan says so, else its
    tile-QR leaves over the same 32 columns), its CholeskyQR2 route as _CHOLQR runs it (that leaf, then the
    Householder launch that every matrix whose panel held leaves at once), and the CholeskyQR2 leaf alone at three
    row blocks and two precisions, and with 1, 2 or 8 warps in its one-program kernels; then the route's time per
    kernel."""
    fam = family(path)
    if not hasattr(fam, "_cholqr_leaf"):
        raise SystemExit(f"{path} has no CholeskyQR2 leaf (_cholqr_leaf)")
    rows = []
    for b, m in LEAF_SHAPES:
        try:
            split = _route_kernels(fam, b, m)
        except Exception as exc:  # the split is extra: without a profiler the timings still come back
            split = {"kernel split": f"{type(exc).__name__}: {exc}"[:200]}
        for name, us in [*_time_shape(fam, b, m, reps).items(), *split.items()]:
            timed = isinstance(us, float)
            rows.append({"batch": b, "rows": m, "leaf": name, "us": round(us, 2) if timed else None,
                         **({} if timed else {"error": us})})  # fmt: skip
            print(f"{b:4}x{m:<5} {name:32} " + (f"{us:9.2f} us a leaf" if timed else f"failed: {us}"), flush=True)
    return rows


def _route_kernels(fam, b: int, m: int, reps: int = 20) -> dict[str, float]:
    """Where the CholeskyQR2 route's time goes: device time per kernel of one leaf, from torch's profiler over
    eager calls (kernel durations only, no launch gaps), as "kernel NAME"."""
    from torch.profiler import ProfilerActivity, profile

    src = torch.randn(b, m, fam._CHOLQR_NB, device="cuda")
    p = torch.empty_like(src)
    route = leaf_contenders(fam, p)[0]["cholqr2 route (knob defaults)"]
    for _ in range(3):
        p.copy_(src)
        route()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            p.copy_(src)  # the panel itself each time (on its own output the leaf could fall back); shown too
            route()
        torch.cuda.synchronize()
    return {f"kernel {e.key[:40]}": e.device_time_total / reps for e in prof.key_averages() if e.device_time_total > 0}


def _time_shape(fam, b: int, m: int, reps: int, device: str = "cuda", timer=None) -> dict[str, float | str]:
    """Microseconds per leaf of each contender (timer: qr_devbench.graph_us, ten steps a graph), or why it could
    not be timed: one contender that fails to compile or launch costs its own row, not the probe's others."""
    src = torch.randn(b, m, fam._CHOLQR_NB, device=device)
    p = torch.empty_like(src)
    out: dict[str, float | str] = {}
    for name, leaf in leaf_contenders(fam, p)[0].items():

        def step(leaf=leaf):
            p.copy_(src)
            leaf()

        try:
            out[name] = float(timer(step, reps) if timer else graph_us(step, reps, per_graph=10))
        except Exception as exc:
            out[name] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def leaf_contenders(fam, p: torch.Tensor) -> tuple[dict, torch.Tensor]:
    """The leaves --time-leaf times, by name, each a call that factors panel p (b, m, 32) in place, and the tau
    they write: all but the family's narrower tile-QR leaves (no updates in between) leave a Householder QR of p
    (H in p, the reflectors' scales in tau)."""
    b, m, k = p.shape
    tau = torch.empty(b, k, device=p.device)
    v = torch.zeros(b, m, k, device=p.device)
    t = torch.zeros(b, k, k, device=p.device)
    plan = fam._coop_plan(p, m)
    nb = k if plan else fam._leaf_width(m, b)

    def householder(held=None):
        if plan:
            fam._coop_leaf(p, tau, v, t, *plan, held=held)
        elif held is not None:  # the route's fallback: one leaf as wide as the CholeskyQR2 one
            fam._leaf(p, tau, v, t, held=held)
        else:  # narrower tile-QR leaves: a lower bound (their updates in between are left out)
            for c in range(0, k, nb):
                fam._leaf(p[:, c:, c : c + nb], tau[:, c : c + nb], v[:, c:, c : c + nb], t[:, c : c + nb, c : c + nb])

    contenders = {
        ("cooperative" if plan else f"tile QR, {k // nb} x {nb} wide"): householder,
        "cholqr2 route (knob defaults)": lambda: householder(fam._cholqr_leaf(p, tau, v, t)),
    }
    for bm in (64, 128, 256):
        for prec in ("ieee", "tf32x3"):
            contenders[f"cholqr2 bm{bm} {prec}"] = lambda bm=bm, prec=prec: fam._cholqr_leaf(
                p, tau, v, t, bm=bm, prec=prec
            )
    for warps in (1, 2, 8):
        contenders[f"cholqr2 bm128 ieee {warps}w"] = lambda warps=warps: fam._cholqr_leaf(
            p, tau, v, t, bm=128, prec="ieee", warps=warps
        )
    return contenders, tau


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
    if (args.time_leaf or args.leaf == "triton") and importlib.util.find_spec("triton") is None:
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
