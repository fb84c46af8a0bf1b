"""pandas imported on its first use, not when a module that may use it is imported.

The CLI's front imports the whole store and analysis layers, but most of its commands (`run` above all, which
agents call hundreds of times a day) never build a DataFrame. Importing pandas costs about 0.4 s of CPU a process;
`from tracker.common.lazy import pd` defers it to the first `pd.<name>`.
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class _OnFirstUse(types.ModuleType):
    """Stands for a module not yet imported; any attribute imports it and is read from it. It is never put in
    sys.modules, so other libraries (duckdb's `.df()`) import the real module themselves."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self.__name__), name)


pd: Any = _OnFirstUse("pandas")
