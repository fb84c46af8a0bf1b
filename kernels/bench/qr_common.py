"""Shared helpers for the kernel bench and smoke tests: qr_v2 inputs, gates, variant loading.

Own implementation of the facts in shared/qr_v2_spec.md (input cases, colscale, mixed, the two gates).
"""

import importlib.util
import os
import sys
import tempfile

import torch

EPS32 = 1.1920929e-07
PROFILES = ["dense", "rankdef", "nearrank", "clustered", "band", "rowscale", "nearcollinear"]

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
BENCHMARKS = [
    (20, 32, 1, 43214, "dense"), (40, 176, 1, 423011, "dense"), (40, 352, 1, 123456, "dense"),
    (640, 512, 2, 1029, "dense"), (60, 1024, 2, 75342, "dense"), (8, 2048, 1, 224466, "dense"),
    (2, 4096, 1, 32412, "dense"), (640, 512, 2, 770001, "mixed"), (60, 1024, 2, 770002, "mixed"),
    (640, 512, 0, 770003, "rankdef"), (640, 512, 0, 770004, "clustered"), (60, 1024, 0, 770005, "nearrank"),
]  # fmt: skip
GEQRF_US = [281, 15118, 40192, 997736, 228252, 71808, 45924, 996888, 227957, 984225, 997725, 228200]


def hidden_seed(a: int, s: int) -> int:
    return a + (a + s) * (a + s + 1) // 2


def _colscale(a, cond):
    if cond > 0:
        a = a * torch.logspace(0.0, -cond, a.shape[-1], dtype=torch.float32, device=a.device)
    return a


def _apply(a, case, cond, gen):
    b, n, _ = a.shape
    dev = a.device
    if case == "dense":
        return _colscale(a, cond)
    if case == "upper":
        a = torch.triu(a)
        a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.25, n, device=dev))
        return _colscale(a, cond)
    if case == "rankdef":
        a = a.clone()
        a[:, :, max(1, 3 * n // 4) :] = 0.0
        return _colscale(a, cond)
    if case == "nearrank":
        r = max(1, 3 * n // 4)
        t = n - r
        if t > 0:
            noise = torch.randn((b, n, t), dtype=torch.float32, device=dev, generator=gen)
            a = a.clone()
            a[:, :, r:] = a[:, :, :t] + 1e-5 * noise
        return _colscale(a, cond)
    if case == "clustered":
        e = torch.finfo(torch.float32).eps
        s = torch.ones(n, dtype=torch.float32, device=dev)
        s[n // 2 :] = 4 * e
        if n >= 8:
            s[max(0, n // 2 - 2) : min(n, n // 2 + 2)] = torch.sqrt(torch.tensor(e, dtype=torch.float32))
        return a * s
    if case == "band":
        bw = max(2, min(32, n // 32))
        i = torch.arange(n, device=dev)
        a = torch.where((i[:, None] - i[None, :]).abs() > bw, 0.0, a)
        a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.5, n, device=dev))
        return _colscale(a, cond)
    if case == "nearcollinear":
        base = torch.randn((b, n, 1), dtype=torch.float32, device=dev, generator=gen)
        noise = torch.randn((b, n, n), dtype=torch.float32, device=dev, generator=gen)
        return _colscale(base.expand(b, n, n) + 1e-4 * noise, cond)
    if case == "rowscale":
        return a * torch.logspace(0.0, -max(cond, 4), n, dtype=torch.float32, device=dev).view(1, n, 1)
    raise ValueError(case)


def gen_input(batch, n, cond, seed, case="dense", device="cpu"):
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    a = torch.randn((batch, n, n), dtype=torch.float32, device=device, generator=gen)
    if case == "mixed":
        w = torch.tensor([6.0, 1, 1, 1, 1, 1, 1], device=device)
        idx = torch.multinomial(w, batch, replacement=True, generator=gen)
        if batch >= 2 and not bool((idx == 0).any()):
            idx[torch.randint(0, batch, (1,), device=device, generator=gen)] = 0
        elif bool((idx == 0).all()):
            pos = torch.randint(0, batch, (1,), device=device, generator=gen)
            idx[pos] = torch.randint(1, 7, (1,), device=device, generator=gen)
        for k, prof in enumerate(PROFILES):
            msk = idx == k
            if bool(msk.any()):
                a[msk] = _apply(a[msk], prof, cond, gen)
        return a.contiguous()
    return _apply(a, case, cond, gen).contiguous()


def gates(a, out):
    """Return (factor, orth) residuals scaled so that the gates are factor <= 20, orth <= 100."""
    h, tau = out
    b, n, _ = a.shape
    assert isinstance(out, tuple) and len(out) == 2
    assert h.shape == a.shape and tau.shape == (b, n), (h.shape, tau.shape)
    assert h.dtype == torch.float32 and tau.dtype == torch.float32
    assert h.device == a.device and tau.device == a.device
    if not (torch.isfinite(h).all() and torch.isfinite(tau).all()):
        return float("inf"), float("inf")
    q = torch.linalg.householder_product(h, tau).double()
    r = torch.triu(h).double()
    ad = a.double()
    p = q.transpose(-1, -2) @ ad

    def n1(x):
        return x.abs().sum(-2).amax(-1)

    fac = n1(r - p) / (EPS32 * n * n1(ad))
    eye = torch.eye(n, dtype=torch.float64, device=a.device)
    orth = n1(q.transpose(-1, -2) @ q - eye) / (EPS32 * n)
    return fac.max().item(), orth.max().item()


def load_variant(path):
    """Import a contest-style file; provide a `task` shim module if none is importable."""
    shim = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tracker", "shim")
    if os.path.exists(os.path.join(shim, "task.py")):
        sys.path.insert(0, shim)
    elif "task" not in sys.modules:
        d = tempfile.mkdtemp(prefix="qrshim")
        with open(os.path.join(d, "task.py"), "w") as f:
            f.write(
                "from typing import TypeVar\nimport torch\n"
                'input_t = TypeVar("input_t", bound=torch.Tensor)\n'
                'output_t = TypeVar("output_t", bound=tuple[torch.Tensor, torch.Tensor])\n'
            )
        sys.path.insert(0, d)
    name = "qrvariant_" + os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
