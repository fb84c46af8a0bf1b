"""Shared page helpers: the chosen store, cached reads through tracker.store.Store, and clear messages.

Reads are cached with st.cache_data keyed on the store path and its version (modification times and sizes of
the file and its WAL), so a write by a tracker run shows on the next render. No connection is ever cached or
kept: every query opens the store read-only and closes it.
"""

from __future__ import annotations

import os
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from pages.ui import tables as views
from pages.ui import urlstate
from pages.ui.text import code, head_and_rest, md  # noqa: F401 - the pages' escaping, defined once in ui
from tracker.analysis import margins
from tracker.analysis import series as analysis
from tracker.store import DEFAULT_STORE, NotAStoreError, Store, StoreError, StoreLockedError
from tracker.store.reads.boards import distinct_names

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
STORE_KEY = "kb_store"
GPU_KEY = "kb_gpu"
ALL_GPUS = "All GPUs"
ANY = "any"  # a filter's choice that filters nothing


def page_setup() -> None:
    """Call first in every page.

    With a pages/ folder next to app.py, Streamlit starts in its legacy mode: until st.navigation has been
    called once in the process (always, under AppTest), a request for a page URL such as a shared
    `compare?a=..&b=..` link runs that page file alone, without app.py (no sidebar, no store). Then run app.py
    here, in this same script run (so clicks and form submissions are kept): its st.navigation switches the
    legacy mode off and runs this page again, with the same URL path and query parameters. Then stop.

    Still needed with Streamlit 1.67: PagesManager still sets the legacy flag whenever a folder named `pages`
    sits next to the entry script, and st.navigation clears it only once called. The supported way out is a page
    folder with another name (Streamlit's own advice: `app_pages/`); the layout keeps `pages/`, so this stays,
    covered by the deep-link test in tests/test_e2e.py."""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # pragma: no cover - a Streamlit without the legacy mode
        return
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        runpy.run_path(str(APP), run_name="__main__")
        st.stop()


# The query parameters that pages share by name (`family` means the same on every page that has it). They are the
# state of the page in the URL, so a value left in the session by another page must not override the URL.
URL_KEYS = ("family", "gpu", "suite", "mode", "status", "sort", "q", "problem", "since", "variant", "path", "x")
PAGE_KEY = "kb_page"


def enter_page(name: str) -> None:
    """Call with the page's URL path before it runs: on a page change, forget the shared keys' values of the page
    before, so this page takes them from its URL (Back and Forward restore them) or from the data's defaults."""
    if st.session_state.get(PAGE_KEY) != name:
        for key in URL_KEYS:
            st.session_state.pop(key, None)
        st.session_state[PAGE_KEY] = name


def store() -> str:
    return st.session_state.get(STORE_KEY) or DEFAULT_STORE


def own_store() -> Path:
    """The one store the dashboard may create, seed or write (verdicts, Benchmark jobs): experiments.duckdb in its
    own checkout; $KERNELBEAM_OWN_STORE moves it (tests). Read on every call, so a test's setting takes effect."""
    return Path(os.environ.get("KERNELBEAM_OWN_STORE") or ROOT / DEFAULT_STORE).resolve()


def is_own_store(path: str | os.PathLike) -> bool:
    """Whether `path` is the dashboard's own store (after resolving symlinks and `..`); any other is read-only."""
    try:
        return Path(path).resolve() == own_store()
    except (OSError, RuntimeError, ValueError):
        return False


def writable() -> bool:
    """Whether this page may write into the open store; says why not (st.info) when it may not. A page draws its
    write widgets (forms, buttons) only when this is true, so neither widget state nor query parameters can
    reach a write on another store: Streamlit handles a click only on a run that draws the widget."""
    if is_own_store(store()):
        return True
    st.info(
        f"Read-only: **{md(store())}** is not this dashboard's own store ({md(own_store())}), so verdicts and "
        "benchmark runs cannot be recorded here. Use the CLI with `--store` to write into it, or start the "
        "dashboard without `--store` / `KERNELBEAM_STORE` to record into its own."
    )
    return False


def gpu_select(options: list[str], **kwargs: Any) -> str:
    """The sidebar's GPU (options: ALL_GPUS, then the store's GPUs), in the URL as `gpu` like every page's filters,
    so a link and Back or Forward set it; a GPU the store does not have is said, with the choices."""
    return urlstate.selectbox(st, "GPU", options, key=GPU_KEY, param="gpu", default=ALL_GPUS, **kwargs)


