"""Dashboard pages through streamlit.testing.v1.AppTest, on stores built through the tracker's write path.

Asserts on table contents and on the charts' specs and data (Plotly and Vega-Lite, from the element protos), and on
bad inputs: unknown run ids, quotes and SQL in the search box, kernel paths outside the allowed folder, an
empty store, a file that is not a store. Also: a tracker run writing while pages render, and UI jobs.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import BASE_US, H200, ROOT, T0, make_record
from streamlit.testing.v1 import AppTest

from pages.ui import charts as charts_mod
from pages.ui import tables as views
from tests.conftest import old_store, open_page, open_url
from tracker import store as store_mod
from tracker.capture import envinfo, jobs
from tracker.common.text import short_kernel
from tracker.common.vocabulary import CASE_STATS
from tracker.store import Store
from tracker.store.transfer import export_runs

APP = str(ROOT / "app.py")
PAGES = ["pages/experiments.py", "pages/run.py", "pages/compare.py", "pages/regressions.py", "pages/benchmark.py"]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No samples to seed from, no GPU, kernels from the repository; fresh caches per test."""
    empty = tmp_path / "no-samples"
    empty.mkdir()
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(empty))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(tmp_path / "own.duckdb"))  # never the checkout's own store
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    monkeypatch.delenv("KERNELBEAM_KERNELS_DIR", raising=False)
    envinfo.gpu_available.cache_clear()
    import streamlit as st

    st.cache_data.clear()


def vega_charts(at: AppTest) -> list[tuple[dict, pd.DataFrame]]:
    """The Vega-Lite charts of a render: (spec, the data frame sent with it) each."""
    import pyarrow as pa

    out = []
    for el in at.get("vega_lite_chart"):
        data = el.proto.data.data or (el.proto.datasets[0].data.data if el.proto.datasets else b"")
        frame = pa.ipc.open_stream(data).read_pandas() if data else pd.DataFrame()
        out.append((json.loads(el.proto.spec), frame))
    return out


