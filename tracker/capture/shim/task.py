"""The `task` module a contest file imports (`from task import input_t, output_t`)."""

from typing import TypedDict, TypeVar

import torch

input_t = TypeVar("input_t", bound=torch.Tensor)
output_t = TypeVar("output_t", bound=tuple[torch.Tensor, torch.Tensor])


class TestSpec(TypedDict, total=False):
    batch: int
    n: int
    cond: float
    seed: int
    case: str
