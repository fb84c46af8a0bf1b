"""A correct kernel (torch.geqrf) that, like some public submissions, turns TF32 and reduced float32 matmul
precision on at import and leaves them on: the checker must not be affected."""

import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("medium")


def custom_kernel(data: torch.Tensor):
    return torch.geqrf(data)