def _layer(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    return frame[frame["layer"] == name]


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


TABLE_COLUMN = {"variants": "best run", "cases": "GFLOP/s", "cmp_table": "ratio B/A", "reg_table": "factor"}


def find_tables(at: AppTest, name: str) -> list:
    """Dataframes carry no key in the element tree; tables are told apart by a column of their own."""
    return [df.value for df in at.dataframe if TABLE_COLUMN[name] in df.value.columns]


def table(at: AppTest, name: str):
    (df,) = find_tables(at, name)
    return df


# --------------------------------------------------------------------------------------------- experiments


def test_experiments_one_row_per_variant_with_best_and_latest(demo_store):
    path, ids = demo_store
    at = open_page()
    assert not at.error
    df = table(at, "variants")
    assert len(df) == 14  # 10 householder + 3 wy + 1 CPU variant
    assert set(df["variant"]) == {f"householder_v{k}" for k in range(10)} | {
        "wy_v0",
        "wy_v1",
        "wy_v2",
        "geqrf_reference",
    }
    wy0 = df[df["variant"] == "wy_v0"].iloc[0]
    assert wy0["best run"] == f"run?id={ids['wy'][0]}" and wy0["latest run"] == f"run?id={ids['wy'][0]}"
    assert wy0["best geomean (µs)"] == pytest.approx(Store(path).get_run(ids["wy"][0])["geomean_us"], abs=0.05)
    timeout = df[df["variant"] == "householder_v7"].iloc[0]
    assert timeout["latest"] == "timeout" and math.isnan(timeout["best geomean (µs)"]) and timeout["passed"] == 0
    failed = df[df["variant"] == "wy_v2"].iloc[0]
    assert failed["latest"] == "failed"
    assert df[df["variant"] == "wy_v1"].iloc[0]["verdict"] == "promoted"
    # sorted by best geomean within each context (suite, GPU): a CPU geomean never ranks among GPU ones;
    # variants without a passed run last in their context
    contexts = list(dict.fromkeys(zip(df["suite"], df["GPU"], strict=True)))
    assert len(contexts) == 2
    for suite, gpu in contexts:
        best = df[(df["suite"] == suite) & (df["GPU"] == gpu)]["best geomean (µs)"].tolist()
        finite = [b for b in best if not math.isnan(b)]
        assert finite == sorted(finite) and best[: len(finite)] == finite
    assert {m.label: m.value for m in at.metric}["Variants"] == "14"


def test_experiments_progress_chart_spec(demo_store):
    at = open_page()
    ((spec, frame),) = vega_charts(at)
    runs, best = spec["layer"]
    assert runs["encoding"]["y"]["scale"]["type"] == "log" and best["encoding"]["y"]["scale"]["type"] == "log"
    # one context per chart (geomeans of different suites or GPUs do not share an axis): first the one the other
    # pages open on, that of the latest whole passed run, where it has two runs to draw; the demo's newest is its
    # one CPU smoke run, so the busiest comes first (the e2e test sees the CPU context first after a second run)
    assert at.selectbox(key="chart_ctx").value == "qr_v2 · NVIDIA H200"
    assert at.selectbox(key="chart_ctx").options[1] == "smoke · CPU (1 run)"
    at.selectbox(key="chart_ctx").select("qr_v2 · NVIDIA H200").run()
    ((spec, frame),) = vega_charts(at)
    runs, best = spec["layer"]
    points = _layer(frame, "run")
    assert points.groupby("family").size().to_dict() == {"householder": 9, "wy": 2}  # ten runs, one timed out;
    # three runs, one failed
    line = _layer(frame, "best")
    assert set(line["context"]) == {"qr_v2 · NVIDIA H200"} and best["mark"]["interpolate"] == "step-after"
    ys = line["y"].tolist()
    assert ys == sorted(ys, reverse=True) and ys[-1] == pytest.approx(points[points["family"] == "wy"]["y"].min())
    at.selectbox(key="chart_ctx").select("smoke · CPU").run()
    ((spec, frame),) = vega_charts(at)
    assert set(_layer(frame, "run")["family"]) == {"(none)"} and set(_layer(frame, "best")["context"]) == {
        "smoke · CPU"
    }

    # Issue 21: x is run order by default (the n-th passed run of the context, whole numbers), time on request;
    # each point names its variant and family on hover; the log axis reads round numbers; the legend picks.
    at.selectbox(key="chart_ctx").select("qr_v2 · NVIDIA H200").run()
    ((spec, frame),) = vega_charts(at)
    runs = spec["layer"][0]
    points = _layer(frame, "run")
    assert sorted(points["x"]) == list(range(1, 12)) and runs["encoding"]["x"]["axis"]["format"] == "d"
    hh = points[points["family"] == "householder"].iloc[0]
    assert hh["variant"].startswith("householder_v")
    assert {"variant", "family", "run_id"} <= {t["field"] for t in runs["encoding"]["tooltip"]}
    assert runs["params"][0]["bind"] == "legend"
    ticks = runs["encoding"]["y"]["axis"]["values"]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    at.radio(key="x").set_value("time").run()
    ((spec, frame),) = vega_charts(at)
    x_enc = spec["layer"][0]["encoding"]["x"]
    assert x_enc["type"] == "temporal" and x_enc["axis"]["format"] == "%b %d %H:%M"  # not Vega's ":30" ticks
    first = str(_layer(frame, "run")["x"].min())[:16]  # the domain from the first run, as a Vega-Lite DateTime
    assert "{year}-{month:02}-{date:02} {hours:02}:{minutes:02}".format(**x_enc["scale"]["domain"][0]) == first
    assert str(_layer(frame, "run")["x"].iloc[0]).startswith("2026-")  # timestamps


def test_log_ticks_read_as_round_numbers():
    wide = charts_mod.log_ticks(33.8, 54_687)["ticktext"]  # one step past each end: the axis reaches past the data
    assert wide == ["10", "30", "100", "300", "1,000", "3,000", "10,000", "30,000", "100,000"]
    assert charts_mod.log_ticks(3822, 4419)["ticktext"] == ["3,800", "4,000", "4,200", "4,400", "4,600"]
    narrow = charts_mod.log_ticks(3822.43, 3822.44, widen=True)  # the 3822.43, 3822.44
    assert narrow["ticktext"] == ["3,700", "3,750", "3,800", "3,850", "3,900"] and len(narrow["range"]) == 2
    assert charts_mod.log_ticks(9780, 9800)["ticktext"] == ["9,780", "9,785", "9,790", "9,795", "9,800"]
    # The shipped search (2,723-4,272 us) under the reference's 116,356: a tick inside it, not 5,000 the lowest.
    assert "3,000" in charts_mod.log_ticks(2723, 116_356)["ticktext"]


def test_experiments_filters_and_gpu(demo_store):
    at = open_page()
    at.selectbox(key="family").select("wy").run()
    assert set(table(at, "variants")["variant"]) == {"wy_v0", "wy_v1", "wy_v2"}
    at.selectbox(key="family").select("any").run()
    at.selectbox(key="status").select("failed").run()
    assert list(table(at, "variants")["variant"]) == ["wy_v2"]
    at.selectbox(key="status").select("any").run()
    at.date_input(key="dates").set_value((T0.date(), T0.date())).run()  # the CPU run was the next day
    assert "geqrf_reference" not in set(table(at, "variants")["variant"]) and len(table(at, "variants")) == 13
    at.date_input(key="dates").set_value(()).run()
    at.sidebar.selectbox(key="kb_gpu").select("CPU").run()
    df = table(at, "variants")
    assert list(df["variant"]) == ["geqrf_reference"] and list(df["GPU"]) == ["CPU"]


def test_the_sidebar_gpu_is_in_the_url(demo_store):
    """The sidebar's GPU lived in the session only: a shared link, Back or Forward left it as it was. It is `gpu` in
    the URL now, the name every page gives the GPU: read on every run, written on a change (All GPUs, the default,
    stays out), a GPU the store does not have said with the choices."""
    at = open_page(gpu="CPU")  # a shared link
    gpu = at.sidebar.selectbox(key="kb_gpu")
    assert gpu.value == "CPU" and list(table(at, "variants")["variant"]) == ["geqrf_reference"]
    gpu.select(H200).run()
    assert at.query_params["gpu"] in (H200, [H200]) and set(table(at, "variants")["GPU"]) == {H200}
    at.query_params["gpu"] = "CPU"  # Back: the URL before, in the same session
    at.run()
    assert at.sidebar.selectbox(key="kb_gpu").value == "CPU" and set(table(at, "variants")["GPU"]) == {"CPU"}
    at.sidebar.selectbox(key="kb_gpu").select("All GPUs").run()
    assert "gpu" not in at.query_params and len(table(at, "variants")) == 14
    at = open_page(gpu="TPU")
    (said,) = [w.value for w in at.sidebar.warning]
    assert "gpu “TPU” is not one of this page's choices here (All GPUs, CPU, NVIDIA H200)" in said, said
    assert at.sidebar.selectbox(key="kb_gpu").value == "All GPUs" and "gpu" not in at.query_params
    at = open_url("pages/regressions.py", gpu="CPU")  # every page reads it: no family has timed CPU runs
    assert at.sidebar.selectbox(key="kb_gpu").value == "CPU" and "on CPU" in texts(at.info)


def _cancelled_before_a_gpu(path: Path, run_id: str, variant: str, source: str, family: str | None) -> None:
    """A run cancelled while it waited for the device, as the runner records it: no GPU, no device, no case."""
    rec = make_record(run_id, variant=variant, source=source, path="kernels/blocked_wy_torch.py", family=family,
                      started=T0 + timedelta(hours=15), means=None, status="cancelled", gpu=None,
                      error="cancelled before the device was free")  # fmt: skip
    rec.run.update(device=None, sm_count=None, driver=None, cuda=None)
    rec.cases.clear()
    assert Store(path).finish_run(rec) is None


def test_a_run_cancelled_before_it_got_a_gpu_is_shown_with_its_variant(demo_store):
    """On the seeded store, fused_wy_tagged's run cancelled before it got a GPU had a row of its own on Experiments
    (GPU blank, family blank) beside the variant's H200 row, and Regressions listed "qr_v2 · None" for its file."""
    from tests.conftest import kernel_source

    path, ids = demo_store
    _cancelled_before_a_gpu(path, "wyc1cancelled", "wy_v1", kernel_source("wy", 11), None)  # a variant with runs
    _cancelled_before_a_gpu(path, "wyc3cancelled", "wy_v3", kernel_source("wy", 13), "wy")  # a new one, in wy
    assert Store(path).get_run("wyc1cancelled")["gpu"] is None  # the run itself still says it had none
    for at in (open_page(), open_page(gpu=H200)):
        df = table(at, "variants")
        assert df["GPU"].notna().all(), df[["variant", "GPU"]]
        wy1 = df[df["variant"] == "wy_v1"]
        assert len(wy1) == 1 and wy1.iloc[0]["GPU"] == H200 and wy1.iloc[0]["runs"] == 2
        assert wy1.iloc[0]["latest"] == "cancelled" and wy1.iloc[0]["family"] == "wy"
        assert list(df[df["variant"] == "wy_v3"]["GPU"]) == [H200]  # its family's GPU
    at = open_page()
    assert {m.label: m.value for m in at.metric}["Timed contexts"] == "2"  # H200 and CPU, no third
    assert any(o.startswith("qr_v2 · NVIDIA H200") for o in at.selectbox(key="chart_ctx").options)
    for store_read in (Store(path).run_contexts(), Store(path).history_contexts(path="kernels/blocked_wy_torch.py")):
        assert store_read["gpu"].notna().all(), store_read
    at = open_url("pages/regressions.py", path="kernels/blocked_wy_torch.py")
    assert at.selectbox(key="reg_ctx").options == ["qr_v2 · NVIDIA H200 (5 runs)"]  # three runs, two cancelled


def test_contexts_name_a_problem_once(demo_store):
    """With a vectoradd run in the store the contexts read "qr_v2 · qr_v2 · NVIDIA H200": the problem is named
    where its suite does not name it already."""
    path, _ = demo_store
    # the newest whole passed run's context (as the Leaderboard opens) comes first from its second run on; with
    # one run the busiest leads
    expected = (["qr_v2 · NVIDIA H200", "qr_v2 · smoke · CPU", "vectoradd · smoke · CPU"],
                ["vectoradd · smoke · CPU", "qr_v2 · NVIDIA H200", "qr_v2 · smoke · CPU"])  # fmt: skip
    for i, want in enumerate(expected):
        rec = make_record(f"vecadd{i}aaaaa", variant="vec", source="# vec\n", path="kernels/vec.py", family="wy",
                          started=T0 + timedelta(days=3 + i), means=BASE_US[:4], suite="smoke", gpu="CPU")  # fmt: skip
        rec.run.problem = "vectoradd"
        assert Store(path).finish_run(rec) is None
        options = [o.rsplit(" (", 1)[0] for o in open_page().selectbox(key="chart_ctx").options]  # less "(N runs)"
        assert options == want, options
    options = open_url("pages/regressions.py", family="wy").selectbox(key="reg_ctx").options
    assert options[0].startswith("qr_v2 · NVIDIA H200 (") and any(o.startswith("vectoradd · smoke") for o in options)


def test_experiments_progress_chart_follows_every_filter(demo_store):
    def scatter_points(at):
        ((_, frame),) = vega_charts(at)
        return _layer(frame, "run").groupby("family").size().to_dict()

    at = open_page()
    at.selectbox(key="status").select("failed").run()  # failed runs have no geomean: no chart, not every run's
    assert not vega_charts(at) and "No passed timed run" in texts(at.caption)
    at.selectbox(key="status").select("passed").run()
    at.selectbox(key="chart_ctx").select("qr_v2 · NVIDIA H200").run()  # it opens on the newer CPU run's
    assert scatter_points(at) == {"householder": 9, "wy": 2}
    at.selectbox(key="status").select("any").run()
    at.selectbox(key="family").select("wy").run()
    assert scatter_points(at) == {"wy": 2}
    at.selectbox(key="family").select("any").run()
    at.text_input(key="q").input("O'Brien").run()
    assert scatter_points(at) == {"householder": 1}
    at.text_input(key="q").input("").run()
    at.date_input(key="dates").set_value((T0.date(), T0.date())).run()  # the CPU run was the next day
    assert not [sb for sb in at.selectbox if sb.key == "chart_ctx"]  # the CPU context is out of the dates
    assert scatter_points(at) == {"householder": 9, "wy": 2}


def test_progress_points_downsampled_draw_the_same_best_line(tmp_path):
    """20,000 runs in one context: at most a few points per family and time slice, the same best-so-far steps."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_dashboard

    path = tmp_path / "bulk.duckdb"
    bench_dashboard.build_bulk(path, 20_000, 40, 2, 2)
    full = Store(path).progress_points()
    few = Store(path).progress_points(max_points=1000)
    assert len(full) > 18_000 and len(few) < len(full) / 3 and set(few["run_id"]) <= set(full["run_id"])
    assert (few["context_runs"] == len(full)).all()
    assert set(few["family"]) == set(full["family"])
    a, b = charts_mod.best_so_far(full), charts_mod.best_so_far(few)
    assert a["run_id"].tolist() == b["run_id"].tolist() and a["best_us"].tolist() == b["best_us"].tolist()
    assert few["geomean_us"].max() == full["geomean_us"].max()  # the extremes of the cloud stay
    assert len(Store(path).progress_points(max_points=len(full))) == len(full)  # under the cap: every run


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("O'Brien", {"householder_v4"}),  # a quote, in a note
        ('"blocked"', {"householder_v4"}),
        ("every shape", {"wy_v1"}),  # a verdict's reason
        ("WY_V", {"wy_v0", "wy_v1", "wy_v2"}),  # case-insensitive
        ("%", set()),  # no LIKE wildcards
        ("'; DROP TABLE runs; --", set()),
        ("' OR '1'='1", set()),
    ],
)
def test_experiments_search_is_literal_and_safe(demo_store, text, expected):
    path, _ = demo_store
    at = open_page()
    at.text_input(key="q").input(text).run()
    assert not at.exception and not at.error
    if expected:
        assert set(table(at, "variants")["variant"]) == expected
    else:
        assert not find_tables(at, "variants")
        assert "No runs match" in texts(at.info)
    assert Store(path).count_runs() == 14


def test_experiments_shares_search_in_url(demo_store):
    at = open_page(q="wy_v1")
    assert list(table(at, "variants")["variant"]) == ["wy_v1"]


# ---------------------------------------------------------------------------------------------------- run


def test_run_page_rates_keep_two_significant_digits_below_one():
    """A CPU's smoke case moves 0.008 GB/s: rounded to 0.1 it read "0"."""
    cases = pd.DataFrame([
        {"case_idx": 0, "spec": "tiny", "passed": True, "mean_us": 1000.0, "err_us": 1.0, "flops": 41e3, "bytes": 8e3},
        {"case_idx": 1, "spec": "big", "passed": True, "mean_us": 1.0, "err_us": 0.1, "flops": 17_927_345.0,
         "bytes": 3e6},
    ])  # fmt: skip
    table = views.run_case_table(cases)
    assert list(table["GFLOP/s"]) == [0.041, 17927.3] and list(table["GB/s"]) == [0.008, 3000.0]


def test_a_test_mode_run_shows_no_empty_timing_columns():
    """A test-mode run times nothing: its case table shows the verdicts and residuals, not seven empty columns."""
    cases = pd.DataFrame([
        {"case_idx": i, "spec": f"t{i}", "passed": i == 0, "mean_us": None, "err_us": None, "runs": None,
         "factor_res": 0.5, "message": "" if i == 0 else "factor residual above the gate"}
        for i in range(2)
    ])  # fmt: skip
    table = views.run_case_table(cases)
    assert list(table.columns) == ["#", "case", "ok", "factor res", "tril res", "recon res", "orth res", "message"]
    assert list(table["ok"]) == ["pass", "FAIL"]


def test_hover_table_escapes_and_puts_the_full_name_in_the_tooltip():
    """A kernel's name comes from a profile of someone's code: escaped, quotes included, in the cell and its title."""
    df = pd.DataFrame({"kernel": ["k<1>"], "calls": [3], "device (µs)": [1234.56], "self (µs)": [float("nan")],
                       "full name": ['void k<1>(float*, "x")']})  # fmt: skip
    out = views.hover_table_html(df, {"kernel": "full name"})
    assert '<td title="void k&lt;1&gt;(float*, &quot;x&quot;)">k&lt;1&gt;</td>' in out
    assert '<td class="kb-num">1,234.6</td><td></td></tr>' in out and "full name" not in out


def test_run_page_cases_samples_profile_source_env(demo_store):
    path, ids = demo_store
    at = open_page("pages/run.py", id=ids["profiled"])
    assert not at.error
    cases = table(at, "cases")
    assert len(cases) == 12 and set(cases["ok"]) == {"pass"}
    raw = Store(path).case_results(ids["profiled"])
    row, rec = cases.iloc[3], raw.iloc[3]
    flops = rec["batch"] * (4 / 3 * rec["n"] ** 3 + 2 * rec["n"] ** 2 + 14 * rec["n"] / 3)
    assert row["GFLOP/s"] == pytest.approx(flops / (rec["mean_us"] * 1e3), abs=0.05)  # to 0.1, with separators
    assert row["mean ± err (µs)"] == f"{views.fmt_us(rec['mean_us'])} ± {views.fmt_us(rec['err_us'])}"
    assert row["factor res"] == pytest.approx(rec["factor_res"]) and row["orth res"] == pytest.approx(rec["orth_res"])
    ((box, samples),) = vega_charts(at)
    # Each case on a linear axis of its own, so a 20 µs case and a 10 ms case both show their spread.
    rows = box["vconcat"]
    assert {r["mark"]["type"] for r in rows} == {"boxplot"} and box["resolve"]["scale"]["x"] == "independent"
    assert "type" not in rows[0]["encoding"]["x"]["scale"]  # linear
    assert len(rows) == 12 and rows[3]["transform"][0]["filter"]["equal"] == "640x512 c2 dense"
    # a grid of fixed panels ran past the window (six a row at 1440 px, four at 800): a row per case, as wide as the
    # page (test_e2e.py checks it in Chromium)
    assert box["autosize"] == charts_mod.FIT_WIDTH
    per_case = samples.groupby("case").size()  # every sample, not a summary: the browser draws the boxes
    assert len(per_case) == 12 and (per_case > 5).all()
    frames = {tuple(df.value.columns): df.value for df in at.dataframe}
    # the top kernels: short names, each with its whole signature on hover (a dataframe cell has no tooltip)
    (kernels,) = [h.proto.body for h in at.get("html") if "kb-hover" in h.proto.body]
    assert '<td title="householder_panel_kernel">householder_panel_kernel</td><td class="kb-num">96</td>' in kernels
    assert "<th>full name</th>" not in kernels
    per_case = next(v for cols, v in frames.items() if "launches" in cols)
    assert per_case["launches"].tolist() == [40 + i for i in range(12)]
    assert any(c.language == "python" and "householder v4" in c.value for c in at.code)
    env = next(v for cols, v in frames.items() if cols == ("field", "value")).set_index("field")["value"]
    assert env["gpu"] == H200
    started = Store(path).get_run(ids["profiled"])["started_at"]
    assert env["started at"] == f"{started:%Y-%m-%d %H:%M:%S}" and env["finished at"]  # to the second
    assert "O'Brien" in texts(at.markdown)
    geomean = views.fmt_us(Store(path).get_run(ids["profiled"])["geomean_us"])
    assert [m.value for m in at.metric][:2] == [f"{geomean} µs", "12 / 12"]


def test_a_long_note_shows_its_head_and_keeps_the_rest_in_an_expander(tmp_path, monkeypatch):
    """A knob variant's note carries its family's whole docstring: shown whole it filled the Run page's first screen
    (about 3,500 characters for the shipped fused_wy_x2 runs). The head ends at a sentence; the rest is one click
    away, not lost; a short note shows whole, with no expander."""
    from pages.ui.text import NOTE_HEAD_CHARS, head_and_rest

    first = "Hypothesis: two TF32 products instead of three. "
    long = first + " ".join(f"Session {i}: knob _K{i} measured, run r{i}, kept." for i in range(80))
    head, rest = head_and_rest(long)
    assert len(head) <= NOTE_HEAD_CHARS and head.endswith(".") and f"{head} {rest}" == long
    assert head_and_rest("short note") == ("short note", "")
    words = " ".join(["tf32x2"] * 100)  # no sentence end in reach: cut between words
    cut, left = head_and_rest(words)
    assert cut.endswith("tf32x2") and left.startswith("tf32x2") and f"{cut} {left}" == words
    path = tmp_path / "notes.duckdb"
    common = {"source": "def custom_kernel(data):\n    return data\n", "family": "f", "means": None}
    Store(path).finish_run(make_record("longnote0001", variant="k", path="k.py", started=T0, note=long, **common))
    Store(path).finish_run(make_record("shortnote001", variant="k", path="k.py", started=T0, note="short", **common))
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_page("pages/run.py", id="longnote0001")
    (note,) = [m.value for m in at.markdown if m.value.startswith("**Note / hypothesis:**")]
    assert "two TF32 products" in note and "Session 79" not in note and note.endswith(" …")
    (box,) = [e for e in at.expander if "The rest of the note" in e.label]
    assert f"{len(rest):,} characters" in box.label and "Session 79" in texts(box.markdown)
    at = open_page("pages/run.py", id="shortnote001")
    assert not [e for e in at.expander if "The rest of the note" in e.label]


def test_profile_kernel_names_are_shortened():
    """A C++ signature is cut to its last two scopes without template or call arguments; the full name stays."""
    name = ("void at::native::(anonymous namespace)::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")  # fmt: skip
    assert short_kernel(name) == "native::vectorized_elementwise_kernel"
    assert short_kernel("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn"
    assert short_kernel("x" * 90).endswith("…") and len(short_kernel("x" * 90)) == 40
    kernels = views.profile_tables(pd.DataFrame(), pd.DataFrame({"kernel": [name], "calls": [3], "device_us": [1.26],
                                                                   "self_us": [0.0]}))["kernels"]  # fmt: skip
    assert kernels.iloc[0].to_dict() == {"kernel": "native::vectorized_elementwise_kernel", "calls": 3,
                                         "device (µs)": 1.3, "self (µs)": 0.0, "full name": name}  # fmt: skip


def test_run_page_unknown_and_ambiguous_ids(demo_store):
    at = open_page("pages/run.py", id="no-such-run")
    # User text is escaped so Markdown leaves it as typed (`--` stays two dashes).
    assert "No run matches **no\\-such\\-run**" in texts(at.error)
    at = open_page("pages/run.py", id="hh0")  # a prefix of ten runs: listed, not "no run matches"
    assert "is ambiguous: 10 runs start with it" in texts(at.error)
    listed = [df.value for df in at.dataframe if "run" in df.value.columns][0]
    assert len(listed) == 10 and listed["run"].str.startswith("run?id=hh0").all()
    assert {"GPU", "started"} <= set(listed.columns) and not {"gpu", "started_at"} & set(listed.columns)
    at = open_page("pages/run.py", id="wy01")  # a unique prefix
    assert not at.error and "wy\\_v1" in texts(at.subheader)  # escaped: rendered as typed
    at = open_page("pages/run.py", id="'; DROP TABLE runs; --")
    assert "No run matches" in texts(at.error)


def test_run_and_compare_pickers_follow_and_write_the_url(demo_store):
    """The URL is the source of truth (Back in the browser restores it); a pick writes it with st.query_params."""
    _, ids = demo_store
    a, b = ids["wy"][0], ids["householder"][1]
    at = open_page("pages/run.py", id=a)
    assert at.selectbox(key="run_pick").value == a and at.text_input(key="id").value == a
    at.selectbox(key="run_pick").select(b).run()
    assert at.query_params["id"] == b and at.text_input(key="id").value == b
    assert "householder" in texts(at.subheader)
    at.text_input(key="id").input(a).run()  # typed: the URL follows too
    assert at.query_params["id"] == a and at.selectbox(key="run_pick").value == a
    at.query_params["id"] = b  # what Back/Forward does: a new URL, same session
    at.run()
    assert at.selectbox(key="run_pick").value == b and at.text_input(key="id").value == b

    at = open_page("pages/compare.py", a=a, b=b)
    assert (at.selectbox(key="pick_a").value, at.selectbox(key="pick_b").value) == (a, b)
    at.selectbox(key="pick_b").select(ids["wy"][1]).run()
    assert at.query_params["a"] == a and at.query_params["b"] == ids["wy"][1]
    assert at.text_input(key="b").value == ids["wy"][1]
    at.query_params["b"] = b
    at.run()
    assert at.selectbox(key="pick_b").value == b and at.text_input(key="b").value == b


def test_run_page_failed_and_timeout_runs(demo_store):
    _, ids = demo_store
    at = open_page("pages/run.py", id=ids["timeout"])
    assert "timeout" in texts(at.error)
    assert "No timed samples" in texts(at.info)
    at = open_page("pages/run.py", id=ids["wy"][2])
    cases = table(at, "cases")
    assert cases.iloc[4]["ok"] == "FAIL" and "residual" in cases.iloc[4]["message"]
    # the banner says why, not only which case: the message sits far right in the table
    assert "First failure, 60x1024 c2 s75342 dense: factorization residual" in texts(at.error)


def test_verdict_form_writes_and_shows_in_experiments(own_demo_store):
    path, ids = own_demo_store
    at = open_page("pages/run.py", id=ids["householder"][9])
    at.radio(key="verdict_choice").set_value("rejected")
    at.text_input(key="verdict_reason").input("slower on 640x512 dense")
    at.button(key="verdict_submit").click().run()
    assert not at.exception and "Recorded: rejected" in texts(at.success)
    assert "Recorded: rejected" in texts(at.tabs[6].success)  # where the form is (the tab the browser keeps open)
    bundle = Store(path).run_bundle(ids["householder"][9])
    assert bundle["verdicts"].iloc[0]["verdict"] == "rejected"
    at.switch_page("pages/experiments.py").run()
    df = table(at, "variants")
    row = df[df["variant"] == "householder_v9"].iloc[0]
    assert row["verdict"] == "rejected"


# ------------------------------------------------------------------------------------------------ compare


def test_compare_per_case_marks_charts_and_diff(demo_store):
    _, ids = demo_store
    at = open_page("pages/compare.py", a=ids["before_regression"], b=ids["regressed"])
    assert not at.error and not at.warning
    df = table(at, "cmp_table")
    assert len(df) == 12
    slow = df[df["case"] == "640x512 c2 dense"].iloc[0]
    assert slow["ratio B/A"] == pytest.approx(1.5, rel=0.02) and slow["mark"] == "+" and slow["verdict"] == "slower"
    others = df[df["case"] != "640x512 c2 dense"]
    assert set(others["mark"]) == {"~"} and set(others["verdict"]) == {"same"}
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Geomean ratio B/A"]) == pytest.approx(1.5 ** (1 / 12), rel=0.01)
    assert metrics["Cases faster / slower"] == "0 / 1"
    (bars, means), (speedup, ratios) = vega_charts(at)
    bar, errors = bars["layer"]
    assert bars["encoding"]["xOffset"]["field"] == "side" and bar["encoding"]["y"]["scale"]["type"] == "log"
    assert means.groupby("side").size().tolist() == [12, 12]  # grouped: A and B per case
    assert errors["encoding"]["y"]["field"] == "lo" and (means["hi"] - means["mean"]).gt(0).all()  # error bars
    # At 800 px the two runs' names side by side ran past the chart: "B: kb/fused_wy (157f275d5" was cut. One a row.
    assert bar["encoding"]["color"]["legend"]["columns"] == 1
    bar, text, _ = speedup["layer"]
    assert bar["encoding"]["y2"] == {"datum": 1.0} and bar["encoding"]["y"]["scale"]["type"] == "log"  # from 1.0
    slow = ratios.iloc[3]
    assert slow["case"] == "640x512 c2 dense" and slow["speedup"] == pytest.approx(1 / 1.5, rel=0.02)
    colours = bar["encoding"]["color"]["scale"]
    assert colours["range"][colours["domain"].index(slow["verdict"])] == charts_mod.MARK_COLOURS["slower"]
    assert slow["label"] == f"{slow['speedup']:.3f}×" and set(ratios.drop(3)["label"]) == {""}
    unified = next(c for c in at.code if c.language == "diff")
    assert "-BLOCK = 32" in unified.value and "+BLOCK = 48" in unified.value
    side = at.get("html")[0].proto.body
    assert "kb-diff" in side and "BLOCK = <span" in side.replace('<span class="kb-ch">', "<span")


def test_compare_gpu_mismatch_warns_and_does_not_compare(demo_store):
    _, ids = demo_store
    at = open_page("pages/compare.py", a=ids["householder"][0], b=ids["cpu"])
    assert "Different GPUs" in texts(at.warning)
    df = table(at, "cmp_table")
    assert set(df["mark"]) == {"x"} and df["ratio B/A"].isna().all()
    assert not vega_charts(at)


def test_compare_bad_ids(demo_store):
    _, ids = demo_store
    at = open_page("pages/compare.py", a=ids["householder"][0], b="nope'--")
    assert "No run matches **nope'\\-\\-**" in texts(at.error)
    at = open_page("pages/compare.py")
    assert "Choose a baseline run A" in texts(at.info)


def test_run_and_compare_take_a_variant_name_as_the_cli_does(demo_store):
    """`compare householder_v4 householder_v5` worked in the CLI (a variant name: its newest run), and the same
    link, `compare?a=householder_v4&b=householder_v5`, said "No run matches householder_v4"."""
    _, ids = demo_store
    at = open_url("pages/compare.py", a="householder_v4", b="householder_v5")
    assert not at.error and len(table(at, "cmp_table")) == 12
    assert f"`{ids['before_regression']}`" in texts(at.markdown) and f"`{ids['regressed']}`" in texts(at.markdown)
    at = open_url("pages/run.py", id="householder_v5")
    assert not at.error and ids["regressed"] in texts(at.caption)
    at = open_url("pages/run.py", id="nope")
    assert "give a run id, a unique prefix or a variant name" in texts(at.error)


def test_compare_pick_from_recent_runs(demo_store):
    _, ids = demo_store
    at = open_page("pages/compare.py")
    at.selectbox(key="pick_a").select(ids["wy"][0]).run()
    at.selectbox(key="pick_b").select(ids["wy"][1]).run()
    assert at.text_input(key="a").value == ids["wy"][0] and at.text_input(key="b").value == ids["wy"][1]
    assert len(table(at, "cmp_table")) == 12


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_compare_git_diff_between_commits(demo_store, tmp_path):
    """Two runs recorded at two commits of a repository: the page shows `git diff` between them."""
    path, _ = demo_store
    repo = tmp_path / "repo"
    (repo / "kernels").mkdir(parents=True)
    _git(repo, "init", "-q")
    kernel = repo / "kernels" / "k.py"
    commits = []
    for k, block in enumerate((32, 64)):
        kernel.write_text(f"def custom_kernel(data):\n    BLOCK = {block}\n    return data\n")
        (repo / "README").write_text(f"readme {k}\n")
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"v{k}")
        commits.append(_git(repo, "rev-parse", "HEAD"))
    for k, commit in enumerate(commits):
        rec = make_record(
            f"git{k}dddddddd", variant="k", source=kernel.read_text() + f"# {k}\n", path=str(kernel),
            family="git", started=T0, means=list(BASE_US), commit=commit, seed=50 + k,
        )  # fmt: skip
        rec.run.git_repo = str(repo)
        assert Store(path).finish_run(rec) is None
    at = open_page("pages/compare.py", a="git0dddddddd", b="git1dddddddd")
    # The recorded git_repo is data and never used: the diff comes once the user names the repository.
    assert not [c for c in at.code if c.language == "diff" and "diff --git" in c.value]
    at.text_input(key="git_repo_here").set_value(str(repo)).run()
    diff = [c.value for c in at.code if c.language == "diff" and "diff --git" in c.value]
    assert len(diff) == 1 and "-    BLOCK = 32" in diff[0] and "+    BLOCK = 64" in diff[0]
    assert "README" not in diff[0]  # only the kernel files by default
    at.toggle[0].set_value(False).run()
    diff = [c.value for c in at.code if c.language == "diff" and "diff --git" in c.value]
    assert "README" in diff[0]


# -------------------------------------------------------------------------------------------- regressions


def test_regressions_family_table_links_and_timeline(demo_store):
    _, ids = demo_store
    at = open_url("pages/regressions.py", family="householder")
    assert not at.error
    df = table(at, "reg_table")
    assert len(df) == 1
    row = df.iloc[0]
    assert row["case"] == "640x512 c2 dense" and row["run"] == ids["regressed"]
    assert row["factor"] == pytest.approx(1.5, rel=0.02)
    assert row["before (µs)"] == pytest.approx(BASE_US[3], rel=0.02)
    assert row["after (µs)"] == pytest.approx(1.5 * BASE_US[3], rel=0.02)
    assert row["compare"] == f"compare?a={ids['before_regression']}&b={ids['regressed']}"
    ((spec, frame),) = vega_charts(at)  # one chart, a panel per case, each case its own log axis
    cases = [panel["transform"][0]["filter"]["equal"] for panel in spec["vconcat"]]
    assert len(cases) == 12 and spec["resolve"]["scale"]["y"] == "independent"
    # as wide as the page: Streamlit sizes the panels, Vega-Lite fits the axes in (a facet grid ran past 800 px;
    # test_e2e.py checks it in Chromium)
    assert spec["autosize"] == charts_mod.FIT_WIDTH
    layers = spec["vconcat"][0]["layer"]
    assert all(lay["encoding"]["y"]["scale"]["type"] == "log" for lay in layers if "y" in lay["encoding"])
    means = _layer(frame, "mean")
    assert means["case"].nunique() == 12 and means["err"].notna().all()  # the standard error on hover, not as bars
    assert any(t["field"] == "err" for lay in layers for t in lay["encoding"].get("tooltip", []))
    assert cases[3] == "640x512 c2 dense" and len(means[means["case"] == cases[3]]) == 9  # the timeout: no point
    (change,) = _layer(frame, "change").itertuples()
    assert (change.case, change.x, change.kind) == (cases[3], 4.5, "regression")
    assert next(lay for lay in layers if "'change'" in lay["transform"][0]["filter"])["mark"]["strokeDash"]
    # follow the link: the compare view shows the regression and its source diff
    a, b = row["compare"].split("?")[1].replace("a=", "").replace("b=", "").split("&")
    at2 = open_page("pages/compare.py", a=a, b=b)
    cmp = table(at2, "cmp_table")
    assert cmp[cmp["case"] == "640x512 c2 dense"].iloc[0]["verdict"] == "slower"


def test_regressions_by_kernel_path_and_bad_scope(demo_store):
    _, ids = demo_store
    at = open_url("pages/regressions.py", path="kernels/householder_torch.py")
    assert at.radio[0].value == "Kernel file"
    assert list(table(at, "reg_table")["run"]) == [ids["regressed"]]
    at = open_url("pages/regressions.py", family="no-such-family")
    assert "No runs with family **no\\-such\\-family**" in texts(at.error)
    assert at.selectbox(key="reg_family").value is None and not vega_charts(at)  # a box to pick another family
    at.selectbox(key="reg_family").select("wy").run()
    assert at.query_params["family"] == "wy" and not at.error
    at = open_url("pages/regressions.py", path="kernels/no_such_file.py")  # not another file's results
    assert "No runs with kernel file" in texts(at.error) and not vega_charts(at) and not find_tables(at, "reg_table")
    at = open_url("pages/regressions.py", family="wy", window="all runs", improvements="True")
    assert at.selectbox(key="reg_window").value == "all runs" and at.toggle(key="reg_impr").value  # from the URL
    at.toggle(key="reg_impr").set_value(False).run()
    assert "improvements" not in at.query_params and at.query_params["window"] == "all runs"  # the default: left out
    at = open_url("pages/regressions.py", family="wy")  # no step along wy
    assert "No regression detected" in texts(at.success)


# ---------------------------------------------------------------------------------------------- benchmark


def test_benchmark_page_without_gpu(own_demo_store):
    at = open_page("pages/benchmark.py")
    assert "No GPU here" in texts(at.info)
    kernels = at.selectbox(key="bm_kernel").options
    assert "geqrf_reference.py" in kernels and not any(k.startswith("bench/") for k in kernels)
    suite = at.selectbox(key="bm_suite")
    assert suite.options == ["smoke"] and suite.disabled


def test_benchmark_refuses_paths_outside_the_kernels_folder(own_demo_store, tmp_path, monkeypatch):
    path, _ = own_demo_store
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    (kdir / "ok.py").write_text("def custom_kernel(data):\n    return data\n")
    outside = tmp_path / "evil.py"
    outside.write_text("def custom_kernel(data):\n    return data\n")
    (kdir / "link.py").symlink_to(outside)
    monkeypatch.setenv("KERNELBEAM_KERNELS_DIR", str(kdir))
    for bad, message in (
        ("../evil.py", "outside the kernels folder"),
        (str(outside), "outside the kernels folder"),
        ("link.py", "outside the kernels folder"),  # a symlink pointing out
        ("/etc/passwd", "outside the kernels folder"),
        ("missing.py", "no kernel file"),
        ("ok.txt", "not a Python file"),
    ):
        at = open_page("pages/benchmark.py")
        assert at.selectbox(key="bm_kernel").options == ["ok.py"]
        at.text_input(key="bm_path").input(bad)
        at.button(key="bm_start").click().run()
        assert not at.exception
        assert message in texts(at.error), (bad, texts(at.error))
    assert not jobs.list_jobs(path)


def test_benchmark_starts_a_cpu_job_and_links_the_run(own_demo_store):
    path, _ = own_demo_store
    at = open_page("pages/benchmark.py")
    at.selectbox(key="bm_kernel").select("geqrf_reference.py")
    at.selectbox(key="bm_mode").select("test")
    at.multiselect(key="bm_cases").select(0).select(1)
    at.text_input(key="bm_family").input("reference")
    at.button(key="bm_start").click().run()
    assert not at.error and "Started job" in texts(at.success)
    (job,) = jobs.list_jobs(path)
    assert job.spec["suite"] == "smoke" and job.spec["cases"] == [0, 1] and job.spec["request"]["trigger"] == "ui"
    final = jobs.wait(job, timeout=120)
    assert final["state"] == "finished" and final["status"] == "passed", jobs.log_tail(job)
    run = Store(path).get_run(final["run_id"])
    assert run["trigger"] == "ui" and run["family"] == "reference" and run["gpu"] == "CPU"
    at = open_page("pages/benchmark.py")  # a reload finds the job on disk
    assert "finished: **passed**" in texts(at.success)
    links = [el.proto for el in at.get("page_link")]
    assert any(f"open run {final['run_id']}" in p.label for p in links)
    at = open_page()
    assert "geqrf_reference" in set(table(at, "variants")["variant"])


def test_benchmark_starts_a_paired_ab_session_and_links_its_verdict(own_demo_store):
    path, _ = own_demo_store
    at = open_page("pages/benchmark.py")
    at.selectbox(key="bm_kernel").select("householder_torch.py")
    at.multiselect(key="bm_cases").select(0)
    at.checkbox(key="bm_ab").check()
    at.button(key="bm_start").click().run()
    assert "Choose the baseline (A) of the A/B session." in texts(at.error) and not jobs.list_jobs(path)
    at.selectbox(key="bm_ab_baseline").select("geqrf_reference.py")
    at.number_input(key="bm_ab_rounds").set_value(2)
    at.text_input(key="bm_note").input("column by column")
    at.button(key="bm_start").click().run()
    assert not at.error and "Started job" in texts(at.success)
    (job,) = jobs.list_jobs(path)
    final = jobs.wait(job, timeout=300)
    assert final["state"] == "finished" and final["status"] == "passed", jobs.log_tail(job)
    assert final["done"] == final["total"] == 4, final  # every case of every run counted (it stopped at the first's)
    a, b = final["a_runs"], final["b_runs"]
    runs = {r: Store(path).get_run(r) for r in a + b}
    assert len(a) == len(b) == 2 and {run["pair_id"] for run in runs.values()} == {final["pair_id"]}
    assert [(runs[r]["path"], runs[r]["pair_round"]) for r in a] == [("kernels/geqrf_reference.py", r) for r in (0, 1)]
    assert [runs[r]["path"] for r in b] == ["kernels/householder_torch.py"] * 2
    assert runs[b[0]]["note"] == "column by column" and runs[a[0]]["note"] is None  # the note is the candidate's
    at = open_page("pages/benchmark.py")
    assert "against **kernels/geqrf_reference.py** (2 rounds, A/B)" in texts(at.success)
    links = [el.proto for el in at.get("page_link")]
    assert any(f"compare the pair {final['pair_id']}" in p.label for p in links)


def test_an_ab_job_refuses_what_a_paired_session_cannot_time(own_demo_store):
    path, _ = own_demo_store
    for extra, words in (
        ({"mode": "test"}, "benchmarks only"),
        ({"profile": True}, "benchmarks only"),
        ({"rounds": 1}, "at least 2 rounds"),
        ({"ab_baseline": "../app.py"}, "under"),
    ):
        opts = {"suite": "smoke", "mode": "benchmark", "ab_baseline": "geqrf_reference.py", **extra}
        with pytest.raises(ValueError, match=words):
            jobs.start_job(path, "householder_torch.py", **opts)
    assert not jobs.list_jobs(path)


def test_job_cancel_records_a_cancelled_run(own_demo_store):
    path, _ = own_demo_store
    # a kernel that sleeps in each call, so the job is still running when the page reruns on the click (a real
    # kernel's smoke benchmark could end in between on a fast machine, and then the page shows no Cancel button)
    job = jobs.start_job(path, "slow_calls.py", kernels_dir=ROOT / "tests" / "variants", suite="smoke",
                         mode="benchmark", device="cpu")  # fmt: skip
    deadline = time.monotonic() + 60
    while jobs.status(job)["state"] in ("starting",) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert jobs.status(job)["state"] == "running"
    at = open_page("pages/benchmark.py")  # the running job shows with its progress and a Cancel button
    assert "running" in texts(at.markdown) and "slow_calls.py" in texts(at.markdown)
    at.button(key=f"cancel_{job.job_id}").click().run()
    assert not at.exception and job.cancel_file.exists()
    final = jobs.wait(job, timeout=60)
    assert final["state"] == "finished" and final["status"] == "cancelled"
    assert Store(path).get_run(final["run_id"])["status"] == "cancelled"


def test_a_first_call_without_progress_is_said_long_before_the_compile_budget_ends(own_demo_store, tmp_path):
    """Issue 21: a kernel whose first call hangs holds the device for the whole compile budget; the Benchmark page
    says so (with the time it has waited) after a quarter of a short budget, set from the page's own option, and
    the device queue links the run, which is one of the open store's."""
    path, _ = own_demo_store
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "hangs_first.py").write_text("import time\n\n\ndef custom_kernel(data):\n    time.sleep(120)\n")
    job = jobs.start_job(path, "hangs_first.py", suite="smoke", mode="test", cases=[0], kernels_dir=kernels,
                         device="cpu", compile_timeout=20)  # fmt: skip
    # 20 s, not less: the budget's clock starts with the worker, whose own start took over 8 s in a loaded CI run,
    # so the kernel's import was never reached and no stall could be said
    assert job.spec["request"]["compile_timeout"] == 20
    deadline = time.monotonic() + 90
    while not jobs.first_call_stalled(job, jobs.status(job)) and time.monotonic() < deadline:
        time.sleep(0.3)
    at = open_page("pages/benchmark.py")
    shown = " ".join(p.proto.text for p in at.get("progress"))
    assert re.search(r"no progress: the first call has not returned after \d+ s; the compile budget ends in \d+ s",
                     shown), shown  # fmt: skip
    run_id = jobs.status(job)["run_id"]
    assert any(f"[run {run_id}](run?id={run_id})" in i.value for i in at.info), texts(at.info)
    final = jobs.wait(job, timeout=60)
    assert final["status"] == "failed" and "compiling took longer than 20 s" in final["error"], final


