"""vectoradd: the input generator, the reference kernel and the correctness check GPU Mode's runner calls."""

import torch
from task import input_t, output_t


def generate_input(size: int, seed: int) -> input_t:
    """Two vectors of `size` standard-normal float32 values, on the GPU when there is one; `seed` fixes them."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(size, generator=gen, device=device, dtype=torch.float32)
    b = torch.randn(size, generator=gen, device=device, dtype=torch.float32)
    return a, b


def ref_kernel(data: input_t) -> output_t:
    a, b = data
    return a + b


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    """(passed, message): the output must be a tensor of the inputs' shape, dtype and device, and match the
    reference to float32 rounding (a sum of two values is exact up to one rounding)."""
    expected = ref_kernel(data)
    if not isinstance(output, torch.Tensor):
        return False, f"expected a torch.Tensor, got {type(output).__name__}"
    if output.shape != expected.shape or output.dtype != expected.dtype or output.device != expected.device:
        return False, (
            f"expected {tuple(expected.shape)} {expected.dtype} on {expected.device}, "
            f"got {tuple(output.shape)} {output.dtype} on {output.device}"
        )
    if not torch.allclose(output, expected, rtol=1e-6, atol=1e-6):
        worst = (output - expected).abs().max().item()
        return False, f"mismatch: max abs error {worst:.3g} (tolerance 1e-6)"
    return True, ""