def gpu_filter() -> str | None:
    value = st.session_state.get(GPU_KEY)
    return None if value in (None, ALL_GPUS) else value


# A read is a method of Store, passed unbound (`read(Store.count_runs)`): renames and lint see it. st.cache_data
# cannot hash a function, so the method itself is not hashed (`_method`) and its qualified name keys the entry.
StoreRead = Callable[..., Any]


@st.cache_data(show_spinner=False, max_entries=512)
def _cached(
    _method: StoreRead, method: str, store_path: str, version: tuple[int, ...], args: tuple, kwargs: tuple
) -> Any:
    return _method(Store(store_path), *args, **dict(kwargs))


def _read(method: StoreRead, args: tuple, kwargs: dict[str, Any]) -> Any:
    path = store()
    key = f"{method.__module__}.{method.__qualname__}"
    return _cached(method, key, path, Store(path).store_version(), args, tuple(sorted(kwargs.items())))


def try_read(method: StoreRead, *args: Any, **kwargs: Any) -> tuple[Any, str | None]:
    """Like read(), but returns (value, problem) instead of stopping the page."""
    path = store()
    try:
        return _read(method, args, kwargs), None
    except NotAStoreError:
        return None, f"**{path}** is not a KernelBeam store (not a DuckDB file)."
    except StoreLockedError:
        return None, f"The store **{path}** is busy; reload in a moment."
    except FileNotFoundError:
        return None, f"There is no store at **{path}** yet."
    except StoreError as exc:  # newer schema, a directory, no permission: the message says which
        return None, str(exc)


def read(method: StoreRead, *args: Any, **kwargs: Any) -> Any:
    """method(Store(chosen store), *args, **kwargs), e.g. read(Store.get_run, run_id), cached on the store's
    version; clear messages on failure."""
    path = store()
    try:
        return _read(method, args, kwargs)
    except NotAStoreError:
        st.error(f"**{path}** is not a KernelBeam store (not a DuckDB file). Choose another store in the sidebar.")
        st.stop()
    except StoreLockedError:
        st.warning(f"The store **{path}** is busy (another process is writing to it). Reload in a moment.")
        st.stop()
    except FileNotFoundError:
        st.info(f"There is no store at **{path}** yet. Start a run on the Benchmark page or with the CLI.")
        st.stop()
    except StoreError as exc:  # newer schema, a directory, no permission: the message says which
        st.error(f"{exc}. Choose another store in the sidebar.")
        st.stop()


@st.cache_data(show_spinner=False, max_entries=64)
def _cached_compare(store_path: str, version: tuple[int, ...], a: str, b: str) -> Any:
    bundle_a = Store(store_path).run_bundle(a)
    bundle_b = Store(store_path).run_bundle(b)
    if bundle_a is None or bundle_b is None:
        return bundle_a, bundle_b, None
    return bundle_a, bundle_b, analysis.compare_bundles(bundle_a, bundle_b)


def compare(a: str, b: str) -> Any:
    path = store()
    try:
        return _cached_compare(path, Store(path).store_version(), a, b)
    except (StoreError, FileNotFoundError):
        read(Store.count_runs)  # shows the message and stops
        raise


@st.cache_data(show_spinner=False, max_entries=64)
def _cached_history(store_path: str, version: tuple[int, ...], kwargs: tuple) -> Any:
    hist = Store(store_path).case_history(**dict(kwargs))
    points = analysis.history_points(hist)
    changes = analysis.detect_all(points)
    # The samples only serve the change detection; caching them would cost more (pickling) than it saves.
    hist = {k: v for k, v in hist.items() if k != "samples"}
    return hist, analysis.without_samples(points), changes


def history(**kwargs: Any) -> Any:
    """The case history along a family or kernel file with its change points (cached)."""
    path = store()
    try:
        return _cached_history(path, Store(path).store_version(), tuple(sorted(kwargs.items())))
    except (StoreError, FileNotFoundError):
        read(Store.count_runs)
        raise


@st.cache_data(show_spinner=False, max_entries=64)
def _cached_margins(store_path: str, version: tuple[int, ...], sha256s: tuple[str, ...]) -> Any:
    return margins.gate_margins(Store(store_path).gate_residuals(list(sha256s)))


