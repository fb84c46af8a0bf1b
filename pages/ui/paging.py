"""Long tables a page at a time: the browser gets (and draws) the rows shown, not thousands."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st


def page_of(frame: pd.DataFrame, *, per_page: int, key: str, where: Any = st) -> tuple[pd.DataFrame, str]:
    """The rows of the page chosen in a "Page" box (drawn only when there is more than one page), and a caption
    part saying which rows these are ("" when all are shown)."""
    n = len(frame)
    if n <= per_page:
        return frame, ""
    pages = math.ceil(n / per_page)
    if not 1 <= int(st.session_state.get(key) or 1) <= pages:  # fewer pages after a filter: back to the first
        st.session_state[key] = 1
    page = where.number_input(f"Page (of {pages:,}, {per_page} rows each)", min_value=1, max_value=pages, step=1,
                              key=key)  # fmt: skip
    start = (int(page) - 1) * per_page
    return frame.iloc[start : start + per_page], f"Rows {start + 1:,}-{min(n, start + per_page):,} of {n:,}."
