"""KernelBeam dashboard: `streamlit run app.py [-- --store PATH] [--kernels-dir DIR]`.

The store is experiments.duckdb unless $KERNELBEAM_STORE or `--store PATH` after `--` says otherwise; it can be
changed in the sidebar. An empty store is seeded from the run exports in samples/ ($KERNELBEAM_SAMPLES_DIR).
The Benchmark page runs kernel files from kernels/ only, or from the folder given by `--kernels-dir` or
$KERNELBEAM_KERNELS_DIR. The server listens on 127.0.0.1 (.streamlit/config.toml) unless told otherwise.
"""

from __future__ import annotations

import argparse
import hmac
import os
import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pages import _common as common  # noqa: E402
from tracker.common.text import counted  # noqa: E402
from tracker.common.vocabulary import STORE_ENV  # noqa: E402
from tracker.store import (  # noqa: E402
    NotAStoreError,
    SchemaTooOldError,
    Store,
    StoreLockedError,
)
from tracker.store.transfer import seed_from_samples  # noqa: E402

# An emoji icon is drawn in the browser as inline SVG; a :material: icon would be fetched from fonts.gstatic.com.
st.set_page_config(page_title="KernelBeam", page_icon="⚡", layout="wide")


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
if ARGS.kernels_dir:  # the folder the Benchmark page may run kernels from (tracker.capture.jobs reads it)
    os.environ["KERNELBEAM_KERNELS_DIR"] = str(Path(ARGS.kernels_dir).resolve())


def default_store() -> str:
    return ARGS.store or ARGS.positional or os.environ.get(STORE_ENV) or str(common.own_store())


@st.cache_data(show_spinner=False)
def _seed(store: str, version: tuple[int, ...]) -> tuple[int, str | None]:
    """Seed the dashboard's own store from samples/ when it is missing or has no runs: (runs added, problem). Its
    own store written by an older tracker is brought up to date first, as any writer's open would."""
    try:
        if Path(store).is_file():
            Store(store).upgrade()
        if Path(store).exists() and (Store(store).store_problem() or Store(store).count_runs()):
            return 0, None  # a foreign file is refused below; a store with runs is left as it is
        added = seed_from_samples(store, os.environ.get("KERNELBEAM_SAMPLES_DIR") or ROOT / "samples")
        if not Path(store).exists():  # no samples: an empty store, so the Benchmark page can record the first run
            with Store(store).connect():
                pass
        return added, None
    except NotAStoreError:
        return 0, None  # refused below, untouched
    except StoreLockedError:
        return 0, None  # a writer is busy; seeding is tried again on the next render
    except SchemaTooOldError:
        return 0, None  # older and read-only: refused below, with how to upgrade it
    except Exception as exc:  # noqa: BLE001 - a broken sample must not take the dashboard down
        return 0, f"Could not seed {store} from samples/: {exc}"


@st.cache_data(show_spinner=False)
def _problem(store: str, version: tuple[int, ...]) -> str | None:
    try:
        return Store(store).store_problem()
    except NotAStoreError:
        return f"**{store}** is not a KernelBeam store (not a DuckDB file); it is left as is."
    except StoreLockedError:
        return None  # busy: the pages say so


def _experiments_alias() -> None:
    """`/experiments` and `/home`: the default page is served at `/` only (Streamlit), so its names would be "Page
    not found" without these hidden pages forwarding to it. The default page reserves a name nobody types. (Before
    the server's first run Streamlit knows only the files in pages/, so a first request for `/home` still says it.)"""
    st.switch_page(pages[0], query_params=st.query_params.to_dict())


