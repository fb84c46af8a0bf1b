"""What a vectoradd kernel imports (`from task import input_t, output_t`): its input and output types."""

import torch

input_t = tuple[torch.Tensor, torch.Tensor]  # two float32 vectors of one length, on one device
output_t = torch.Tensor  # their element-wise sum, same length and device
