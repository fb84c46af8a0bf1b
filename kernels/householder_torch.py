from task import input_t, output_t

"""Unblocked Householder QR, vectorised across the batch in plain PyTorch.

Idea: LAPACK dgeqr2 column by column (dlarfg reflector: beta = -sign(alpha)*norm,
tau = 0 and alpha kept when the part below the diagonal is exactly zero), each step
a rank-1 update of the trailing columns done for the whole batch at once.
Parent: torch.geqrf (the contest's reference kernel).
"""

import torch  # noqa: E402


def _householder_qr_(a: torch.Tensor) -> torch.Tensor:
    """Factor a (b, m, n) float32 tensor in place; return tau (b, min(m, n))."""
    b, m, n = a.shape
    k = min(m, n)
    tau = torch.zeros((b, k), dtype=a.dtype, device=a.device)
    for j in range(k):
        x = a[:, j:, j]
        alpha = x[:, 0]
        tail = x[:, 1:]
        xnorm = torch.linalg.vector_norm(tail, dim=-1)
        zero = xnorm == 0
        beta = -torch.copysign(torch.hypot(alpha, xnorm), alpha)
        beta = torch.where(zero, alpha, beta)
        t = torch.where(zero, torch.zeros_like(alpha), (beta - alpha) / beta)
        denom = torch.where(zero, torch.ones_like(alpha), alpha - beta)
        v = tail / denom[:, None]
        tail.copy_(v)
        a[:, j, j] = beta
        tau[:, j] = t
        if j + 1 < n:
            vfull = torch.cat([torch.ones_like(alpha)[:, None], v], dim=1)
            c = a[:, j:, j + 1 :]
            w = torch.bmm(vfull[:, None, :], c) * t[:, None, None]
            c.sub_(vfull[:, :, None] * w)
    return tau


def custom_kernel(data: input_t) -> output_t:
    if data.dim() < 2 or data.dtype != torch.float32 or data.shape[-2] < data.shape[-1]:
        return torch.geqrf(data)
    lead = data.shape[:-2]
    m, n = data.shape[-2:]
    h = data.reshape(-1, m, n).clone()
    tau = _householder_qr_(h)
    return h.reshape(*lead, m, n), tau.reshape(*lead, min(m, n))
