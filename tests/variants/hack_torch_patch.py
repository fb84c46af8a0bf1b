"""Hostile (flag torch-patch): replaces torch.Tensor.contiguous, the input generator's last step, so it sees
each input as the harness makes it (in this process) and could compute its outputs there, outside every timed
call."""

import torch

SEEN = []
_contiguous = torch.Tensor.contiguous


def _spy(self, *args, **kwargs):
    out = _contiguous(self, *args, **kwargs)
    SEEN.append(out.shape)
    return out


torch.Tensor.contiguous = _spy


def custom_kernel(data: torch.Tensor):
    return torch.geqrf(data)
