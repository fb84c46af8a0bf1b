"""Evidence of a failed check: the input, H and tau of the failing (worst) matrix, its residuals, and which
repetition failed, so a failure can be judged again later (`python -m tracker recheck`).

The worker writes one compressed .npz per failed case into its working folder and names it in the case's
event (the event stream stays small); the runner reads the files before it removes the folder.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tracker.common.errors import InputError
from tracker.common.jsonfields import loads

FIRST_PASS = -1  # repetition of the untimed first pass (and of test mode's single call)
FRESH_PASS = -2  # the call on fresh inputs after the timed loop (plausibility's identity-cache check)
MAX_ELEMENTS = 3 * 4096 * 4096  # a, h and tau of one n = 4096 matrix fit; larger ones keep no arrays
MAX_RUN_BYTES = 256 << 20  # arrays kept per run; later failed cases keep their metadata only
RESIDUAL_KEYS = ("factor_res", "tril_res", "recon_res", "orth_res")
PENDING_KEY = "_evidence"  # where the worker's case functions leave (inputs, outputs, check, repetition)


def pack(arrays: dict[str, np.ndarray], meta: dict[str, Any] | None = None) -> bytes:
    buf = io.BytesIO()
    extra = {"meta": np.array(json.dumps(meta))} if meta is not None else {}
    np.savez_compressed(buf, **arrays, **extra)
    return buf.getvalue()


class EvidenceTooLarge(InputError):
    """An evidence .npz that would decompress past the limits (a zip bomb, or not evidence of ours)."""


# What one run's evidence can hold once decompressed: a, h and tau of the largest matrix kept, float64, plus
# the headers and the meta entry. Far below it is normal; an imported blob may claim or hold anything.
MAX_UNPACKED_BYTES = MAX_ELEMENTS * 8 + (1 << 20)
MAX_MEMBERS = 8  # a, h, tau, meta


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, budget: int) -> np.ndarray:
    """One .npy member, its size taken from its header and checked against `budget` before anything is
    allocated; only that many bytes are read, whatever the compressed stream would go on to produce."""
    with archive.open(member) as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise InputError(f"evidence member {member.filename!r} has .npy version {version}")
        if dtype.hasobject:
            raise InputError(f"evidence member {member.filename!r} holds Python objects")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > budget:
            raise EvidenceTooLarge(f"evidence member {member.filename!r} would unpack to {nbytes:,} bytes")
        data = f.read(nbytes)
    if len(data) != nbytes:
        raise InputError(f"evidence member {member.filename!r} is truncated")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def unpack(blob: bytes) -> dict[str, Any]:
    """Arrays of an evidence .npz; `meta` (if present) comes back as a dict. Raises ValueError (EvidenceTooLarge
    past the limits) rather than unpack whatever an imported blob claims: the zip's member count and declared
    sizes are checked first, then each member's own header, and no more bytes are read than it declares."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(blob))
    except zipfile.BadZipFile as exc:
        raise InputError(f"evidence is not a .npz archive: {exc}") from None
    out: dict[str, Any] = {}
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise EvidenceTooLarge(f"evidence holds {len(members)} members (at most {MAX_MEMBERS})")
        declared = sum(m.file_size for m in members)
        if declared > MAX_UNPACKED_BYTES:
            raise EvidenceTooLarge(f"evidence declares {declared:,} bytes unpacked (at most {MAX_UNPACKED_BYTES:,})")
        budget = MAX_UNPACKED_BYTES
        for member in members:
            try:
                array = _read_member(archive, member, budget)
            except (zipfile.BadZipFile, EOFError, OSError) as exc:
                raise InputError(f"evidence member {member.filename!r} is unreadable: {exc}") from None
            budget -= array.nbytes
            out[member.filename.removesuffix(".npy")] = array
    if "meta" in out:
        out["meta"] = loads(str(out["meta"]))  # depth-checked: 200,000 nested brackets raised RecursionError
    return out


def failed_check(inputs: list, outputs: list, check: Any, repetition: int) -> tuple:
    """What the worker keeps of a failed check until the case's event is written."""
    return (inputs, outputs, check, repetition)


def _arrays(inputs: list, outputs: list, check: Any) -> dict[str, np.ndarray]:
    i, m = check.input_idx, check.matrix_idx
    if i is None or m is None:
        return {}
    a = inputs[i][m]
    h, tau = outputs[i][0][m], outputs[i][1][m]
    if 2 * a.numel() + tau.numel() > MAX_ELEMENTS:
        return {}
    return {name: t.detach().to("cpu").numpy() for name, t in (("a", a), ("h", h), ("tau", tau))}


def save(folder: str | None, case_idx: int, result: dict[str, Any]) -> None:
    """Worker side: turn a pending failed check in `result` into an .npz in `folder`, named in the result."""
    pending = result.pop(PENDING_KEY, None)
    if pending is None or folder is None:
        return
    inputs, outputs, check, repetition = pending
    meta = {
        "case_idx": case_idx,
        "repetition": repetition,
        "input_idx": check.input_idx,
        "matrix_idx": check.matrix_idx,
        "message": check.message,
        **{k: check.worst_residuals.get(k) for k in RESIDUAL_KEYS},
    }
    name = f"evidence-{int(case_idx)}.npz"
    try:
        (Path(folder) / name).write_bytes(pack(_arrays(inputs, outputs, check), meta))
    except Exception as exc:  # evidence is a bonus; the verdict stands without it
        result["evidence_error"] = f"{type(exc).__name__}: {exc}"
        return
    result["evidence"] = name


def collect(folder: str | Path, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runner side: the evidence rows named by the case events, read from the worker's folder."""
    rows: list[dict[str, Any]] = []
    kept = 0
    for event in events:
        name = event.get("evidence") if event.get("event") == "case_done" else None
        if not isinstance(name, str):
            continue
        path = Path(folder) / Path(name).name  # never outside the worker's folder
        try:
            blob = path.read_bytes()
            data = unpack(blob)
        except Exception:  # a missing or unreadable file: the case keeps its verdict and message
            continue
        meta = data.pop("meta", None) or {}
        shape = data["a"].shape if "a" in data else None
        if kept + len(blob) > MAX_RUN_BYTES:
            blob = pack({}, meta)  # over the run's budget: where and how it failed, without the matrices
        kept += len(blob)
        rows.append(
            {
                "case_idx": event["case_idx"],
                "repetition": meta.get("repetition"),
                "input_idx": meta.get("input_idx"),
                "matrix_idx": meta.get("matrix_idx"),
                "n": shape[-1] if shape else None,
                "message": meta.get("message"),
                **{k: meta.get(k) for k in RESIDUAL_KEYS},
                "arrays": blob,
                "arrays_bytes": len(blob),
            }
        )
    return rows
