"""Outputs from the worker to the checker: plain tensors as bytes in a memfd, described by a JSON header.

The worker (which runs the kernel) and the checker (which judges it) share one AF_UNIX SOCK_SEQPACKET pair:
each message is one JSON packet, a memfd with the outputs' bytes travels beside it (SCM_RIGHTS). Nothing
crosses but data: no pickle, no tensor objects, so a tensor subclass, a lazy tensor or a patched torch in the
worker cannot reach the checker's arithmetic. The worker refuses every output that is not exactly a dense,
strided `torch.Tensor` on the run's device; the checker rebuilds plain tensors from the bytes and judges
those with its own import of the gates.
"""

from __future__ import annotations

import fcntl
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


def _register(host: Any) -> bool:
    """Pin a host view for the GPU's DMA engine (pageable copies of ~0.7 GB took 0.5 s; pinned ones ~30 ms)."""
    import torch

    if not torch.cuda.is_available() or not host.numel():
        return False
    return torch.cuda.cudart().cudaHostRegister(host.data_ptr(), host.numel(), 0) == 0


def _unregister(host: Any) -> None:
    import torch

    torch.cuda.cudart().cudaHostUnregister(host.data_ptr())


class _Mapped:
    """A memfd mapped shared, as one uint8 tensor, pinned where a GPU is; kept while outputs still fit."""

    def __init__(self, fd: int, size: int) -> None:
        import torch

        self.fd, self.size = fd, size
        self.buf = mmap.mmap(fd, size) if size else None
        self.host = torch.frombuffer(self.buf, dtype=torch.uint8) if size else torch.empty(0, dtype=torch.uint8)
        self.pinned = _register(self.host)

    def close(self) -> None:
        if self.pinned:
            _unregister(self.host)
        del self.host  # the tensor exports the mapping: it must go before the mapping closes
        if self.buf is not None:
            self.buf.close()
        os.close(self.fd)


_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class Sender:
    """Worker side: packs each call's outputs into one memfd, reused (and pinned) while the outputs fit.

    The memfd is sealed against shrinking, so the checker can keep it mapped without the worker pulling pages
    out from under it; the checker copies what it judges out of the mapping first, so reuse changes nothing
    that is judged.
    """

    def __init__(self, device: Any) -> None:
        self.device = device
        self._staged: _Mapped | None = None

    def close(self) -> None:
        if self._staged is not None:
            self._staged.close()
            self._staged = None

    def _buffer(self, size: int) -> _Mapped:
        if self._staged is None or self._staged.size < size:
            self.close()
            fd = os.memfd_create("kernelbeam-outputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            try:
                os.ftruncate(fd, size)
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
                self._staged = _Mapped(fd, size)
            except BaseException:
                os.close(fd)
                raise
        return self._staged

    def pack(self, outputs: Any) -> tuple[Any, int]:
        """(a JSON tree describing `outputs`, the memfd holding their bytes; the Sender keeps it). Raises
        BadOutput."""
        import torch

        tree, leaves = _walk(outputs, self.device)
        specs, offset = [], 0
        for t in leaves:
            specs.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "offset": offset})
            offset += -(-t.numel() * t.element_size() // ALIGN) * ALIGN
        staged = self._buffer(offset)
        for t, spec in zip(leaves, specs, strict=True):
            n = t.numel() * t.element_size()
            if n:  # one copy per tensor, device to the memfd's (pinned) pages
                start = spec["offset"]
                staged.host[start : start + n].copy_(t.detach().contiguous().reshape(-1).view(torch.uint8))
        return {"tree": tree, "tensors": specs, "bytes": offset}, staged.fd


def _walk(outputs: Any, device: Any) -> tuple[Any, list[Any]]:
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
    return tree, leaves


class Receiver:
    """Checker side: rebuilds plain tensors on `device` from the worker's memfd, validated against the header.

    The mapping of the worker's memfd is kept (and pinned) while the worker keeps sending the same one.
    """

    def __init__(self, device: Any) -> None:
        self.device = device
        self._mapped: _Mapped | None = None
        self._identity: tuple[int, int, int] | None = None

    def close(self) -> None:
        if self._mapped is not None:
            self._mapped.close()
            self._mapped, self._identity = None, None

    def _host(self, fd: int) -> Any:
        st = os.fstat(fd)
        identity = (st.st_dev, st.st_ino, st.st_size)
        if identity != self._identity:
            try:
                seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            except OSError:
                seals = 0
            if not seals & fcntl.F_SEAL_SHRINK:  # else it could shrink while mapped: a SIGBUS in the checker
                raise BadOutput("the outputs' memory was not sealed against shrinking")
            self.close()
            self._mapped, self._identity = _Mapped(os.dup(fd), st.st_size), identity
        return self._mapped.host

    def unpack(self, header: Any, fd: int | None, max_bytes: int) -> Any:
        import torch

        if not isinstance(header, dict) or fd is None:
            raise BadOutput("the worker sent outputs without their data")
        specs, total = header.get("tensors"), header.get("bytes")
        if not isinstance(specs, list) or len(specs) > MAX_LEAVES or not isinstance(total, int) or total < 0:
            raise BadOutput("the outputs' description is malformed")
        if total > max_bytes:
            raise BadOutput(f"the outputs take {total} bytes, more than the {max_bytes} the case can produce")
        host = self._host(fd)
        if host.numel() < total:
            raise BadOutput("the outputs' data is shorter than described")
        tensors = []
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
            if type(offset) is not int or offset < 0 or offset % ALIGN or offset + nbytes > total:
                raise BadOutput("an output tensor lies outside the data sent")
            # Copied out before judging: what the worker writes into the shared pages later changes nothing.
            raw = host[offset : offset + nbytes]
            tensors.append(
                raw.view(dtype).reshape(shape).to(self.device, copy=True)
                if count
                else torch.empty(shape, dtype=dtype, device=self.device)
            )
        return _build(header.get("tree"), tensors)


def _build(tree: Any, tensors: list[Any]) -> Any:
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

    return build(tree, 0)
