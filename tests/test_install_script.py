"""scripts/install.sh: pip runs only when the requirements changed (a stamp in the environment), and a bad
option is refused. The full install into a fresh .venv is what `.ci/run` does on a clean clone."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _env(venv: Path) -> dict[str, str]:
    return {**os.environ, "VIRTUAL_ENV": str(venv)}


def test_an_unchanged_install_is_skipped_in_well_under_a_second(tmp_path):
    venv = tmp_path / "env"
    venv.mkdir()
    both = (ROOT / "requirements.txt").read_bytes() + (ROOT / "requirements-dev.txt").read_bytes()
    (venv / ".kernelbeam-dev.sha256").write_text(hashlib.sha256(both).hexdigest() + "\n")
    for option in ("--run", "--dev"):
        t0 = time.monotonic()
        proc = subprocess.run(
            ["bash", "scripts/install.sh", option], cwd=ROOT, env=_env(venv), capture_output=True, text=True
        )
        took = time.monotonic() - t0
        assert proc.returncode == 0, proc.stderr
        assert "installing" not in proc.stderr and took < 5, (proc.stderr, took)


def test_an_unknown_option_is_refused(tmp_path):
    proc = subprocess.run(
        ["bash", "scripts/install.sh", "--fast"], cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True
    )
    assert proc.returncode == 2 and "unknown option --fast" in proc.stderr


def test_the_install_writes_our_bytecode_where_python_would_not(tmp_path):
    """Containers often set PYTHONDONTWRITEBYTECODE: then every process of a run (front, worker, checker) compiled
    our modules again. The install writes their bytecode once, and an import reads it."""
    import importlib.util

    venv = tmp_path / "env"
    venv.mkdir()
    both = (ROOT / "requirements.txt").read_bytes() + (ROOT / "requirements-dev.txt").read_bytes()
    (venv / ".kernelbeam-dev.sha256").write_text(hashlib.sha256(both).hexdigest() + "\n")
    source = ROOT / "tracker" / "common" / "lazy.py"
    cached = Path(importlib.util.cache_from_source(str(source)))
    cached.unlink(missing_ok=True)
    env = {**_env(venv), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(["bash", "scripts/install.sh", "--run"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert cached.is_file() and cached.stat().st_mtime >= source.stat().st_mtime
    # the import uses it: no SourceLoader compile, so `python -v` names the cached file it matched
    probe = subprocess.run(
        [sys.executable, "-v", "-c", "import tracker.common.lazy"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert f"matches {source}" in probe.stderr, probe.stderr[-2000:]
