"""KernelBeam dashboard: `streamlit run app.py [-- --store PATH] [--kernels-dir DIR]`.

The store is experiments.duckdb unless $KERNELBEAM_STORE or `--store PATH` after `--` says otherwise; it can be
changed in the sidebar. An empty store is seeded from the run exports in samples/ ($KERNELBEAM_SAMPLES_DIR).
The Benchmark page runs kernel files from kernels/ only, or from the folder given by `--kernels-dir` or
$KERNELBEAM_KERNELS_DIR. The server listens on 127.0.0.1 (.streamlit/config.toml) unless told otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pages import _common as common  # noqa: E402
from tracker.store import (  # noqa: E402
    DEFAULT_STORE,
    NotAStoreError,
    StoreLockedError,
    queries,  # noqa: E402
)
from tracker.store.transfer import seed_from_samples  # noqa: E402

st.set_page_config(page_title="KernelBeam", page_icon=":material/bolt:", layout="wide")


def _script_args() -> argparse.Namespace:
    """`streamlit run app.py -- [--store PATH | PATH] [--kernels-dir DIR]`; ignored unless app.py is argv[0]."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--store")
    parser.add_argument("--kernels-dir")
    parser.add_argument("positional", nargs="?")
    if not sys.argv or Path(sys.argv[0]).name != "app.py":
        return parser.parse_args([])
    return parser.parse_known_args(sys.argv[1:])[0]


ARGS = _script_args()
if ARGS.kernels_dir:  # the folder the Benchmark page may run kernels from (tracker.jobs reads it)
    os.environ["KERNELBEAM_KERNELS_DIR"] = str(Path(ARGS.kernels_dir).resolve())


def default_store() -> str:
    return ARGS.store or ARGS.positional or os.environ.get("KERNELBEAM_STORE") or DEFAULT_STORE


@st.cache_data(show_spinner=False)
def _seed(store: str, version: tuple[int, ...]) -> tuple[int, str | None]:
    """Seed an empty store from samples/ once per store version: (runs added, error message)."""
    try:
        if queries.count_runs(store):
            return 0, None
        return seed_from_samples(store, os.environ.get("KERNELBEAM_SAMPLES_DIR") or ROOT / "samples"), None
    except NotAStoreError:
        return 0, f"**{store}** is not a KernelBeam store (not a DuckDB file). Choose another store."
    except StoreLockedError:
        return 0, None  # a writer is busy; seeding is tried again on the next render
    except Exception as exc:  # noqa: BLE001 - a broken sample must not take the dashboard down
        return 0, f"Could not seed {store} from samples/: {exc}"


def _experiments_alias() -> None:
    """`/experiments`: the default page is served at `/` only (Streamlit), so its name would be "Page not found"
    without this hidden page forwarding to it. The default page reserves another name, `home`."""
    st.switch_page("pages/experiments.py", query_params=st.query_params.to_dict())


pages = [
    st.Page("pages/experiments.py", title="Experiments", icon=":material/science:", url_path="home", default=True),
    st.Page(_experiments_alias, title="Experiments", url_path="experiments", visibility="hidden"),
    st.Page("pages/run.py", title="Run", icon=":material/monitoring:", url_path="run"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("pages/regressions.py", title="Regressions", icon=":material/trending_up:", url_path="regressions"),
    st.Page("pages/leaderboard.py", title="Leaderboard", icon=":material/leaderboard:", url_path="leaderboard"),
    st.Page("pages/lineage.py", title="Lineage", icon=":material/account_tree:", url_path="lineage"),
    st.Page("pages/since.py", title="Since", icon=":material/history:", url_path="since"),
    st.Page("pages/benchmark.py", title="Benchmark", icon=":material/play_circle:", url_path="benchmark"),
]
page = st.navigation(pages)

with st.sidebar:
    st.markdown("### :material/bolt: KernelBeam")
    if common.STORE_KEY not in st.session_state:
        st.session_state[common.STORE_KEY] = default_store()
    st.text_input("Store", key=common.STORE_KEY, help="DuckDB file the dashboard reads (opened read-only per query)")
    store = common.store()
    added, problem = _seed(store, queries.store_version(store))
    if problem:
        st.error(problem)
    elif added:
        st.success(f"Seeded {added} runs from samples/.")
    n_runs, _ = common.try_read("count_runs") if not problem else (0, None)
    facts, _ = common.try_read("facets") if n_runs else (None, None)
    options = [common.ALL_GPUS, *(facts["gpu"] if facts else [])]
    if st.session_state.get(common.GPU_KEY) not in options:
        st.session_state[common.GPU_KEY] = common.ALL_GPUS
    st.selectbox("GPU", options, key=common.GPU_KEY, help="Only runs on this GPU model (timings of different GPUs "
                 "are never compared)")  # fmt: skip
    st.caption(f"{n_runs or 0} runs in the store")

page.run()
