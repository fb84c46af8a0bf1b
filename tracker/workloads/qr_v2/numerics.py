"""The checker's numeric settings, independent of whatever the kernel's module set in the same process.

A kernel may turn TF32 on, lower the float32 matmul precision, change the default dtype, demand deterministic
algorithms or leave a side stream current. None of that may reach the gates: `checker_numerics()` forces the
settings the spec's arithmetic assumes, and puts the kernel's settings back afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

# New-style precision knobs (torch >= 2.9): (module path under torch.backends, attribute). "ieee" is full fp32.
_PRECISION_KNOBS = (
    ("", "fp32_precision"),
    ("cuda.matmul", "fp32_precision"),
    ("cudnn", "fp32_precision"),
    ("cudnn.conv", "fp32_precision"),
    ("cudnn.rnn", "fp32_precision"),
    ("mkldnn", "fp32_precision"),
    ("mkldnn.matmul", "fp32_precision"),
    ("mkldnn.conv", "fp32_precision"),
    ("mkldnn.rnn", "fp32_precision"),
)
# Legacy switches, used where the new knobs do not exist.
_LEGACY_KNOBS = (("cuda.matmul", "allow_tf32"), ("cudnn", "allow_tf32"))


def _owner(path: str) -> Any:
    obj: Any = torch.backends
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _read(knobs: tuple[tuple[str, str], ...]) -> list[tuple[Any, str, Any]]:
    found = []
    for path, attr in knobs:
        owner = _owner(path)
        try:  # a legacy getter raises once the kernel mixed the legacy and the new API
            found.append((owner, attr, getattr(owner, attr)))
        except (AttributeError, RuntimeError):
            continue
    return found


def _matmul_precision() -> str | None:
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:  # mixed legacy and new API: the new knobs hold the state
        return None


def snapshot() -> dict[str, Any]:
    """The numeric settings the checker cares about, as plain values (for tests and for restoring)."""
    return {
        "precision": [v for _, _, v in _read(_PRECISION_KNOBS)],
        "legacy": [v for _, _, v in _read(_LEGACY_KNOBS)],
        "matmul_precision": _matmul_precision(),
        "default_dtype": torch.get_default_dtype(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
    }


@contextlib.contextmanager
def checker_numerics(device: torch.device | None = None) -> Iterator[None]:
    """Full-precision float32 matmuls, TF32 off, float32 default dtype, no deterministic-only errors, and on
    CUDA the default stream (after waiting for all work, so outputs the kernel left on a side stream are done).
    Everything is restored on exit, also when the check raises."""
    precision = _read(_PRECISION_KNOBS)
    legacy = _read(_LEGACY_KNOBS)
    matmul_precision = _matmul_precision()
    dtype = torch.get_default_dtype()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    cuda = device is not None and device.type == "cuda"
    try:
        # The legacy calls also set the new knobs consistently (cuda.matmul and mkldnn.matmul to "ieee").
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        torch.set_default_dtype(torch.float32)
        _set_deterministic(False, False)
        with contextlib.ExitStack() as stack:
            if cuda:
                torch.cuda.synchronize(device)
                stack.enter_context(torch.cuda.stream(torch.cuda.default_stream(device)))
            yield
    finally:
        # Through the API the kernel's state was readable by: setting a new knob makes the legacy getters raise,
        # setting a legacy one rewrites the new knobs (to equivalent values).
        if matmul_precision is not None and len(legacy) == len(_LEGACY_KNOBS):
            for owner, attr, value in legacy:
                setattr(owner, attr, value)
            torch.set_float32_matmul_precision(matmul_precision)
        else:
            for owner, attr, value in precision:
                setattr(owner, attr, value)
        torch.set_default_dtype(dtype)
        _set_deterministic(deterministic, warn_only)


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    # Only on a change: torch.use_deterministic_algorithms imports torch._inductor (and dynamo), 1.5-4 s of CPU
    # per process on first use, which every worker and checker paid although nearly no kernel sets the mode.
    if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) != (
        mode,
        warn_only,
    ):
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