def test_job_that_cannot_start_says_why(demo_store, tmp_path):
    path, _ = demo_store
    job = jobs.start_job(path, "geqrf_reference.py", suite="smoke", parent="no-such-parent")
    final = jobs.wait(job, timeout=60)
    assert final["state"] == "died" and "no-such-parent" in final["error"]


def test_resolve_kernel(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "k.py").write_text("def custom_kernel(d):\n    return d\n")
    assert jobs.resolve_kernel("sub/k.py", tmp_path) == (tmp_path / "sub" / "k.py").resolve()
    assert jobs.list_kernels(tmp_path) == ["sub/k.py"]
    for bad in ("", "../x.py", "sub/../../x.py", "sub/k.py\x00"):
        with pytest.raises(ValueError):
            jobs.resolve_kernel(bad, tmp_path)
    # a chosen problem folder's own files too, and nothing beside it
    problem = tmp_path / "problems" / "p"
    problem.mkdir(parents=True)
    (problem / "submission.py").write_text("def custom_kernel(d):\n    return d\n")
    (tmp_path / "problems" / "other.py").write_text("def custom_kernel(d):\n    return d\n")
    kernels = tmp_path / "sub"
    assert jobs.resolve_kernel(problem / "submission.py", kernels, problem) == (problem / "submission.py").resolve()
    for bad in (problem / "submission.py", tmp_path / "problems" / "other.py"):
        with pytest.raises(ValueError, match="outside the kernels folder"):
            jobs.resolve_kernel(bad, kernels, problem if bad.name == "other.py" else None)


