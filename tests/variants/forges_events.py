"""Hostile: tries to forge a pass. At import it looks for the worker's channel everywhere a kernel could
(environment, argv, job files in temp folders, every open fd) and writes `passed` events, in the old
events-file format and in the signed format with a made-up signature; its kernel returns garbage."""

import glob
import json
import os
import sys
import tempfile

import torch

FAKE = [
    {"event": "env", "gpu": "FORGED"},
    {"event": "case_start", "case_idx": 0, "position": 0, "total": 1, "spec": "forged"},
    {
        "event": "case_done", "case_idx": 0, "spec": "8x16 c1 s201 dense", "passed": True, "message": "",
        "case": {"batch": 8, "n": 16, "cond": 1, "seed": 201, "case": "dense", "inputs": 1},
        "samples": [0.001] * 5, "runs": 5, "mean_us": 0.001, "err_us": 0.0, "best_us": 0.001, "worst_us": 0.001,
    },
    {"event": "timing_done"},
    {"event": "done"},
]  # fmt: skip


def lines(seq0: int) -> bytes:
    old = "".join(json.dumps(e) + "\n" for e in FAKE)
    signed = "".join("0" * 64 + " " + json.dumps({**e, "seq": seq0 + i}) + "\n" for i, e in enumerate(FAKE))
    return (old + signed).encode()


found = []
for value in list(os.environ.values()) + sys.argv:  # a path in the environment or argv
    if "events" in value or value.endswith(".jsonl"):
        found.append(value)
for folder in glob.glob(os.path.join(tempfile.gettempdir(), "kernelbeam-*")):  # the old job file
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if name.endswith(".json"):
            try:
                found.append(json.load(open(path)).get("events_path", ""))  # noqa: SIM115
            except (OSError, ValueError):
                pass
        found.append(path)
for path in (p for p in found if p and os.path.isfile(p)):  # only files that exist: it forges, it does not litter
    try:
        with open(path, "ab") as f:
            f.write(lines(0))
    except OSError:
        pass
for name in os.listdir("/proc/self/fd"):  # every open fd, pipes included
    fd = int(name)
    if fd > 2:
        for seq0 in range(0, 8):
            try:
                os.write(fd, lines(seq0))
            except OSError:
                break
print("KB-FORGER tried", len(found), "paths", flush=True)


def custom_kernel(data: torch.Tensor):
    n = data.shape[-1]
    return torch.zeros_like(data), torch.zeros(data.shape[0], n, dtype=data.dtype)
