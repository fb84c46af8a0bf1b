"""What a page computes from its cached reads (pivots, trees, figures), cached too: on a page switch or a rerun
with the same filters the page only looks it up. Keyed on the open store's version and a key that names
everything the arguments depend on (the reads' filters), so a write to the store computes it again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from pages import _common as common
from tracker.store import Store


@st.cache_data(show_spinner=False, max_entries=128)
def _call(
    _function: Callable[..., Any],
    function: str,
    store: str,
    version: tuple[int, ...],
    key: tuple,
    _args: tuple,
    _kwargs: dict,
) -> Any:
    return _function(*_args, **_kwargs)


def cached(function: Callable[..., Any], key: tuple, *args: Any, **kwargs: Any) -> Any:
    """function(*args, **kwargs), cached on the open store's version and `key` (the arguments are not hashed:
    `key` must name every filter the reads behind them took, and every other argument). The function is not
    hashed either: its qualified name keys the entry, as in _common.read."""
    path = common.store()
    name = f"{function.__module__}.{function.__qualname__}"
    return _call(function, name, path, Store(path).store_version(), key, args, kwargs)