# ------------------------------------------------------------------------------------- stores, bad inputs


@pytest.mark.parametrize("page", PAGES)
def test_not_a_store_gives_a_clear_error(bad_store, page):
    at = open_page(page)
    assert "not a KernelBeam store" in texts(at.error)


@pytest.mark.parametrize("page", PAGES[:2])
def test_a_store_from_a_newer_tracker_says_so(demo_store, page):
    path, _ = demo_store
    with duckdb.connect(str(path)) as con:
        con.execute("INSERT INTO schema_version VALUES (?, now())", [store_mod.SCHEMA_VERSION + 1])
    at = open_page(page)
    assert "newer than this dashboard" in texts(at.error) and not at.exception


@pytest.mark.parametrize("page", PAGES[:2])
def test_a_store_from_an_older_tracker_says_how_to_upgrade_it_and_is_left_as_it_is(demo_store, tmp_path, page,
                                                                                    monkeypatch):  # fmt: skip
    """Not the dashboard's own store: never migrated here (today's reads would fail on its columns), refused with
    the command that upgrades it."""
    path, _ = demo_store
    old = old_store(tmp_path / "old.duckdb", 5, path)
    monkeypatch.setenv("KERNELBEAM_STORE", str(old))
    at = open_page(page)
    said = texts(at.error)
    assert "written by an older KernelBeam (store schema v5" in said and not at.exception
    assert f"this one reads v{store_mod.SCHEMA_VERSION}" in said and f"`python -m tracker list --store {old}`" in said
    with Store(old).connect(read_only=True) as con:
        assert store_mod.schema_version(con) == 5


