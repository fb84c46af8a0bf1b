"""Correct the first time it sees an input object, wrong (matrix 1's R perturbed at (2, 5)) when the same object
comes back: the untimed pass (on clones) and timed repetition 0 pass, repetition 1's recheck fails."""

import torch

seen: list[torch.Tensor] = []  # kept alive, so identities are not reused


def custom_kernel(data: torch.Tensor):
    h, tau = torch.geqrf(data)
    if any(data is s for s in seen):
        h[1, 2, 5] += 0.5
    else:
        seen.append(data)
    return h, tau