pages = [
    st.Page(
        "pages/experiments.py", title="Experiments", icon=":material/science:", url_path="kernelbeam", default=True
    ),
    st.Page(_experiments_alias, title="Experiments", url_path="experiments", visibility="hidden"),
    st.Page(_experiments_alias, title="Experiments", url_path="home", visibility="hidden"),
    st.Page("pages/run.py", title="Run", icon=":material/monitoring:", url_path="run"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("pages/regressions.py", title="Regressions", icon=":material/trending_up:", url_path="regressions"),
    st.Page("pages/leaderboard.py", title="Leaderboard", icon=":material/leaderboard:", url_path="leaderboard"),
    st.Page("pages/lineage.py", title="Lineage", icon=":material/account_tree:", url_path="lineage"),
    st.Page("pages/since.py", title="Since", icon=":material/history:", url_path="since"),
    st.Page("pages/benchmark.py", title="Benchmark", icon=":material/play_circle:", url_path="benchmark"),
]
page = st.navigation(pages)

LOCAL_ADDRESSES = ("127.0.0.1", "localhost", "::1")
TOKEN_KEY = "kb_token_ok"


def listen_address() -> str | None:
    """The address beyond this machine that the server may listen on, or None when it is local only.

    Both what scripts/dashboard.sh says ($KERNELBEAM_ADDRESS) and what Streamlit itself was given
    (server.address: flag, STREAMLIT_SERVER_ADDRESS or a config file) must be local; an empty server.address
    means every address. So a server started with another address than the script believes still asks."""
    try:
        server = st.get_option("server.address")
    except Exception:  # noqa: BLE001 - no server config at all: Streamlit's default, every address
        server = None
    claimed = os.environ.get("KERNELBEAM_ADDRESS")
    for address in ((server or "").strip(), *([claimed.strip()] if claimed is not None else [])):
        if address not in LOCAL_ADDRESSES:
            return address or "every address"
    return None


def require_token() -> None:
    """Beyond 127.0.0.1 anyone on the network could read the store and start runs: every page then wants the
    token ($KERNELBEAM_TOKEN) once, as ?token=..., and the session keeps it. Without it, nothing else renders."""
    address = listen_address()
    if address is None or st.session_state.get(TOKEN_KEY):
        return
    expected = os.environ.get("KERNELBEAM_TOKEN", "")
    given = st.query_params.get("token", "")
    if expected and given and hmac.compare_digest(given.encode(), expected.encode()):
        st.session_state[TOKEN_KEY] = True
        del st.query_params["token"]  # not in links that get shared
        return
    st.title("KernelBeam")
    if not expected:
        st.error(
            f"Token required: this dashboard listens on {address}, but no KERNELBEAM_TOKEN is set. Start it with "
            "`scripts/dashboard.sh` (it makes one and prints the link), or reach it through an SSH tunnel."
        )
    else:
        st.error("Token required: open the link with `?token=...` printed when the dashboard started.")
    st.stop()


if not st.session_state.get(common.STORE_KEY):  # the first run, or a box emptied: this script's own arguments
    st.session_state[common.STORE_KEY] = default_store()
require_token()

with st.sidebar:
    st.markdown("### :material/bolt: KernelBeam")
    st.text_input(
        "Store",
        key=common.STORE_KEY,
        help="DuckDB file the dashboard reads (opened read-only per query; "
        "only its own experiments.duckdb is ever created, from samples/)",
    )
    store = common.store()
    added, problem = _seed(store, Store(store).store_version()) if common.is_own_store(store) else (0, None)
    problem = problem or _problem(store, Store(store).store_version())
    if added:
        st.success(f"Seeded {counted(added, 'run')} from samples/ into the empty store {store}.")
    n_runs, _ = common.try_read(Store.count_runs) if not problem else (0, None)
    facts, _ = common.try_read(Store.facets) if n_runs else (None, None)
    gpu_help = "Only runs on this GPU model (timings of different GPUs are never compared)"
    if facts:  # in the URL as `gpu`, the name every page gives the GPU (Leaderboard's and Lineage's choice too)
        common.gpu_select([common.ALL_GPUS, *facts["gpu"]], help=gpu_help)
    else:  # no runs, or the store is busy: nothing to choose, and the URL's choice is kept for when there is
        st.session_state[common.GPU_KEY] = common.ALL_GPUS
        st.selectbox("GPU", [common.ALL_GPUS], key=common.GPU_KEY, help=gpu_help, disabled=True)
    if problem:
        st.caption(f"No store open ({store} refused).")
    else:
        st.caption(f"Open: `{store}` · {n_runs or 0} runs")

if problem:  # every page needs a store: say why this one is refused, and change nothing
    st.error(problem + " Choose another store in the sidebar.")
    st.stop()
common.enter_page(page.url_path)
page.run()