def gate_margins(sha256s: list[str]) -> dict[str, Any]:
    """margins.gate_margins of these variants over every run and seed (cached: over thousands of variants it costs
    more than the page's reads)."""
    path = store()
    try:
        return _cached_margins(path, Store(path).store_version(), tuple(sha256s))
    except (StoreError, FileNotFoundError):
        read(Store.count_runs)
        raise


def variant_labels(nodes: pd.DataFrame) -> dict[str, str]:
    """sha256 -> name of each Store.lineage_nodes row, as the Leaderboard names them: where several sources share a
    name, the one the name stands for now keeps it and each other reads `name@sha8` (boards.distinct_names), so
    no picker or table lists one name twice."""
    frame = pd.DataFrame({
        "variant": nodes["variant"].astype(str), "variant_sha256": nodes["sha256"],
        "latest_at": nodes["last_timed_at"].fillna(nodes["seen_at"]),  # the one run last keeps an unclaimed name
    })  # fmt: skip
    named = {n["name"]: n["sha256"] for n in read(Store.variant_names)} if frame["variant"].duplicated().any() else {}
    return dict(zip(frame["variant_sha256"], distinct_names(frame, named)["variant"], strict=True))


def require_runs() -> int:
    """Stop the page with a clear message when the store is unusable or has no runs; else the run count."""
    n = read(Store.count_runs)
    if not n:
        st.info(
            f"The store **{store()}** has no runs yet. Start one on the **Benchmark** page, or from a shell: "
            "`python -m tracker run kernels/geqrf_reference.py --suite smoke`."
        )
        st.stop()
    return n


def resolve_run(text: str) -> str | None:
    """A run id or unique prefix typed or passed in the URL, else a variant name (its newest run, as the CLI takes
    it), resolved; None (with a message) if unknown."""
    text = (text or "").strip()
    if not text:
        return None
    run_id = read(Store.resolve_run_id, text)
    if run_id is None:
        candidates = read(Store.run_candidates, text)
        if len(candidates) <= 1 and (named := read(Store.latest_run_of_variant, text)) is not None:
            return named
        if len(candidates) > 1:
            st.error(f"**{md(text)}** is ambiguous: {len(candidates)} runs start with it. Give more characters:")
            table(
                views.readable(candidates.assign(run_id="run?id=" + candidates["run_id"])),
                column_config={"run": st.column_config.LinkColumn("run", display_text=r"run\?id=(.*)")},
            )
        else:
            st.error(f"No run matches **{md(text)}** in {store()} (give a run id, a unique prefix or a variant name).")
    return run_id


def run_link(run_id: str, label: str | None = None) -> None:
    st.page_link(
        "pages/run.py", label=label or f"run {run_id}", icon=":material/open_in_new:", query_params={"id": run_id}
    )


def compare_link(run_a: str, run_b: str, label: str) -> None:
    st.page_link("pages/compare.py", label=label, icon=":material/open_in_new:", query_params={"a": run_a, "b": run_b})


def table(data: Any, *, column_config: dict | None = None, **kwargs: Any) -> Any:
    """st.dataframe as every page shows a table: no index, a blank (not "None") where a value is missing,
    timestamps to the second and times (a "(µs)" header) to 0.1 µs with thousands separators, unless a column says
    otherwise."""
    frame = getattr(data, "data", data)  # a Styler carries its frame (and formats its own numbers)
    config = {
        c: st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss")
        for c in getattr(frame, "columns", ())
        if str(getattr(frame[c], "dtype", "")).startswith("datetime64")
    }
    if isinstance(data, pd.DataFrame):
        data, times = views.round_times(data)
        config |= {c: st.column_config.NumberColumn(format="localized") for c in times}
    return st.dataframe(data, hide_index=True, placeholder="", column_config=config | (column_config or {}), **kwargs)


def metric_row() -> Any:
    """A row of st.metric (drawn with width="content"), each as wide as its value, wrapping onto a new line where
    the page is narrow: in equal st.columns an 800 px page cut the values ("2,72…", "7e1…")."""
    return st.container(horizontal=True, gap="large")


def filter_row() -> Any:
    """A page's row of filters: each select box keeps its width and the row wraps onto a new line where the page
    is narrow (in five or six equal st.columns an 800 px page showed "an", "b" or nothing of their values)."""
    return st.container(horizontal=True, gap="small")


def rows_height(n: int, max_rows: int = 40) -> int:
    """A dataframe height that shows n rows without an inner scrollbar (up to max_rows)."""
    return 35 * (min(n, max_rows) + 1) + 3
