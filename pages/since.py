"""Since: what changed since a time (`?since=2h`, 30m, 1d or an ISO timestamp; default the last visit): new runs,
new bests, regressions, failures and verdicts. The same as `python -m tracker since 2h --json`."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from pages import _common as common
from tracker.analysis import summaries

VISIT_KEY = "kb_since_last_visit"

common.page_setup()
st.title("Since")
common.require_runs()
now = dt.datetime.now(dt.UTC)
last = st.session_state.get(VISIT_KEY)
default = last.isoformat(timespec="seconds") if last else "24h"
if "since" not in st.session_state and "since" not in st.query_params:
    st.session_state["since"] = default
text = st.text_input("Since", key="since", bind="query-params", help="30m, 2h, 1d, 1w or an ISO timestamp. "
                     "Default: your last visit to this page, else the last 24 hours.")  # fmt: skip
try:
    when = summaries.parse_since(text or default, now)
except ValueError as exc:
    st.error(str(exc))
    st.stop()
st.session_state[VISIT_KEY] = now
when = when.replace(second=0, microsecond=0)  # one cached read per minute
summary = summaries.since_summary(common.read("since_activity", when))
st.caption(f"Since {when:%Y-%m-%d %H:%M} UTC.")
m = st.columns(5)
for col, key in zip(m, ("runs", "new_bests", "regressions", "failures", "verdicts"), strict=True):
    col.metric(key.replace("_", " ").capitalize(), len(summary[key]))

LINKS = {"run_id": st.column_config.LinkColumn("run", display_text=r"run\?id=(.*)")}


def _table(key: str, title: str, empty: str) -> None:
    st.subheader(title)
    rows = pd.DataFrame(summary[key])
    if rows.empty:
        st.caption(empty)
        return
    if "run_id" in rows:
        rows["run_id"] = "run?id=" + rows["run_id"]
    if "baseline_run" in rows:
        rows["compare"] = "compare?a=" + rows["baseline_run"] + "&b=" + rows["run_id"].str.removeprefix("run?id=")
    config = {**LINKS, "compare": st.column_config.LinkColumn("compare", display_text="compare")}
    st.dataframe(rows, hide_index=True, column_config=config, key=f"since_{key}")


_table("new_bests", "New bests", "No new best on any case.")
_table("regressions", "Regressions", "No new run starts a slower level of a case (change points, as on Regressions).")
_table("failures", "Failures", "No failed, crashed or timed-out run.")
_table("verdicts", "Verdicts", "No verdict recorded.")
_table("runs", "Runs", "No run.")