def test_its_own_store_from_an_older_tracker_is_upgraded_and_shown(demo_store, tmp_path, monkeypatch):
    path, _ = demo_store
    old = old_store(tmp_path / "old.duckdb", 5, path)
    monkeypatch.setenv("KERNELBEAM_STORE", str(old))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(old))
    at = open_page()
    assert not at.error and f"{Store(path).count_runs()} runs" in texts(at.sidebar.caption)
    with Store(old).connect(read_only=True) as con:
        assert store_mod.schema_version(con) == store_mod.SCHEMA_VERSION
    assert find_tables(at, "variants")


@pytest.mark.parametrize("page", PAGES[:4])
def test_empty_store_says_so(empty_store, page):
    at = open_page(page)
    assert "has no runs yet" in texts(at.info) and not at.error


def test_missing_store_and_benchmark_on_empty_store(tmp_path, monkeypatch):
    """The dashboard's own store is created when missing; other paths are never created (see test_safety)."""
    monkeypatch.setenv("KERNELBEAM_STORE", str(tmp_path / "new.duckdb"))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(tmp_path / "new.duckdb"))
    at = open_page()
    assert "has no runs yet" in texts(at.info)
    at = open_page("pages/benchmark.py")
    assert not at.error and at.button(key="bm_start")


def test_empty_store_is_seeded_from_samples(demo_store, tmp_path, monkeypatch):
    path, ids = demo_store
    samples = tmp_path / "samples"
    export_runs(path, samples / "h200-2026-03", ids["wy"])
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(samples))
    fresh = tmp_path / "fresh.duckdb"
    monkeypatch.setenv("KERNELBEAM_STORE", str(fresh))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(fresh))
    at = open_page()
    assert "Seeded 3 runs" in texts(at.sidebar.success)
    assert set(table(at, "variants")["variant"]) == {"wy_v0", "wy_v1", "wy_v2"}
    assert Store(fresh).count_runs() == 3


def test_store_from_script_argument(demo_store, monkeypatch):
    path, _ = demo_store
    monkeypatch.setenv("KERNELBEAM_STORE", "/nonexistent/elsewhere.duckdb")
    monkeypatch.setattr(sys, "argv", ["app.py", "--store", str(path)])
    at = open_page()
    assert at.sidebar.text_input(key="kb_store").value == str(path)
    assert len(table(at, "variants")) == 14


def test_an_emptied_store_box_opens_the_dashboards_store_again(demo_store):
    """Clearing the sidebar's Store box opened "experiments.duckdb" in the server's folder ("There is no store at
    experiments.duckdb"), not the store the dashboard was started on ($KERNELBEAM_STORE here)."""
    path, _ = demo_store
    at = open_page()
    at.sidebar.text_input(key="kb_store").set_value("").run()
    assert not at.error, texts(at.error)
    assert at.sidebar.text_input(key="kb_store").value == str(path) and len(table(at, "variants")) == 14


# ----------------------------------------------------------------------------------------- concurrency


def test_tracker_run_writes_while_pages_render(demo_store):
    """DuckDB allows one writer or many readers: the dashboard reads per query and holds nothing while idle,
    so a tracker run writing meanwhile succeeds, and every render succeeds too."""
    path, ids = demo_store
    # A kernel whose calls sleep 0.5 s: the run stays `running` for several seconds, longer than a render on a loaded
    # machine (with the reference's 3 s run, a loaded CI rendered only after the run had ended)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker", "run", "tests/variants/slow_calls.py", "--suite", "smoke", "--mode",
         "test", "--store", str(path), "--json", "--quiet"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), KB_CALL_SLEEP="0.5"),
    )  # fmt: skip
    renders = 0
    seen: set[str] = set()  # statuses of the new run seen by the Experiments page while it was going on
    pages = [("pages/experiments.py", {}), ("pages/run.py", {"id": ids["profiled"]})]
    at = AppTest.from_file(APP, default_timeout=60).run()
    while (proc.poll() is None and "running" not in seen) or renders < 4:
        page, params = pages[renders % 2]
        for k, v in params.items():
            at.query_params[k] = v
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        assert not at.error, texts(at.error)
        if page == "pages/experiments.py":
            df = table(at, "variants")
            seen |= set(df.loc[df["variant"] == "slow_calls", "latest"])
        renders += 1
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    summary = json.loads(out)
    assert summary["status"] == "passed" and summary["side_file"] is None  # written, not parked in a side file
    assert renders >= 4
    assert "running" in seen  # the page read the store between the run's two writes
    at.switch_page("pages/experiments.py").run()
    assert "slow_calls" in set(table(at, "variants")["variant"])
    assert Store(path).get_run(summary["run_id"])["status"] == "passed"


# ----------------------------------------------------------------------------------- the shipped samples


@pytest.mark.skipif(not list((ROOT / "samples").glob("*/runs.parquet")), reason="no run exports in samples/")
def test_fresh_store_shows_the_shipped_h200_runs(tmp_path, monkeypatch):
    """A newcomer's first start: an empty store is seeded from samples/ and every page renders those runs."""
    import pyarrow.parquet as pq

    expected = sum(pq.read_metadata(p).num_rows for p in (ROOT / "samples").glob("*/runs.parquet"))
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(ROOT / "samples"))
    store = tmp_path / "experiments.duckdb"
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(store))
    at = open_page()
    assert f"Seeded {expected} runs" in texts(at.sidebar.success) and not at.error
    assert Store(store).count_runs() == expected
    assert len(table(at, "variants")) >= 1 and vega_charts(at)
    runs = Store(store).list_runs()
    timed = runs[(runs["status"] == "passed") & runs["geomean_us"].notna()]
    a, b = timed.iloc[-1]["run_id"], timed.iloc[0]["run_id"]  # the oldest and the newest timed run
    at = open_page("pages/run.py", id=b)
    assert not at.error and len(table(at, "cases")) >= 1
    at = open_page("pages/compare.py", a=a, b=b)
    assert not at.error and len(table(at, "cmp_table")) >= 1
    family = runs["family"].dropna().iloc[0]
    at = open_url("pages/regressions.py", family=family)
    assert not at.error


@pytest.mark.skipif(not list((ROOT / "samples").glob("*/runs.parquet")), reason="no run exports in samples/")
def test_every_shipped_gpu_run_names_its_commit():
    """The seeded history is evidence: each GPU run in samples/ says which commit it ran (runs from a copy without
    one live in validation/runs/, which is not seeded)."""
    import pyarrow.parquet as pq

    missing = []
    for path in sorted((ROOT / "samples").glob("*/runs.parquet")):
        rows = pq.read_table(path, columns=["run_id", "device", "git_commit"]).to_pylist()
        missing += [f"{path.parent.name}/{r['run_id']}" for r in rows if r["device"] == "cuda" and not r["git_commit"]]
    assert not missing, f"GPU runs without a commit: {missing}"


