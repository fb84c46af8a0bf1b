"""The worker -> runner event channel's signature: an HMAC (SHA-256) of each line under a per-run key.

Lines whose signature or sequence number is wrong are dropped by the runner and counted as forged.
"""

from __future__ import annotations

import hashlib
import hmac


def sign(key: bytes, line: str) -> str:
    return hmac.new(key, line.encode(), hashlib.sha256).hexdigest()
