"""Since: what changed since a time (`?since=2h`, 30m, 1d or an ISO timestamp; default the last visit): new runs,
new bests, regressions, failures and verdicts. The same as `python -m tracker since 2h --json`."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from pages import _common as common
from pages.ui import tables as views
from pages.ui import urlstate
from tracker.analysis import summaries
from tracker.store import Store

VISIT_KEY = "kb_since_last_visit"
DEFAULT_KEY = "kb_since_default"  # the default of this visit to the page, fixed when it opens
VISIT_COOKIE = "kb_since_visit"  # the browser keeps the last visit (Unix seconds) for the next session


def _cookie_visit(now: dt.datetime) -> dt.datetime | None:
    """The last visit this browser recorded (a cookie, read when the session started), if it is a sane time."""
    try:
        when = dt.datetime.fromtimestamp(int(st.context.cookies.get(VISIT_COOKIE, "")), dt.UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return when if when <= now else None


common.page_setup()
st.title("Since")
common.require_runs()
now = dt.datetime.now(dt.UTC)
last = st.session_state.get(VISIT_KEY) or _cookie_visit(now)
if "since" not in st.session_state:  # on entering the page (common.enter_page forgets it): the default until the next
    st.session_state[DEFAULT_KEY] = last.isoformat(timespec="seconds") if last else "24h"
default = st.session_state[DEFAULT_KEY]
text = urlstate.text_input(st, "Since", key="since", default=default, help="30m, 2h, 1d, 1w or an ISO timestamp. "
                           "Default: your last visit to this page (kept by this browser), else 24 hours.")  # fmt: skip
try:
    when = summaries.parse_since(text or default, now)
except ValueError as exc:
    st.error(str(exc))
    st.stop()
st.session_state[VISIT_KEY] = now
# Our own script (with a number in it) sets the dashboard's own cookie; a later session (another tab, tomorrow)
# reads it through st.context.cookies. Nothing leaves the machine. In the page itself, not in an st.iframe: an
# iframe's load is a navigation in the tab's history, and on a busy machine Chromium then lost or doubled the
# history entry of the switch into Since, so Back went to the wrong state (test_back_and_forward_across_pages).
st.html(
    f"<script>document.cookie = '{VISIT_COOKIE}={int(now.timestamp())}; path=/; max-age=31536000; SameSite=Strict';"
    "</script>",
    unsafe_allow_javascript=True,
)
when = when.replace(second=0, microsecond=0)  # one cached read per minute
summary = summaries.since_summary(common.read(Store.since_activity, when))
st.caption(f"Since {when:%Y-%m-%d %H:%M} UTC.")
m = common.metric_row()
for key in ("runs", "new_bests", "regressions", "failures", "verdicts"):
    m.metric(key.replace("_", " ").capitalize(), len(summary[key]), width="content")

LINKS = {c: st.column_config.LinkColumn(c, display_text=r"run\?id=(.*)") for c in ("run", "baseline run")}


def _table(key: str, title: str, empty: str, rows: pd.DataFrame | None = None) -> None:
    st.subheader(title)
    rows = pd.DataFrame(summary[key]) if rows is None else rows
    if rows.empty:
        st.caption(empty)
        return
    if "baseline_run" in rows:
        rows["compare"] = "compare?a=" + rows["baseline_run"] + "&b=" + rows["run_id"]
        rows["baseline_run"] = "run?id=" + rows["baseline_run"]
    if "run_id" in rows:
        rows["run_id"] = "run?id=" + rows["run_id"]
    for col in ("started_at", "created_at"):
        if col in rows:
            rows[col] = pd.to_datetime(rows[col], utc=True, format="ISO8601")
    config = {**LINKS, "compare": st.column_config.LinkColumn("compare", display_text="compare")}
    common.table(views.readable(rows), column_config=config, key=f"since_{title}")


# A run's geomean (case OVERALL) is never shown as a case's mean: two tables, as the CLI's two sections.
bests = pd.DataFrame(summary["new_bests"], columns=["case", "problem", "suite", "mode", "gpu", "run_id", "mean_us",
                                                    "previous_best_us"])  # fmt: skip
if bests["problem"].nunique() < 2:  # named where bests of several problems stand side by side
    bests = bests.drop(columns="problem")
overall = bests["case"] == summaries.OVERALL
geomeans = bests[overall].drop(columns="case")
geomeans = geomeans.rename(columns={"mean_us": "geomean_us", "previous_best_us": "previous_geomean_us"})
_table("new_bests", "New best geomeans", "No new best geomean.", geomeans)
_table("new_bests", "New best case means", "No new best on any case.", bests[~overall])
_table("regressions", "Regressions", "No new run starts a slower level of a case (change points, as on Regressions).")
_table("failures", "Failures", "No failed, crashed or timed-out run.")
_table("verdicts", "Verdicts", "No verdict recorded.")
_table("runs", "Runs", "No run.")