def test_compare_with_a_timeout_baseline_warns(demo_store):
    _, ids = demo_store
    at = open_page("pages/compare.py", a=ids["timeout"], b=ids["regressed"])
    assert "A is **timeout**" in texts(at.warning) and "no baseline" in texts(at.warning)


def test_latest_geomean_is_the_latest_runs_own(tmp_path, monkeypatch):
    store = tmp_path / "latest.duckdb"
    src = "def custom_kernel(data):\n    return data\n"
    for i, status in enumerate(("passed", "timeout")):  # the latest run (a timeout) has no geomean
        rec = make_record(f"lat{i}", variant="v", source=src, path="kernels/v.py", family=None,
                          started=T0 + timedelta(hours=i), means=BASE_US, status=status)  # fmt: skip
        Store(store).finish_run(rec)
    df = Store(store).variant_table()
    assert df.loc[0, "latest_run"] == "lat1" and math.isnan(df.loc[0, "latest_geomean_us"])
    assert df.loc[0, "best_geomean_us"] > 0


# ------------------------------------------------------------------ defaults that follow the data (issue 21)


def _with_new_runs(path: Path) -> None:
    """A user's own runs after the H200 ones: an untimed CPU test run, and one timed run of a new family."""
    src = "def custom_kernel(data):\n    return data\n"
    later = T0 + timedelta(days=2)
    for i, (mode, means) in enumerate((("test", None), ("benchmark", [60.0, 290.0, 280.0, 150.0]))):
        rec = make_record(f"mine{i}aaaaaaa", variant=f"mine_v{i}", source=src + f"# {i}\n", path=f"kernels/mine{i}.py",
                          family="mine", started=later + timedelta(minutes=i), means=means, suite="smoke", mode=mode,
                          gpu="CPU")  # fmt: skip
        assert Store(path).finish_run(rec) is None


def test_pages_open_on_a_context_with_runs(demo_store):
    """Leaderboard and Lineage open on the context whose runs passed last (CPU smoke here), each choice offering
    only what has runs; with H200 chosen in the sidebar they open there; Regressions opens on a family with a
    history (two passed timed runs), not on the newest one-run family."""
    path, _ = demo_store
    _with_new_runs(path)
    at = open_page("pages/leaderboard.py")
    picked = tuple(at.selectbox(key=k).value for k in ("gpu", "suite", "mode"))
    assert picked == ("CPU", "smoke", "benchmark")
    assert at.selectbox(key="suite").options == ["smoke"]  # qr_v2 has no runs on the CPU
    assert {"geqrf_reference", "mine_v1"} <= set(at.dataframe[0].value["variant"]) and not at.info
    at = open_page("pages/lineage.py")
    tree = at.dataframe[0].value
    assert (at.selectbox(key="gpu").value, at.selectbox(key="suite").value) == ("CPU", "smoke")
    assert "passed" in set(tree["latest status"])
    assert "problem" not in {s.key for s in at.selectbox}  # one problem in the store: no choice to make
    at = open_page("pages/regressions.py")
    assert at.selectbox(key="reg_family").value == "wy" and vega_charts(at)  # "mine" has one timed run
    at.sidebar.selectbox(key="kb_gpu").set_value(H200).run()
    at.switch_page("pages/leaderboard.py").run()
    assert (at.selectbox(key="gpu").value, at.selectbox(key="suite").value) == (H200, "qr_v2")
    assert len(at.dataframe[0].value) >= 2 and not at.info


def test_leaderboard_without_timed_runs_on_the_newest_gpu(tmp_path, monkeypatch):
    """Only an untimed CPU run is newer than the H200 runs: the Leaderboard stays on the H200 runs."""
    path = tmp_path / "s.duckdb"
    src = "def custom_kernel(data):\n    return data\n"
    for run_id, gpu, mode, when in (("h1", H200, "benchmark", T0), ("c1", "CPU", "test", T0 + timedelta(days=1))):
        rec = make_record(run_id, variant=f"v_{run_id}", source=src + run_id, path=f"kernels/{run_id}.py", family=None,
                          started=when, means=BASE_US if mode == "benchmark" else None, mode=mode, gpu=gpu,
                          suite="qr_v2" if gpu == H200 else "smoke")  # fmt: skip
        Store(path).finish_run(rec)
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_page("pages/leaderboard.py")
    assert at.selectbox(key="gpu").options == [H200] and list(at.dataframe[0].value["variant"]) == ["v_h1"]


def test_the_leaderboard_keeps_problems_apart(tmp_path, monkeypatch):
    """A vectoradd run beside a qr_v2 one, both smoke on the CPU, shared one board: 1 µs vector sums ranked against
    QR factorisations. A Problem choice (in the URL as `problem`) when the suite and GPU hold several."""
    from test_views_cli import _two_problems_store

    path = tmp_path / "two.duckdb"
    _two_problems_store(path)
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_page("pages/leaderboard.py")
    assert at.selectbox(key="problem").options == ["vectoradd", "qr_v2"]  # the newest first
    assert list(at.dataframe[0].value["variant"]) == ["vec_k"]
    at = open_url("pages/leaderboard.py", problem="qr_v2")
    assert list(at.dataframe[0].value["variant"]) == ["qr_k"] and "qr_v2 · smoke" in texts(at.caption)


def test_lineage_keeps_problems_apart(tmp_path, monkeypatch):
    """After a vectoradd submission's run, the qr_v2 tree showed it as a root "not run" beside the QR variants, and
    the other way round. A Problem choice (in the URL as `problem`) where the store holds several, the newest first,
    as on the Leaderboard; the caption names it."""
    from test_views_cli import _two_problems_store

    path = tmp_path / "two.duckdb"
    _two_problems_store(path)
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_page("pages/lineage.py")
    assert at.selectbox(key="problem").options == ["vectoradd", "qr_v2"]
    assert list(at.dataframe[0].value["variant"]) == ["vec_k"]
    at = open_url("pages/lineage.py", problem="qr_v2")
    tree = at.dataframe[0].value
    assert list(tree["variant"]) == ["qr_k"] and "not run" not in set(tree["latest status"])
    assert "geomeans on qr\\_v2 · smoke · CPU" in texts(at.caption)  # escaped for Markdown


def test_the_leaderboard_on_a_new_cpu_run_links_the_other_boards(demo_store):
    """A CPU smoke run newer than the H200 runs moves the default board to CPU: the H200 board is one link away."""
    at = open_page("pages/leaderboard.py")
    assert at.selectbox(key="gpu").value == "CPU"
    links = {el.proto.label: el.proto.page for el in at.get("page_link")}
    assert links.get(f"{H200} · qr_v2", "").startswith("leaderboard"), links


def test_the_leaderboard_names_its_case_columns_by_shape(demo_store):
    """At 1440 px only five of the twelve case columns were visible, headers as "640x512 c2 dense (µs)" and cells to
    0.1 µs: a column is named by its case's shape now (its kind where shapes repeat), the whole case in its help, and
    cells in whole µs from 100 µs on."""
    from pages.ui import heatmap

    at = open_url("pages/leaderboard.py", gpu=H200, suite="qr_v2")
    (board, *_) = at.dataframe
    config = json.loads(board.proto.columns)
    columns = list(board.value.columns)
    cases = columns[columns.index("geomean (µs)") + 1 : columns.index("run")]
    assert len(cases) == 12
    headers = {c: config[c]["label"] for c in cases}
    assert headers == heatmap.case_headers(cases)
    assert headers["640x512 c2 dense"] == "640×512" and headers["640x512 c2 mixed"] == "640×512 mixed"
    assert headers["20x32 c1 dense"] == "20×32" and len(set(headers.values())) == 12
    assert all(len(h) <= len("640×512 clustered") for h in headers.values())  # "(µs)" in the caption, not the header
    assert all(config[c]["help"].startswith(f"{c}:") for c in cases)
    assert config["geomean (µs)"]["label"] == "geomean" and config["variant"]["pinned"]
    assert "hover a header for the whole case" in texts(at.caption)
    # labels that do not start with a shape keep their whole name; shapes told apart only by their condition too
    assert heatmap.case_headers(["size=1024", "size=4096"]) == {"size=1024": "size=1024", "size=4096": "size=4096"}
    assert heatmap.case_headers(["8x64 c1 dense", "8x64 c2 dense"]) == {"8x64 c1 dense": "8x64 c1 dense",
                                                                         "8x64 c2 dense": "8x64 c2 dense"}  # fmt: skip
    frame = pd.DataFrame({"geomean (µs)": [2723.4], "640x512 c2 dense": [6407.6], "20x32 c1 dense": [23.34]})
    styled = heatmap.style(frame, frame / frame, ["640x512 c2 dense", "20x32 c1 dense"]).to_html()
    assert "6,408" in styled and "2,723" in styled and "23.3" in styled and "6,407.6" not in styled


def test_same_url_parameters_on_every_page(demo_store):
    """`family`, `gpu` and `suite` mean the same on every page that has them (`lineage?family=` included)."""
    at = open_page("pages/experiments.py", family="wy")  # the home page: its first run
    assert set(table(at, "variants")["family"]) == {"wy"}
    at = open_url("pages/leaderboard.py", family="wy", gpu=H200, suite="qr_v2")
    assert (at.selectbox(key="family").value, at.selectbox(key="gpu").value) == ("wy", H200)
    assert {v.removeprefix("wy_") for v in at.dataframe[0].value["variant"]} <= {"v0", "v1", "v2"}
    board = at.dataframe[0].value  # the case columns right after the variant and its geomean; identity last
    assert list(board.columns[:3]) == ["variant", "geomean (µs)", "20x32 c1 dense"], list(board.columns)
    assert list(board.columns[-5:]) == ["run", "runs", "passed", "family", "path"]
    at = open_url("pages/lineage.py", family="householder", gpu=H200, suite="qr_v2")
    names = {v.strip().removeprefix("└─ ") for v in at.dataframe[0].value["variant"]}
    assert at.selectbox(key="family").value == "householder" and names == {f"householder_v{k}" for k in range(10)}
    at = open_url("pages/regressions.py", family="householder")
    assert at.selectbox(key="reg_family").value == "householder"


def test_since_lists_newest_first(demo_store):
    _, ids = demo_store
    at = open_url("pages/since.py", since="2026-01-01T00:00:00")
    runs = at.dataframe[-1].value["run"]
    assert runs.iloc[0] == f"run?id={ids['cpu']}" and runs.iloc[-1] == f"run?id={ids['householder'][0]}"
    # a run's new best geomean is its own table, never a case's "mean (µs)"
    assert [h.value for h in at.subheader][:2] == ["New best geomeans", "New best case means"]
    geomeans, means = at.dataframe[0].value, at.dataframe[1].value
    assert "geomean (µs)" in geomeans.columns and "case" not in geomeans.columns and len(geomeans)
    assert "overall" not in set(means["case"]) and "mean (µs)" in means.columns


