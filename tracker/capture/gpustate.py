"""The GPU's state while a case is timed: SM and memory clocks, power, temperature and throttle reasons.

Read through NVML (nvidia-ml-py) by a thread of the runner, outside the sandbox and by device, never in the
kernel's process, so a kernel cannot fake it. Each case gets the min, median and max of the readings taken
inside its timed loop, bounded by the checker's clock (its verdict on the untimed first pass, then on the last
timed repetition), and the throttle reasons seen there. Without NVML (no GPU, no driver, the package missing)
the sampler says why and the columns stay empty.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from tracker.capture.evidence import FIRST_PASS
from tracker.store.schema import GPU_QUANTITIES, THROTTLE_REASONS

INTERVAL_S = 0.02  # 50 readings a second: a 0.1 s timed loop (the shortest the method allows) still gets five


class Reading(NamedTuple):
    t: float  # time.monotonic(): one clock for the runner and the checker (CLOCK_MONOTONIC is system-wide)
    sm_mhz: float
    mem_mhz: float
    power_w: float
    temp_c: float
    reasons: int  # NVML's bitmask of clock event (throttle) reasons


class Sampler:
    """`start()` begins reading the device every INTERVAL_S on a daemon thread, or sets `unavailable` to why it
    cannot; `stop()` ends it. `readings` only grows (appends are atomic), so it can be read while it runs."""

    def __init__(self, device: str, interval_s: float = INTERVAL_S) -> None:
        self.device, self.interval_s = device, interval_s
        self.readings: list[Reading] = []
        self.unavailable: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None

    def start(self) -> Sampler:
        try:
            import pynvml
        except ImportError:
            self.unavailable = "nvidia-ml-py (pynvml) is not installed"
            return self
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            self.unavailable = f"NVML is not usable here: {exc}"
            return self
        try:
            handle = _handle(pynvml, self.device)
            self._read(pynvml, handle)  # fails here, once, if this device cannot report its state
        except pynvml.NVMLError as exc:
            pynvml.nvmlShutdown()
            self.unavailable = f"NVML cannot read device {self.device}: {exc}"
            return self
        self._nvml = pynvml
        self._thread = threading.Thread(target=self._loop, args=(handle,), name="kb-gpu-state", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._nvml.nvmlShutdown()
            self._thread = None

    def _read(self, nvml: Any, handle: Any) -> None:
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons  # the name before NVML 12.2
        )
        self.readings.append(
            Reading(
                time.monotonic(),
                float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
                nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,  # milliwatts
                float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
                int(reasons(handle)),
            )
        )

    def _loop(self, handle: Any) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._read(self._nvml, handle)
            except self._nvml.NVMLError:
                continue  # one missed reading; the case keeps the others


def _handle(nvml: Any, device: str) -> Any:
    """NVML's handle for a CUDA_VISIBLE_DEVICES entry. An index is taken in NVML's order (PCI bus order), which
    is CUDA's on a machine of one GPU model; set CUDA_DEVICE_ORDER=PCI_BUS_ID or name GPUs by UUID otherwise."""
    if device.startswith(("GPU-", "MIG-")):
        return nvml.nvmlDeviceGetHandleByUUID(device)
    return nvml.nvmlDeviceGetHandleByIndex(int(device))


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def timed_window(verdicts: Sequence[dict[str, Any]]) -> tuple[float, float] | None:
    """When a case's timed loop ran, by the checker's clock: from its answer on the untimed first pass to the
    arrival of the last timed repetition's outputs. None if the case timed nothing."""
    first = [v for v in verdicts if v.get("rep") == FIRST_PASS and isinstance(v.get("received_s"), float)]
    timed = [
        v["received_s"]
        for v in verdicts
        if type(v.get("rep")) is int and v["rep"] >= 0 and isinstance(v.get("received_s"), float)
    ]
    if not first or not timed:
        return None
    start = first[0]["received_s"] + float(first[0].get("check_s") or 0.0)
    return (start, max(timed)) if max(timed) > start else None


def case_state(readings: Sequence[Reading], window: tuple[float, float] | None) -> dict[str, Any]:
    """The case_results GPU-state columns over the readings inside `window`; {} when none fall there."""
    if window is None:
        return {}
    inside = [r for r in readings if window[0] <= r.t <= window[1]]
    if not inside:
        return {}
    row: dict[str, Any] = {"gpu_samples": len(inside)}
    for q in GPU_QUANTITIES:
        values = [getattr(r, q) for r in inside]
        row.update({f"{q}_min": min(values), f"{q}_median": statistics.median(values), f"{q}_max": max(values)})
    mask = 0
    for r in inside:
        mask |= r.reasons
    row["throttle"] = ",".join(throttle_names(mask))  # "": sampled, and nothing held the clocks back
    return row
