from task import input_t, output_t

"""The contest's reference: torch.geqrf (LAPACK/cuSOLVER compact Householder QR). Parent: none."""

import torch


def custom_kernel(data: input_t) -> output_t:
    return torch.geqrf(data)
