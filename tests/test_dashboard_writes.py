"""The dashboard writes only into its own store, and the address it listens on is the one its token rule judges.

AppTest renders the real app (tests/conftest.open_page); scripts/dashboard.sh runs for real, with a server on a
free port that is polled until it answers and then killed."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, open_page
from tracker.capture import envinfo, jobs
from tracker.store import Store

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No samples, no GPU, local address, no token; the own store somewhere else than any store a test opens."""
    (tmp_path / "no-samples").mkdir()
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(tmp_path / "no-samples"))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(tmp_path / "own.duckdb"))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    for name in ("KERNELBEAM_ADDRESS", "KERNELBEAM_TOKEN", "KERNELBEAM_KERNELS_DIR", "STREAMLIT_SERVER_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    envinfo.gpu_available.cache_clear()
    import streamlit as st

    st.cache_data.clear()


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def _fingerprint(path: Path) -> tuple:
    """What a write would change: the file's bytes and every file beside it (WAL, .jobs/, .pending/)."""
    return path.read_bytes(), sorted(p.name for p in path.parent.iterdir())


def _buttons(at) -> set[str]:
    return {b.key for b in at.button}


# Query parameters a crafted link could carry: widget keys, a store path, the form's own names.
CRAFTED = {"verdict_choice": "promoted", "verdict_reason": "x", "verdict_submit": "true", "kb_store": "own.duckdb",
           "store": "own.duckdb", "bm_start": "true", "bm_kernel": "geqrf_reference.py"}  # fmt: skip


def test_on_another_store_the_verdict_form_is_read_only(demo_store):
    path, ids = demo_store
    run_id = ids["householder"][9]
    before = _fingerprint(path)
    at = open_page("pages/run.py", id=run_id, **CRAFTED)
    assert "not this dashboard's own store" in texts(at.info)
    assert "verdict_submit" not in _buttons(at) and not at.get("form")
    assert _fingerprint(path) == before
    assert Store(path).run_bundle(run_id)["verdicts"].empty


def test_on_another_store_the_benchmark_page_is_read_only(demo_store):
    path, _ = demo_store
    before = _fingerprint(path)
    at = open_page("pages/benchmark.py", **CRAFTED)
    assert "not this dashboard's own store" in texts(at.info)
    assert not _buttons(at) and not at.main.selectbox  # no kernel to pick, nothing to start or cancel
    assert _fingerprint(path) == before and not jobs.jobs_dir(path).exists()


def test_a_store_typed_in_the_sidebar_is_read_only_until_it_is_the_own_store(own_demo_store, tmp_path):
    path, ids = own_demo_store
    other = tmp_path / "other.duckdb"
    other.write_bytes(path.read_bytes())
    at = open_page("pages/run.py", id=ids["householder"][9])
    assert "verdict_submit" in _buttons(at)  # the own store: the form is there
    at.sidebar.text_input(key="kb_store").input(str(other)).run()
    assert "not this dashboard's own store" in texts(at.info) and "verdict_submit" not in _buttons(at)
    # The same own store spelled another way (a `..` detour, a symlink) is still the own store.
    link = tmp_path / "link.duckdb"
    link.symlink_to(path)
    for spelling in (str(tmp_path / "sub" / ".." / path.name), str(link)):
        (tmp_path / "sub").mkdir(exist_ok=True)
        at.sidebar.text_input(key="kb_store").input(spelling).run()
        assert not at.exception and "verdict_submit" in _buttons(at), spelling


def test_the_token_rule_follows_the_address_streamlit_was_given(demo_store, monkeypatch):
    """KERNELBEAM_ADDRESS says local, but the server option says every address: the pages want the token."""
    from streamlit import config

    monkeypatch.setenv("KERNELBEAM_ADDRESS", "127.0.0.1")
    monkeypatch.setenv("KERNELBEAM_TOKEN", "s3cret-token")
    saved = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    try:
        at = open_page()
        assert "Token required" in texts(at.error) and not at.dataframe
        at = open_page(token="s3cret-token")
        assert not at.error and at.dataframe
    finally:
        config.set_option("server.address", saved)


# ------------------------------------------------------------------------------------- scripts/dashboard.sh


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELBEAM_", "STREAMLIT_"))}
    env.pop("VIRTUAL_ENV", None)  # the script's own .venv, as a user starts it
    store = tmp_path / "dash.duckdb"
    return dict(env, KERNELBEAM_STORE=str(store), KERNELBEAM_OWN_STORE=str(store), KERNELBEAM_NO_GPU="1",
                KERNELBEAM_SAMPLES_DIR=str(tmp_path / "no-samples"), HOME=str(tmp_path), **extra)  # fmt: skip


@pytest.mark.parametrize(
    "args,env",
    [
        (["--server.address", "0.0.0.0"], {"KERNELBEAM_ADDRESS": "127.0.0.1"}),
        (["--server.address=0.0.0.0"], {"KERNELBEAM_ADDRESS": "127.0.0.1"}),
        ([], {"KERNELBEAM_ADDRESS": "127.0.0.1", "STREAMLIT_SERVER_ADDRESS": "0.0.0.0"}),
        (["--server.address", "127.0.0.1"], {"STREAMLIT_SERVER_ADDRESS": "0.0.0.0"}),
        (["--server.address"], {}),
    ],
)
def test_dashboard_script_refuses_addresses_that_disagree(tmp_path, args, env):
    proc = subprocess.run(
        ["bash", "scripts/dashboard.sh", *args], cwd=ROOT, env=_env(tmp_path, **env), capture_output=True,
        text=True, timeout=30,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "address" in lines[0]


def _listening(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp writes them) with a socket listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                found.add(addr)
    return found


def _serve(tmp_path: Path, args: list[str], **env: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    (tmp_path / "no-samples").mkdir(exist_ok=True)
    log = tmp_path / "dashboard.log"
    proc = subprocess.Popen(
        ["bash", "scripts/dashboard.sh", *args, "--server.port", str(port), "--server.headless", "true"],
        cwd=ROOT, env=_env(tmp_path, **env), stdout=log.open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:  # the handshake: the server's health endpoint answers
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc, port
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            raise AssertionError(log.read_text())
        time.sleep(0.2)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=20)


@pytest.mark.parametrize(
    "args,env",
    [
        (["--server.address", "0.0.0.0"], {}),
        (["--server.address=0.0.0.0"], {}),
        ([], {"STREAMLIT_SERVER_ADDRESS": "0.0.0.0"}),
    ],
)
def test_dashboard_script_applies_the_token_rule_to_server_address(tmp_path, args, env):
    """The address given to streamlit is the one the app is told: the server listens on every address and the
    app asks for the token (the app's side of that rule: test_the_token_rule_follows_the_address_...)."""
    proc, port = _serve(tmp_path, args, **env)
    try:
        # bash exec'd streamlit: the script's pid is the server's, with the address in its flags and environment.
        argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        assert argv.count(b"--server.address") == 1 and argv[argv.index(b"--server.address") + 1] == b"0.0.0.0"
        assert b"KERNELBEAM_ADDRESS=0.0.0.0" in environ
        token = next(e for e in environ if e.startswith(b"KERNELBEAM_TOKEN=")).split(b"=", 1)[1].decode()
        assert len(token) >= 24
        assert _listening(port) & {"00000000", "00000000000000000000000000000000"}
    finally:
        _stop(proc)
    assert f"?token={token}" in (tmp_path / "dashboard.log").read_text()
