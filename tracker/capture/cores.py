"""Which CPU cores each GPU's worker gets when a queue runs over several GPUs on one machine.

Launch-bound kernels are timed on the CPU as much as on the GPU: each worker gets its own share of the cores,
and where the machine says which cores are near a GPU (its PCI device's NUMA node), the share comes from those,
so no run launches across the socket link while the sequential path, unpinned, would not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SYS_PCI = Path("/sys/bus/pci/devices")


def split_cores(n: int, cores: list[int] | None = None) -> list[list[int]]:
    """Split this process's CPU cores into n contiguous shares (a core may be shared if there are fewer)."""
    cores = sorted(os.sched_getaffinity(0)) if cores is None else cores
    if len(cores) < n:
        return [[cores[i % len(cores)]] for i in range(n)]
    size, extra = divmod(len(cores), n)
    shares, start = [], 0
    for i in range(n):
        end = start + size + (i < extra)
        shares.append(cores[start:end])
        start = end
    return shares


def parse_cpulist(text: str) -> list[int]:
    """Linux's cpulist format, e.g. '0-15,32-47' or '3'; an empty or malformed list gives []."""
    cores: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return []
        cores.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cores)


def gpu_local_cores(gpus: list[str], sys_pci: Path = SYS_PCI) -> dict[str, list[int]]:
    """For each GPU id (an index or a UUID, as CUDA_VISIBLE_DEVICES names it), the cores of its NUMA node, from
    nvidia-smi's PCI bus id and the kernel's local_cpulist. GPUs that cannot be placed are left out."""
    if not gpus or shutil.which("nvidia-smi") is None:
        return {}
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    local = {}
    for line in out.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3:
            continue
        index, uuid, bus = fields
        domain, _, rest = bus.partition(":")  # nvidia-smi: 00000000:19:00.0; sysfs: 0000:19:00.0
        try:
            cores = parse_cpulist((sys_pci / f"{domain[-4:]}:{rest}".lower() / "local_cpulist").read_text())
        except OSError:
            continue
        for key in (index, uuid):
            if key in gpus and cores:
                local[key] = cores
    return local


def core_shares(
    gpus: list[str], n: int, allowed: list[int] | None = None, local: dict | None = None
) -> list[list[int]]:
    """One share of cores per worker. With GPUs whose local cores are known (all of them, and some allowed
    to this process), each GPU's share comes from its own node, split among the GPUs of that node; otherwise
    the allowed cores are split into contiguous shares."""
    allowed = sorted(os.sched_getaffinity(0)) if allowed is None else allowed
    if gpus:
        local = gpu_local_cores(gpus) if local is None else local
        near = {g: sorted(set(local.get(g, ())) & set(allowed)) for g in gpus}
        if all(near.values()):
            shares: dict[str, list[int]] = {}
            for node in {tuple(c) for c in near.values()}:
                members = [g for g in gpus if tuple(near[g]) == node]
                for g, share in zip(members, split_cores(len(members), list(node)), strict=True):
                    shares[g] = share
            return [shares[g] for g in gpus]
    return split_cores(n, allowed)
