"""Outputs from the worker to the checker: plain tensors as bytes in a memfd, described by a JSON header.

The worker (which runs the kernel) and the checker (which judges it) share one AF_UNIX SOCK_SEQPACKET pair:
each message is one JSON packet, a memfd with the outputs' bytes travels beside it (SCM_RIGHTS). Nothing
crosses but data: no pickle, no tensor objects, so a tensor subclass, a lazy tensor or a patched torch in the
worker cannot reach the checker's arithmetic. The worker refuses every output that is not exactly a dense,
strided `torch.Tensor` on the run's device; the checker rebuilds plain tensors from the bytes and judges
those with its own import of the gates.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
from typing import Any

MAX_PACKET = 1 << 20  # one JSON message; outputs travel in the memfd, not here
ALIGN = 64  # each tensor's bytes start on a 64-byte boundary in the memfd
MAX_LEAVES = 4096
MAX_DEPTH = 8
DTYPES = (
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool",
    "complex64", "complex128",
)  # fmt: skip


class BadOutput(ValueError):
    """The kernel returned something other than plain tensors (a subclass, a sparse or lazy tensor, ...)."""


def pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def send(sock: socket.socket, message: dict[str, Any], fd: int | None = None) -> None:
    data = json.dumps(message).encode()
    if fd is None:
        sock.sendall(data)
    else:
        socket.send_fds(sock, [data], [fd])


def recv(sock: socket.socket) -> tuple[dict[str, Any] | None, int | None]:
    """The next message and its memfd (None when none came); (None, None) when the other side is gone."""
    data, fds, flags, _ = socket.recv_fds(sock, MAX_PACKET, 1)
    if not data:
        for fd in fds:
            os.close(fd)
        return None, None
    if flags & socket.MSG_TRUNC:
        raise BadOutput("a message from the worker was larger than the handoff allows")
    message = json.loads(data)
    if not isinstance(message, dict):
        raise BadOutput("a message from the worker was not a JSON object")
    return message, (fds[0] if fds else None)


def _describe(x: Any) -> str:
    return f"{type(x).__module__}.{type(x).__qualname__}"


def pack(outputs: Any, device: Any) -> tuple[Any, int]:
    """Worker side: (a JSON tree describing `outputs`, a memfd holding their bytes). Raises BadOutput."""
    import torch

    leaves: list[Any] = []

    def walk(x: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise BadOutput("the output is nested too deeply")
        if type(x) is torch.Tensor:  # exactly: a subclass can compute lazily or lie about what it holds
            if x.layout != torch.strided or x.is_sparse or x.is_quantized or x.is_meta:
                raise BadOutput(f"an output tensor has layout {x.layout}: only dense (strided) tensors are accepted")
            if x.device.type != torch.device(device).type:
                raise BadOutput(f"an output tensor is on {x.device}, the run's device is {device}")
            if str(x.dtype).removeprefix("torch.") not in DTYPES:
                raise BadOutput(f"an output tensor has dtype {x.dtype}, which the checker does not accept")
            leaves.append(x)
            return {"t": len(leaves) - 1}
        if isinstance(x, torch.Tensor):
            raise BadOutput(f"an output is a {_describe(x)}, not a plain torch.Tensor")
        if isinstance(x, (tuple, list)):  # torch.return_types and namedtuples too; read as plain sequences
            kind, items = ("tuple", tuple.__iter__(x)) if isinstance(x, tuple) else ("list", list.__iter__(x))
            return {"seq": kind, "items": [walk(v, depth + 1) for v in items]}
        if x is None or type(x) in (bool, int, float, str):
            return {"v": x}
        raise BadOutput(f"an output is a {_describe(x)}: custom_kernel must return tensors (in tuples or lists)")

    tree = walk(outputs, 0)
    if len(leaves) > MAX_LEAVES:
        raise BadOutput(f"the output holds {len(leaves)} tensors, more than {MAX_LEAVES}")
    specs, offset = [], 0
    for t in leaves:
        specs.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "offset": offset})
        offset += -(-t.numel() * t.element_size() // ALIGN) * ALIGN
    fd = os.memfd_create("kernelbeam-outputs", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, offset)
        if offset:
            # One copy per tensor, device to the memfd's pages: no host tensor, no write() of a second buffer.
            buf = mmap.mmap(fd, offset)
            try:
                for t, spec in zip(leaves, specs, strict=True):
                    n = t.numel() * t.element_size()
                    if n:
                        dst = torch.frombuffer(buf, dtype=torch.uint8, count=n, offset=spec["offset"])
                        dst.copy_(t.detach().contiguous().reshape(-1).view(torch.uint8))
                        del dst
            finally:
                buf.close()
    except BaseException:
        os.close(fd)
        raise
    return {"tree": tree, "tensors": specs, "bytes": offset}, fd


def unpack(header: Any, fd: int | None, device: Any, max_bytes: int) -> Any:
    """Checker side: plain tensors on `device` rebuilt from the memfd, validated against the header."""
    import torch

    if not isinstance(header, dict) or fd is None:
        raise BadOutput("the worker sent outputs without their data")
    specs, total = header.get("tensors"), header.get("bytes")
    if not isinstance(specs, list) or len(specs) > MAX_LEAVES or not isinstance(total, int) or total < 0:
        raise BadOutput("the outputs' description is malformed")
    if total > max_bytes:
        raise BadOutput(f"the outputs take {total} bytes, more than the {max_bytes} the case can produce")
    size = os.fstat(fd).st_size
    if size < total:
        raise BadOutput("the outputs' data is shorter than described")
    tensors = []
    # A private mapping: the worker cannot change what is judged once it is copied out, and each tensor is read
    # straight from the pages to `device` (one copy).
    buf = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) if size else None
    try:
        for spec in specs:
            if not isinstance(spec, dict) or spec.get("dtype") not in DTYPES:
                raise BadOutput("an output tensor's dtype is not one the checker accepts")
            shape, offset = spec.get("shape"), spec.get("offset")
            if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape) and len(shape) <= 8):
                raise BadOutput("an output tensor's shape is malformed")
            dtype = getattr(torch, spec["dtype"])
            count = 1
            for d in shape:
                count *= d
            nbytes = count * torch.empty((), dtype=dtype).element_size()
            if type(offset) is not int or offset < 0 or offset + nbytes > total:
                raise BadOutput("an output tensor lies outside the data sent")
            if count:
                flat = torch.frombuffer(buf, dtype=dtype, count=count, offset=offset)
                tensors.append(flat.reshape(shape).to(device, copy=True))
                del flat
            else:
                tensors.append(torch.empty(shape, dtype=dtype, device=device))
    finally:
        if buf is not None:
            buf.close()

    def build(node: Any, depth: int) -> Any:
        if depth > MAX_DEPTH or not isinstance(node, dict):
            raise BadOutput("the outputs' structure is malformed")
        if "t" in node:
            i = node["t"]
            if type(i) is not int or not 0 <= i < len(tensors):
                raise BadOutput("the outputs' structure names a tensor that was not sent")
            return tensors[i]
        if "seq" in node and isinstance(node.get("items"), list):
            items = [build(v, depth + 1) for v in node["items"]]
            return tuple(items) if node["seq"] == "tuple" else items
        if "v" in node and (node["v"] is None or type(node["v"]) in (bool, int, float, str)):
            return node["v"]
        raise BadOutput("the outputs' structure is malformed")

    return build(header.get("tree"), 0)