def test_regressions_follow_one_line_of_descent(tmp_path, monkeypatch):
    """A parent with two children: `slow` 1.5x slower on every case, `same` as fast. Along the path to `same` the
    slow sibling is not in the series (no regression); along the path to `slow` the change is its own. The
    x axis is run order with the variants' names as its ticks."""
    path = tmp_path / "siblings.duckdb"
    runs = (
        ("p0", "parent", None, 1.0),
        ("s0", "slow", "p0", 1.5),
        ("f0", "same", "p0", 1.0),
        ("f1", "same", "p0", 1.0),
    )
    for k, (run_id, name, parent, factor) in enumerate(runs):
        rec = make_record(run_id, variant=name, source=f"# {name}\n", path=f"kernels/{name}.py", family="fam",
                          started=T0 + timedelta(hours=k), means=[b * factor for b in BASE_US], parent=parent,
                          seed=k)  # fmt: skip
        assert Store(path).finish_run(rec) is None
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_url("pages/regressions.py", family="fam")
    leaf = at.selectbox(key="reg_leaf")
    assert leaf.format_func(leaf.value) == "same"  # the variant run most recently
    assert not find_tables(at, "reg_table") and "Along parent → same" in texts(at.caption)
    ((spec, _),) = vega_charts(at)
    axis = spec["vconcat"][-1]["layer"][0]["encoding"]["x"]["axis"]  # a short history names its runs on the axis
    assert axis["values"] == [0, 1, 2] and axis["labelExpr"].startswith('["parent","same","same"]')
    slow = next(o for o in leaf.options if o != leaf.value and leaf.format_func(o) == "slow")
    at.selectbox(key="reg_leaf").set_value(slow).run()
    assert set(table(at, "reg_table")["run"]) == {"s0"}
    # the path chosen is in the URL as `variant` (as `regressions --to`): a link, a reload and Back show it again
    assert at.query_params["variant"] in ("slow", ["slow"])
    at = open_url("pages/regressions.py", family="fam", variant="slow")
    assert set(table(at, "reg_table")["run"]) == {"s0"}
    at = open_url("pages/regressions.py", family="fam", variant="nope")
    assert "nope" in texts(at.warning) and "variant" not in at.query_params and not find_tables(at, "reg_table")


def test_compare_says_what_it_compares(demo_store, tmp_path):
    """A partial run (cases 0 and 3) against a full one: one line says how many cases are timed in both, the
    geomean ratio names them, and the source diff is folded. A test run against a benchmark run: no ratio, why."""
    path, ids = demo_store
    full = [b * 1.1 for b in BASE_US]
    rec = make_record("part0aaaaaaa", variant="part", source="# part\n", path="kernels/part.py", family=None,
                      started=T0 + timedelta(days=3), means=full)  # fmt: skip
    rec.cases[:] = [c for c in rec.cases if c["case_idx"] in (0, 3)]
    rec.samples[:] = [s for s in rec.samples if s[0] in (0, 3)]
    assert Store(path).finish_run(rec) is None
    at = open_url("pages/compare.py", a=ids["before_regression"], b="part0aaaaaaa")
    info = texts(at.info)
    assert "2 of 12 cases are timed in both runs" in info and "10 only in A, 0 only in B" in info
    assert "Geomean ratio over 20x32 c1 dense, 640x512 c2 dense." in texts(at.caption)
    folded = [e.label for e in at.expander if e.label.startswith("Source diff")]
    assert folded == [r"Source diff of householder\_v4 and part"]  # markdown, the name escaped
    test_run = make_record("test0aaaaaaa", variant="t", source="# t\n", path="kernels/t.py", family=None,
                           started=T0 + timedelta(days=3, hours=1), means=None, mode="test")  # fmt: skip
    assert Store(path).finish_run(test_run) is None
    at = open_url("pages/compare.py", a="test0aaaaaaa", b=ids["before_regression"])
    assert "A is a test run" in texts(at.info) and "no case has timings in both" in texts(at.info)
    # and the table shows what passed, per side
    df = table(at, "cmp_table")
    assert list(df.columns[:3]) == ["case", "A ok", "B ok"]
    assert len(df) == 12 and set(df["A ok"]) == set(df["B ok"]) == {"pass"}
    at = open_url("pages/run.py", id="test0aaaaaaa")  # its own page: untimed, and no empty timing columns
    assert {m.label: m.value for m in at.metric}["Geomean"] == "untimed"
    (cases,) = [df.value for df in at.dataframe if "factor res" in df.value.columns]
    assert "mean (µs)" not in cases and "GFLOP/s" not in cases and len(cases) == 12


def test_benchmark_page_offers_the_shipped_problem_and_runs_its_own_submission(own_demo_store, monkeypatch):
    """Chosen on the page, the shipped problem's own submission.py is offered first (the kernels/ files solve
    qr_v2) and runs: the page's problem list works on a fresh clone, as the README's example does."""
    monkeypatch.delenv("KERNELBEAM_PROBLEMS_DIR", raising=False)
    monkeypatch.delenv("KERNELBEAM_KERNELS_DIR", raising=False)
    at = open_page("pages/benchmark.py")
    at.selectbox(key="bm_problem").select("vectoradd").run()
    kernel = at.selectbox(key="bm_kernel")
    assert kernel.value == str(jobs.default_problems_dir() / "vectoradd" / "submission.py")
    assert kernel.format_func(kernel.value) == "vectoradd/submission.py (the problem's own)"
    at.selectbox(key="bm_mode").select("test")
    at.button(key="bm_start").click().run()
    assert not at.error, texts(at.error)
    (job,) = jobs.list_jobs(own_demo_store[0])
    assert job.spec["kernel"] == "problems/vectoradd/submission.py"
    final = jobs.wait(job, timeout=200)
    assert final["state"] == "finished" and final["status"] == "passed", jobs.log_tail(job)


def test_verdict_form_has_no_preselected_verdict_and_parent_by_name(own_demo_store):
    path, ids = own_demo_store
    at = open_url("pages/run.py", id=ids["householder"][5])
    assert at.radio(key="verdict_choice").value is None
    at.button(key="verdict_submit").click().run()
    assert "Choose a verdict first." in texts(at.error) and Store(path).run_bundle(ids["householder"][5])[
        "verdicts"].empty  # fmt: skip
    links = [el.proto.label for el in at.get("page_link")]
    assert "vs parent householder_v4" in links


def test_a_run_without_a_gpu_reads_no_gpu_in_the_pickers_not_nan():
    """The Run and Compare pickers listed a cancelled run as "... · qr_v2/benchmark · nan" (its GPU a NaN in the
    frame) while its header read "?" and the CLI "-"."""
    from pages.ui.tables import run_choice

    row = {"run_id": "34d1cb545e08", "variant": "v", "path": float("nan"), "status": "cancelled", "suite": "qr_v2",
           "mode": "benchmark", "gpu": float("nan"), "started_at": pd.Timestamp("2026-12-04 10:00")}  # fmt: skip
    assert run_choice(row) == "34d1cb545e08 · v (?) · cancelled · qr_v2/benchmark · no GPU"
    assert run_choice(row | {"gpu": "NVIDIA H200"}, when=True).endswith("· NVIDIA H200 · 2026-12-04 10:00")


def test_a_link_with_a_value_no_run_has_says_so_and_shows_the_default(demo_store, monkeypatch, tmp_path):
    """`/?family=nosuch` showed every variant with no word, the bad value left in the URL; Regressions said so
    and the CLI refused it. A value (here a Markdown link, as anyone can write one) is escaped."""
    path, _ = demo_store
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(tmp_path / "own.duckdb"))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    at = open_page("pages/experiments.py", family="[x](https://example.com)")
    (said,) = [w.value for w in at.warning if "not one of this page's choices" in w.value]
    assert "family" in said and "\\[x\\]" in said and "](https" not in said
    assert "choices here (any, " in said  # the choices it has, not a claim about the data
    assert "family" not in at.query_params
    at = open_page("pages/experiments.py", family=at.selectbox(key="family").options[-1])
    assert not [w.value for w in at.warning if "not one of this page's choices" in w.value]


def _named_alike_lineage(path: Path) -> None:
    """base -> kb (one source) -> mid -> kb (the file edited in place: another source, the same name)."""
    runs = (("b0", "base", None, 1.0), ("k0", "kb", "b0", 1.0), ("m0", "mid", "k0", 1.0), ("k1", "kb", "m0", 1.5))
    for k, (run_id, name, parent, factor) in enumerate(runs):
        rec = make_record(run_id, variant=name, source=f"# {name} {k}\n", path=f"kernels/{name}.py", family="fam",
                          started=T0 + timedelta(hours=k), means=[b * factor for b in BASE_US], parent=parent,
                          seed=k)  # fmt: skip
        assert Store(path).finish_run(rec) is None


def test_regressions_lineage_choice_stays_put_when_names_repeat(tmp_path, monkeypatch):
    """Two sources named `kb` on one family: the picker listed both as "kb", and any other widget's change
    switched the history to the other one (Streamlit keeps a selectbox's choice by its label)."""
    path = tmp_path / "alike.duckdb"
    _named_alike_lineage(path)
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_url("pages/regressions.py", family="fam")
    leaf = at.selectbox(key="reg_leaf")
    labels = [leaf.format_func(o) for o in leaf.options]
    assert len(set(labels)) == len(labels) and labels[0] == "kb" and any(n.startswith("kb@") for n in labels)
    chosen, along = leaf.value, texts(at.caption)
    assert "Along base → kb\\@" in along and "mid → kb" in along
    at.selectbox(key="reg_window").select("all runs").run()
    assert at.selectbox(key="reg_leaf").value == chosen and texts(at.caption) == along
    at.toggle(key="reg_impr").set_value(True).run()
    assert at.selectbox(key="reg_leaf").value == chosen and set(table(at, "reg_table")["run"]) == {"k1"}


def test_lineage_tells_sources_named_alike_apart(tmp_path, monkeypatch):
    """Six rows read "kb/fused_wy" on the seeded store's Lineage; the verdict column cut "inconclusive"."""
    path = tmp_path / "alike.duckdb"
    _named_alike_lineage(path)
    Store(path).add_verdict("k0", "inconclusive", "")
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_url("pages/lineage.py", family="fam")
    tree = at.dataframe[0].value
    names = [v.strip().removeprefix("└─ ") for v in tree["variant"]]
    old_kb = next(n for n in names if n.startswith("kb@"))
    assert sorted(names) == sorted(["base", old_kb, "mid", "kb"])
    assert tree.set_index(pd.Series(names))["parent"].to_dict() == {"base": "", old_kb: "base", "mid": old_kb,
                                                                    "kb": "mid"}  # fmt: skip
    assert json.loads(at.dataframe[0].proto.columns)["verdict"]["width"] >= 100


def test_regressions_follow_the_url_on_back_and_forward(demo_store):
    """`?family=` then "Kernel file" then Back: the URL named the family again but the page stayed on the file."""
    at = open_url("pages/regressions.py", family="wy")
    at.radio(key="reg_kind").set_value("Kernel file").run()
    assert at.query_params.get("path") and "family" not in at.query_params  # the default file too is in the URL
    shown = at.selectbox(key="reg_path").value
    assert at.query_params["path"] in (shown, [shown])
    del at.query_params["path"]  # Back: the URL before, in the same session
    at.query_params["family"] = "wy"
    at.run()
    assert at.radio(key="reg_kind").value == "Family" and at.selectbox(key="reg_family").value == "wy"
    del at.query_params["family"]  # Forward
    at.query_params["path"] = shown
    at.run()
    assert at.radio(key="reg_kind").value == "Kernel file" and at.selectbox(key="reg_path").value == shown


