"""Small file helpers shared by the store, the runner and dashboard jobs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: str | os.PathLike, data: dict[str, Any]) -> None:
    """Readers never see a half-written file: write beside it, then rename over it."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, default=str))
    os.replace(tmp, path)
