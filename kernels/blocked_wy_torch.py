from task import input_t, output_t

"""Blocked Householder QR with compact-WY trailing updates, in plain PyTorch.

Idea: factor a panel of nb columns with the unblocked batched Householder loop, form the
triangular factor T of Q = I - V T V^T (T = diag(tau) (I + triu(V^T V, 1) diag(tau))^-1,
a unit-triangular solve, exact for tau = 0 too), then update the trailing columns with three
batched fp32 matmuls: A2 -= V (T^T (V^T A2)).  Most flops move into bmm.
Parent: householder_torch.py.
"""

import torch  # noqa: E402

_NB = 32


def _panel_qr_(p: torch.Tensor, tau: torch.Tensor) -> None:
    """Unblocked Householder on the panel view p (b, m, w) in place; tau (b, w) filled."""
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


def _unit_lower(p: torch.Tensor) -> torch.Tensor:
    """V with implicit unit diagonal and zeros above, from a factored panel (b, m, w)."""
    w = p.shape[2]
    v = torch.tril(p, -1)
    v[:, :w, :].diagonal(dim1=-2, dim2=-1).fill_(1.0)
    return v


def _t_factor(v: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """T (b, w, w) upper triangular with Q = H_1...H_w = I - V T V^T."""
    s = torch.triu(torch.bmm(v.transpose(1, 2), v), 1)
    mmat = s * tau[:, None, :]
    mmat.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    d = torch.diag_embed(tau)
    return torch.linalg.solve_triangular(mmat, d, upper=True, left=False, unitriangular=True)


def _blocked_qr_(a: torch.Tensor, nb: int = _NB) -> torch.Tensor:
    b, m, n = a.shape
    k = min(m, n)
    tau = torch.zeros((b, k), dtype=a.dtype, device=a.device)
    for k0 in range(0, k, nb):
        w = min(nb, k - k0)
        p = a[:, k0:, k0 : k0 + w]
        _panel_qr_(p, tau[:, k0 : k0 + w])
        if k0 + w < n:
            v = _unit_lower(p)
            t = _t_factor(v, tau[:, k0 : k0 + w])
            a2 = a[:, k0:, k0 + w :]
            wmat = torch.bmm(t.transpose(1, 2), torch.bmm(v.transpose(1, 2), a2))
            a2.sub_(torch.bmm(v, wmat))
    return tau


def custom_kernel(data: input_t) -> output_t:
    if data.dim() < 2 or data.dtype != torch.float32 or data.shape[-2] < data.shape[-1]:
        return torch.geqrf(data)
    lead = data.shape[:-2]
    m, n = data.shape[-2:]
    h = data.reshape(-1, m, n).clone()
    tau = _blocked_qr_(h)
    return h.reshape(*lead, m, n), tau.reshape(*lead, min(m, n))
