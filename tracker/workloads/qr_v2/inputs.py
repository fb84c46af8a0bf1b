"""Input generation for qr_v2, draw for draw as the contest does, so inputs match bit for bit on a device.

Every random draw comes from one torch.Generator on the run's device, seeded with the case seed, in the
order the spec gives. Changing the order of any draw changes every later input: keep it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tracker.workloads.base import BENCHMARK_SEED_STEP
from tracker.workloads.qr_v2.gates import EPS32
from tracker.workloads.qr_v2.suites import Case

Profile = Callable[[torch.Tensor, float, torch.Generator], torch.Tensor]


def colscale(a: torch.Tensor, cond: float) -> torch.Tensor:
    if cond > 0:
        n = a.shape[-1]
        return a * torch.logspace(0.0, -cond, n, dtype=torch.float32, device=a.device)
    return a


def _dense(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    return colscale(a, cond)


def _upper(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    n = a.shape[-1]
    a = torch.triu(a)
    a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.25, n, dtype=torch.float32, device=a.device))
    return colscale(a, cond)


def _rank(n: int) -> int:
    return max(1, 3 * n // 4)


def _rankdef(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    a = a.clone()
    a[:, :, _rank(a.shape[-1]) :] = 0.0
    return colscale(a, cond)


def _nearrank(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    batch, n = a.shape[0], a.shape[-1]
    r = _rank(n)
    t = n - r
    if t > 0:
        noise = torch.randn((batch, n, t), dtype=torch.float32, device=a.device, generator=gen)
        a = a.clone()
        a[:, :, r:] = a[:, :, :t] + 1e-5 * noise
    return colscale(a, cond)


def _clustered(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    n = a.shape[-1]
    scales = torch.ones(n, dtype=torch.float32, device=a.device)
    scales[n // 2 :] = 4 * EPS32
    if n >= 8:
        scales[max(0, n // 2 - 2) : min(n, n // 2 + 2)] = torch.sqrt(torch.tensor(EPS32, dtype=torch.float32))
    return a * scales


def _band(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    n = a.shape[-1]
    bw = max(2, min(32, n // 32))
    idx = torch.arange(n, device=a.device)
    outside = (idx[:, None] - idx[None, :]).abs() > bw
    a = a.masked_fill(outside, 0.0)
    a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.5, n, dtype=torch.float32, device=a.device))
    return colscale(a, cond)


def _nearcollinear(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    batch, n = a.shape[0], a.shape[-1]
    base = torch.randn((batch, n, 1), dtype=torch.float32, device=a.device, generator=gen)
    noise = torch.randn((batch, n, n), dtype=torch.float32, device=a.device, generator=gen)
    return colscale(base.expand(batch, n, n) + 1e-4 * noise, cond)


def _rowscale(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    n = a.shape[-1]
    return a * torch.logspace(0.0, -max(cond, 4), n, dtype=torch.float32, device=a.device).view(1, n, 1)


def _diagonal(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    batch, n = a.shape[0], a.shape[-1]
    d = torch.randn((batch, n), dtype=torch.float32, device=a.device, generator=gen)
    signs = torch.sign(d).clamp(min=0) * 2 - 1
    scale = torch.logspace(0.0, -max(cond, 2), n, dtype=torch.float32, device=a.device)
    return torch.diag_embed(signs * scale)


# The mixed case picks among these, in this order, with these weights.
MIXED_PROFILES = (
    "dense",
    "rankdef",
    "nearrank",
    "clustered",
    "band",
    "rowscale",
    "nearcollinear",
)
MIXED_WEIGHTS = (6.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)


def _mixed(a: torch.Tensor, cond: float, gen: torch.Generator) -> torch.Tensor:
    batch = a.shape[0]
    weights = torch.tensor(MIXED_WEIGHTS, dtype=torch.float32, device=a.device)
    profile = torch.multinomial(weights, batch, replacement=True, generator=gen)
    if batch >= 2:
        dense = profile == 0
        if not bool(dense.any()):
            pos = torch.randint(0, batch, (1,), device=a.device, generator=gen)
            profile[pos] = 0
        elif bool(dense.all()):
            pos = torch.randint(0, batch, (1,), device=a.device, generator=gen)
            profile[pos] = torch.randint(1, 7, (1,), device=a.device, generator=gen)
    a = a.clone()
    for index, name in enumerate(MIXED_PROFILES):
        mask = profile == index
        if bool(mask.any()):
            a[mask] = PROFILES[name](a[mask], cond, gen)
    return a


PROFILES: dict[str, Profile] = {
    "dense": _dense,
    "upper": _upper,
    "rankdef": _rankdef,
    "nearrank": _nearrank,
    "clustered": _clustered,
    "band": _band,
    "nearcollinear": _nearcollinear,
    "rowscale": _rowscale,
    "diagonal": _diagonal,
    "mixed": _mixed,
}


def generate(case: Case, seed: int | None = None, device: str | torch.device = "cpu") -> torch.Tensor:
    """One input batch for a case: (batch, n, n) float32, contiguous, on `device`."""
    if case.case not in PROFILES:
        raise ValueError(f"unknown case type {case.case!r}; known: {', '.join(PROFILES)}")
    gen = torch.Generator(device=device)
    gen.manual_seed(case.seed if seed is None else seed)
    a = torch.randn((case.batch, case.n, case.n), dtype=torch.float32, device=device, generator=gen)
    return PROFILES[case.case](a, float(case.cond), gen).contiguous()


def benchmark_inputs(case: Case, device: str | torch.device = "cpu") -> list[torch.Tensor]:
    """The distinct inputs a timed repetition loops over: seeds seed+42, seed+84, ..."""
    return [generate(case, case.seed + BENCHMARK_SEED_STEP * (i + 1), device) for i in range(case.input_count())]
