"""JSON lines on pipes between the tracker's processes: the worker -> runner event channel, and the checker's
verdicts to the runner.

The worker writes each event as one line, `HMAC LINE`, numbered by `seq` and signed with an HMAC (SHA-256) under
a per-run key that came on the worker's stdin (`Events`). The runner reads them without blocking (`Lines`):
lines whose signature or sequence number is wrong are dropped and counted as forged. The checker's verdicts are
plain JSON lines (`Verdicts`), read by the same reader without a key.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import random
import threading
from typing import Any


def sign(key: bytes, line: str) -> str:
    return hmac.new(key, line.encode(), hashlib.sha256).hexdigest()


class Events:
    """Signed, numbered JSON lines on a private pipe fd; a copy of each is kept for the orphan case."""

    def __init__(self, fd: int, key: bytes):
        # A random high fd number: nothing in argv, the environment or a file says which fd is the channel.
        self._fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, random.randrange(300, 900))
        os.close(fd)
        self._key = key
        self._seq = 0
        self._lock = threading.Lock()
        self.sent: list[dict[str, Any]] = []
        self.on_broken: Any = None  # called when the runner's end of the pipe is gone

    def emit(self, event: str, **data: Any) -> None:
        with self._lock:
            body = {"event": event, "seq": self._seq, **data}
            line = json.dumps(body, default=str)
            self._seq += 1
            self.sent.append(json.loads(line))
            payload = (sign(self._key, line) + " " + line + "\n").encode()
            try:
                while payload:  # a blocking pipe: a full one waits for the runner to read
                    payload = payload[os.write(self._fd, payload) :]
            except BrokenPipeError:
                if self.on_broken is not None:
                    self.on_broken()


class Verdicts:
    """The checker's write end: plain (unsigned) JSON lines to the runner, one per judged output."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def emit(self, **data: Any) -> None:
        line = (json.dumps(data, default=str) + "\n").encode()
        while line:
            line = line[os.write(self.fd, line) :]


MAX_LINE_BYTES = 16 << 20  # one event; a flood without newlines past this is cut off and counted as forged
# per read(): a pipe kept full by a flood still hands control back, so the runner keeps its deadlines
MAX_READ_BYTES = 1 << 20


class Lines:
    """A non-blocking read end of JSON lines: whole lines only, at most MAX_LINE_BYTES buffered. With a key
    (the worker's channel) only lines that carry a valid HMAC and the next sequence number are accepted; the
    others are counted as forged. Without one (the checker's verdicts) every well-formed line is."""

    def __init__(self, fd: int, key: bytes | None = None) -> None:
        os.set_blocking(fd, False)
        self.fd, self.key = fd, key
        self.buf = b""
        self.seq = 0
        self.forged = 0

    def read(self) -> list[dict[str, Any]]:
        """The whole lines that came since the last call, at most MAX_READ_BYTES of them (the rest next call)."""
        data = bytearray()
        while len(data) < MAX_READ_BYTES:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        *lines, rest = (self.buf + bytes(data)).split(b"\n")  # a line still being written is read next time
        if len(rest) > MAX_LINE_BYTES:
            rest = b""  # a line this long is no event of ours
            self.forged += 1
        self.buf = rest
        out = []
        for raw in lines:
            if self.key is None:
                try:
                    event = json.loads(raw)
                    good = isinstance(event, dict)
                except ValueError:
                    good = False
            else:
                mac, _, line = raw.partition(b" ")
                try:
                    text = line.decode()
                    event = json.loads(text)
                    good = hmac.compare_digest(mac.decode(), sign(self.key, text)) and event.get("seq") == self.seq
                except (UnicodeDecodeError, ValueError, AttributeError):
                    good = False
            if good:
                self.seq += 1
                out.append(event)
            elif raw.strip():
                self.forged += 1
        return out

    def close(self) -> None:
        os.close(self.fd)
