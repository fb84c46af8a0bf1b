"""A page's filters kept in its URL, so that a link shares them and Back and Forward restore them.

Each filter widget takes its value from st.query_params before it is drawn (the URL is the source of truth: a
link, Back or Forward just sets a new URL) and writes a change back with st.query_params in its on_change
callback, which pushes one browser history entry (a value equal to the page's default is left out of the URL).

Not `bind="query-params"` (Streamlit 1.67): leaving a page whose bound widgets hold non-default values took two
entries, the old page's path stripped of its parameters and then the new page (the server drops the parameters
bound to another page's widgets and says so before the browser has switched), so one Back landed on the old page
with its defaults. And with the same parameter names on several pages (`family`, `gpu`, `suite`, `sort`), Back
to `/?family=x` after Leaderboard had bound `family` had the server drop it as "another page's" parameter.
Parameters written with st.query_params are bound to nothing, so a page switch is one entry (as Run and Compare
always were). tests/test_e2e.py::test_back_and_forward_across_pages checks it in Chromium.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from pages.ui.text import md


def _to_url(key: str, default: Any, param: str) -> None:
    value = st.session_state.get(key)
    if value is None or value == "" or value == default:
        st.query_params.pop(param, None)
    else:
        st.query_params[param] = str(value)


def _from_url(key: str, default: Any, options: Sequence[Any] | None, param: str) -> None:
    raw = st.query_params.get(param)
    if raw is None:
        value = default
    elif options is None:
        value = raw
    else:  # a value the page does not offer (a stale or hand-written link) falls back to the default, and says so
        value = next((o for o in options if str(o) == raw), None)
        if value is None:
            value = default
            st.query_params.pop(param, None)  # the URL shows what the page shows
            st.warning(
                f"The link's {param} “{md(raw)}” is not one of this page's choices here "
                f"({', '.join(md(o) for o in list(options)[:8])}{', ...' if len(options) > 8 else ''}): showing "
                f"{md(default)}.",
                icon=":material/link_off:",
            )  # the link is anyone's text: escaped
    st.session_state[key] = value


def selectbox(
    where: Any,
    label: str,
    options: Sequence[Any],
    *,
    key: str,
    default: Any = None,
    param: str | None = None,
    **kwargs: Any,
) -> Any:
    """`where.selectbox(label, options, key=key)` with its value in the URL under `param` (default: `key`; a widget of
    the sidebar beside a page's widget of the same name needs a key of its own), default: the first option."""
    options = list(options)
    default = options[0] if default is None and options else default
    _from_url(key, default, options, param or key)
    return where.selectbox(label, options, key=key, on_change=_to_url, args=(key, default, param or key), **kwargs)


def radio(where: Any, label: str, options: Sequence[Any], *, key: str, default: Any = None, **kwargs: Any) -> Any:
    options = list(options)
    default = options[0] if default is None and options else default
    _from_url(key, default, options, key)
    return where.radio(label, options, key=key, on_change=_to_url, args=(key, default, key), **kwargs)


def text_input(where: Any, label: str, *, key: str, default: str = "", **kwargs: Any) -> str:
    _from_url(key, default, None, key)
    return where.text_input(label, key=key, on_change=_to_url, args=(key, default, key), **kwargs)


def toggle(where: Any, label: str, *, key: str, default: bool = False, param: str | None = None, **kwargs: Any) -> bool:
    """`where.toggle(label, key=key)` with its value in the URL (`param=True`) while it is not the default."""
    _from_url(key, default, [False, True], param or key)
    return where.toggle(label, key=key, on_change=_to_url, args=(key, default, param or key), **kwargs)