def test_regressions_suite_and_gpu_live_in_the_url(demo_store):
    """A family timed in two contexts: the Suite · GPU picked was in no URL, so a reload, a link or Back showed the
    first context again. It goes into the URL as `suite` (and `gpu` where the suite leaves a choice), as on the
    Leaderboard and Lineage pages."""
    path, _ = demo_store
    for k in range(2):  # wy's runs on the CPU smoke suite too
        rec = make_record(
            f"wycpu{k}aaaaaa",
            variant="wy_v0",
            source="# wy cpu\n",
            path="kernels/wy.py",
            family="wy",
            started=T0 + timedelta(days=3, hours=k),
            means=list(BASE_US[:4]),
            suite="smoke",
            gpu="CPU",
        )
        assert Store(path).finish_run(rec) is None
    at = open_url("pages/regressions.py", family="wy")
    labels = at.selectbox(key="reg_ctx").options  # as shown
    other = next(k for k, label in enumerate(labels) if label.startswith("smoke"))
    at.selectbox(key="reg_ctx").set_value(other).run()
    assert at.query_params["suite"] in ("smoke", ["smoke"]) and at.query_params["family"] in ("wy", ["wy"])
    again = open_url("pages/regressions.py", family="wy", suite="smoke")  # the link, or Back to it
    assert again.selectbox(key="reg_ctx").value == other
    stale = open_url("pages/regressions.py", family="wy", suite="nope")
    assert stale.selectbox(key="reg_ctx").value == 0 and "suite" not in stale.query_params
    assert "nope" in texts(stale.warning)


def test_regressions_lineage_follows_the_problem_of_its_context(tmp_path, monkeypatch):
    """A family with vectoradd runs and, later, a qr_v2 run on the same suite and GPU: in the vectoradd context the
    "Lineage path to" offered the qr_v2 variant (run most recently) and showed "No cases recorded along this
    history". The path is one of the context's own problem."""
    path = tmp_path / "fam.duckdb"
    runs = (("vec0aaaaaaaa", "vec", "vectoradd"), ("vec1aaaaaaaa", "vec", "vectoradd"), ("qr00aaaaaaaa", "qr", None))
    for k, (run_id, name, problem) in enumerate(runs):
        rec = make_record(run_id, variant=name, source=f"# {name}\n", path=f"kernels/{name}.py", family="fam",
                          started=T0 + timedelta(hours=k), means=BASE_US[:4], suite="smoke", gpu="CPU",
                          seed=k)  # fmt: skip
        rec.run.problem = problem
        assert Store(path).finish_run(rec) is None
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_url("pages/regressions.py", family="fam", suite="smoke", problem="vectoradd")
    assert at.selectbox(key="reg_leaf").options == ["vec"] and "No cases recorded" not in texts(at.info)
    assert {m.label: m.value for m in at.metric}["Runs in history"] == "2" and vega_charts(at)


def test_run_page_says_how_far_a_stopped_or_partial_run_got(demo_store):
    """A run stopped in case 10 of 12 read "Cases passed 10 / 11" with case 10 "FAIL"; a run of cases 0 and 3 read
    "– µs" with no reason. The runner records the case it was stopped in as not passed, with the run's error."""
    path, _ = demo_store
    error = "the run exceeded its timeout of 300 s"
    rec = make_record("stop0aaaaaaa", variant="stop", source="# stop\n", path="kernels/stop.py", family=None,
                      started=T0 + timedelta(days=3), means=list(BASE_US))  # fmt: skip
    rec.cases[:] = rec.cases[:11]
    rec.cases[10] = {k: v for k, v in rec.cases[10].items() if k not in CASE_STATS} | {"passed": False,
                                                                                       "message": error}  # fmt: skip
    rec.samples[:] = [s for s in rec.samples if s[0] < 10]
    rec.run.status, rec.run.error, rec.run.geomean_us = "timeout", error, None
    part = make_record("part1aaaaaaa", variant="part", source="# part\n", path="kernels/part.py", family=None,
                       started=T0 + timedelta(days=3, hours=1), means=list(BASE_US))  # fmt: skip
    part.cases[:] = [c for c in part.cases if c["case_idx"] in (0, 3)]
    part.run.geomean_us = None  # as the runner records a --cases run
    for r in (rec, part):
        assert Store(path).finish_run(r) is None
    at = open_url("pages/run.py", id="stop0aaaaaaa")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Cases passed"] == "10 / 12" and metrics["Geomean"] == "–"  # why: the caption
    said = texts(at.caption)
    assert "Timeout during case 10 \\(640x512 c0 s770004 clustered\\)\\: inconclusive, not a failure" in said
    assert "11 of the suite's 12 cases reached" in said and "no geomean\\: only a passed run" in said
    assert list(table(at, "cases")["ok"]) == ["pass"] * 10 + ["timeout"]
    at = open_url("pages/run.py", id="part1aaaaaaa")
    assert {m.label: m.value for m in at.metric}["Cases passed"] == "2 / 2"
    assert "Cases 0, 3 of the suite's 12; no geomean\\: a partial run \\(2 of the suite's 12 cases\\)" in texts(
        at.caption
    )


def test_progress_chart_fits_its_axis_to_a_narrow_range():
    """Geomeans of 2,723 to 2,829 µs sat on a flat line, the labels 2,700 and 2,850 on top of each other: the log
    axis had rounded out to 1,000-10,000. Now it spans the ticks around the data, at least 50 px apart."""
    ys = [2829.0, 2790.0, 2760.0, 2723.4]
    points = pd.DataFrame({
        "started_at": pd.date_range("2026-12-04", periods=4, freq="h"), "run_order": range(1, 5), "geomean_us": ys,
        "family": "qr-fused", "variant": [f"v{k}" for k in range(4)], "run_id": [f"r{k}" for k in range(4)],
        "suite": "qr_v2", "gpu": H200,
    })  # fmt: skip
    _, spec = charts_mod.progress_chart(points)
    y = spec["layer"][0]["encoding"]["y"]
    (lo, hi), ticks = y["scale"]["domain"], y["axis"]["values"]
    assert y["scale"]["nice"] is False and lo <= min(ys) and max(ys) <= hi and hi / lo < 1.2
    inside = [t for t in ticks if lo <= t <= hi]
    px = [spec["height"] * math.log(t / lo) / math.log(hi / lo) for t in inside]
    assert len(inside) >= 3 and min(b - a for a, b in zip(px, px[1:], strict=False)) >= 50
    # Two runs of a family sat on the plot's left and right edges, each dot cut in half: the x axis has room
    for x in charts_mod.PROGRESS_X:
        assert charts_mod.progress_chart(points, x)[1]["layer"][0]["encoding"]["x"]["scale"]["padding"] >= 8


def test_progress_chart_keeps_a_far_outlier_off_the_searchs_axis():
    """The shipped trust-tf32 run (116,356 µs) put the search (2,723-4,272 µs) into the bottom fifth of the log
    axis. The axis spans the search; a run over OFF_SCALE times the median is a triangle on its top edge (clamped),
    its value kept for the hover; the best-so-far line is as before, from that run down."""
    ys = [116_356.4, 4272.0, 4100.0, 3900.0, 3500.0, 3100.0, 2900.0, 2723.4]
    points = pd.DataFrame({
        "started_at": pd.date_range("2026-12-01", periods=len(ys), freq="h"), "run_order": range(1, len(ys) + 1),
        "geomean_us": ys, "family": ["trust-tf32"] + ["qr-fused"] * (len(ys) - 1),
        "variant": [f"v{k}" for k in range(len(ys))], "run_id": [f"r{k}" for k in range(len(ys))],
        "suite": "qr_v2", "gpu": H200,
    })  # fmt: skip
    assert charts_mod.off_scale(points).tolist() == [True] + [False] * (len(ys) - 1)
    frame, spec = charts_mod.progress_chart(points)
    runs, best = spec["layer"]
    y = runs["encoding"]["y"]
    lo, hi = y["scale"]["domain"]
    assert y["scale"]["type"] == "log" and y["scale"]["clamp"] is True and best["encoding"]["y"] == y
    assert lo <= 2723.4 and 4272.0 <= hi < 5000 and "off the scale" in y["title"]  # the search fills the axis
    assert f"datum.y > {hi!r}" == runs["encoding"]["shape"]["condition"]["test"]
    assert _layer(frame, "run")["y"].max() == 116_356.4  # hover reads the run's own geomean
    line = _layer(frame, "best")
    assert line["y"].tolist() == [116_356.4, 4272.0, 4100.0, 3900.0, 3500.0, 3100.0, 2900.0, 2723.4]
    # a search without a far outlier keeps its axis as it was: no clamp, no triangles named
    frame, spec = charts_mod.progress_chart(points.iloc[1:])
    assert "clamp" not in spec["layer"][0]["encoding"]["y"]["scale"] and not charts_mod.off_scale(points.iloc[1:]).any()


def test_speedup_axis_fits_small_factors(demo_store):
    """B 5% faster on every case: its bars were a few pixels high on an axis rounded out to 0.1-10x. The axis is
    symmetric around 1 and fitted to the data, at least 1/1.1 to 1.1."""
    path, _ = demo_store
    for k, factor in enumerate((1.0, 1 / 1.05)):
        rec = make_record(f"fast{k}aaaaaaa", variant=f"fast{k}", source=f"# fast {k}\n", path=f"kernels/fast{k}.py",
                          family=None, started=T0 + timedelta(days=4, hours=k), means=[b * factor for b in BASE_US],
                          seed=60 + k)  # fmt: skip
        assert Store(path).finish_run(rec) is None
    at = open_url("pages/compare.py", a="fast0aaaaaaa", b="fast1aaaaaaa")
    _, (speedup, ratios) = vega_charts(at)
    y = speedup["layer"][0]["encoding"]["y"]
    lo, hi = y["scale"]["domain"]
    assert y["scale"]["nice"] is False and lo * hi == pytest.approx(1.0) and hi == pytest.approx(1.1)
    shortest = speedup["height"] * math.log(ratios["speedup"].min()) / math.log(hi / lo)
    assert shortest > 40 and all(lo <= t <= hi for t in y["axis"]["values"]) and 1.0 in y["axis"]["values"]
    _, (speedup, _) = vega_charts(open_url("pages/compare.py", a="fast0aaaaaaa", b="fast0aaaaaaa"))  # all 1.0
    assert speedup["layer"][0]["encoding"]["y"]["scale"]["domain"][1] == pytest.approx(1.1)


def _column_formats(at: AppTest, column: str) -> list:
    return [json.loads(df.proto.columns or "{}").get(column, {}).get("type_config", {}).get("format") for df in
            at.dataframe if column in df.value.columns]  # fmt: skip


def test_numbers_and_commits_read_the_same_on_every_page(demo_store):
    """The Experiments table read 2723.4 beside a metric of 2,723 µs, Regressions 8002.20, commits had 7, 10 or 40
    characters, the Benchmark timeout 900.00: times get thousands separators and 0.1 µs everywhere (common.table),
    commits git's short form (views.short_commit), seconds whole."""
    _, ids = demo_store
    at = open_page()
    assert _column_formats(at, "best geomean (µs)") == ["localized"]
    at = open_url("pages/regressions.py", family="householder")
    assert _column_formats(at, "before (µs)") == ["localized"]
    row = table(at, "reg_table").iloc[0]
    assert row["before (µs)"] == round(row["before (µs)"], 1)
    at = open_url("pages/run.py", id=ids["profiled"])  # top kernels read 19173.8 beside the per-case 3,610.6
    assert set(_column_formats(at, "device (µs)") + _column_formats(at, "self (µs)")) == {"localized"}
    commit = ids["commits"][1]
    if commit:  # the demo store names the checkout's commits (none without git history)
        at = open_url("pages/run.py", id=ids["regressed"])
        assert {m.label: m.value for m in at.metric}["Commit"] == commit[:7] == views.short_commit(commit)
        at = open_url("pages/compare.py", a=ids["before_regression"], b=ids["regressed"])
        assert f"commit `{commit[:7]}`" in texts(at.markdown) and f"commit `{commit[:10]}`" not in texts(at.markdown)
    assert views.short_commit(None) == views.short_commit(float("nan")) == "–"
