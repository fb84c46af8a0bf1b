"""The one error type for bad input: what the user gave (an option, a path, a file, a store's content) is wrong.

The CLI reports it as one `error: ...` line with exit 2 (the MCP tools as a tool error); any other exception is
a bug of ours, reported as an internal error with exit 1. A ValueError, so callers that catch those still do."""

from __future__ import annotations


class InputError(ValueError):
    pass
