"""The compile-cache folders themselves: states, switches, and pruning that never follows what a kernel planted."""

from __future__ import annotations

import os
import subprocess
import time

from tracker.capture import compile_cache

SHA_A, SHA_B, SHA_C = "a" * 64, "b" * 64, "c" * 64


def test_a_new_folder_is_cold_one_with_entries_warm_and_off_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.ROOT_ENV, str(tmp_path / "cc"))
    cold = compile_cache.bind(SHA_A)
    assert cold.state == "cold" and cold.writable == (tmp_path / "cc" / SHA_A,)
    assert cold.env["TRITON_CACHE_DIR"] == str(tmp_path / "cc" / SHA_A / "triton")
    (tmp_path / "cc" / SHA_A / "torch_extensions" / "ext").mkdir()
    assert compile_cache.bind(SHA_A).state == "warm"
    assert compile_cache.bind(SHA_B).state == "cold"  # another source: its own folder
    assert compile_cache.bind(SHA_A, enabled=False).state == "off: --fresh-compile"
    assert compile_cache.bind("../" + SHA_A[3:]).state == "off: no source hash"
    monkeypatch.setenv(compile_cache.ROOT_ENV, "off")
    off = compile_cache.bind(SHA_A)
    assert off.state.startswith("off: ") and off.env == {} and off.writable == ()


def test_an_unusable_root_means_no_cache_not_a_failed_run(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv(compile_cache.ROOT_ENV, str(tmp_path / "file"))
    binding = compile_cache.bind(SHA_A)
    assert binding.state.startswith("off: ") and binding.env == {}


def test_pruning_drops_the_least_recently_used_keeps_recent_ones_and_follows_no_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"x" * 5000)
    base = tmp_path / "cc"
    old = time.time() - compile_cache.RECENT_S - 100
    for sha, age in ((SHA_A, old - 50), (SHA_B, old), (SHA_C, time.time())):
        folder = base / sha / "triton"
        folder.mkdir(parents=True)
        (folder / "kernel.cubin").write_bytes(b"k" * 1000)
        os.symlink(outside, folder / "escape")
        os.utime(base / sha, (age, age))
    removed = compile_cache.prune(base, max_bytes=2500)
    assert removed == [base / SHA_A]  # the oldest goes; then the rest fit
    assert compile_cache.prune(base, max_bytes=0) == [base / SHA_B]  # SHA_C was used within RECENT_S
    assert (base / SHA_C).is_dir() and (outside / "precious").stat().st_size == 5000


def test_a_folder_filled_past_the_cap_is_removed_after_the_run_and_said_to_be(tmp_path, monkeypatch):
    """Pruning keeps a folder used in the last hours whatever its size; what a kernel writes into its own folder
    beyond the per-source cap goes when its run ends, so it cannot fill the disk run after run."""
    monkeypatch.setenv(compile_cache.ROOT_ENV, str(tmp_path / "cc"))
    small, big = compile_cache.bind(SHA_A), compile_cache.bind(SHA_B)
    (small.writable[0] / "triton" / "kernel.bin").write_bytes(b"x" * 1000)
    with open(big.writable[0] / "triton" / "ballast", "wb") as f:
        f.truncate(5000)  # sparse, but its size is what a kernel would claim
    assert compile_cache.trim(small, max_bytes=4096) is None and small.writable[0].is_dir()
    note = compile_cache.trim(big, max_bytes=4096)
    assert note is not None and "removed" in note and not big.writable[0].exists()
    assert compile_cache.trim(compile_cache.bind(SHA_C, enabled=False)) is None  # no folder: nothing to trim
    # disk reserved at length 0 (`fallocate -n`) counts as what it holds, not as its length
    reserved = compile_cache.bind(SHA_C)
    (reserved.writable[0] / "triton" / "reserved").touch()
    subprocess.run(["fallocate", "-n", "-l", "1M", str(reserved.writable[0] / "triton" / "reserved")], check=True)
    assert compile_cache.trim(reserved, max_bytes=512 << 10) is not None and not reserved.writable[0].exists()


def test_a_folder_nested_or_crowded_beyond_any_build_is_removed_and_breaks_no_later_run(tmp_path, monkeypatch):
    """A kernel made 1,500 folders within folders in its own cache: os.walk and shutil.rmtree recurse per level, so
    every later run's prune raised RecursionError before it started, until someone removed the folder by hand. The
    walk is a loop, the removal `rm -rf`; a folder nested or crowded beyond any build's goes after its run."""
    monkeypatch.setenv(compile_cache.ROOT_ENV, str(tmp_path / "cc"))
    deep = compile_cache.bind(SHA_A)
    here = deep.writable[0] / "triton"
    for _ in range(1500):
        here = here / "d"
        here.mkdir()
    assert compile_cache.bind(SHA_B).state == "cold"  # the next run of another source binds (and prunes) as usual
    note = compile_cache.trim(deep)
    assert note is not None and "nested deeper" in note and not deep.writable[0].exists()
    monkeypatch.setattr(compile_cache, "SOURCE_MAX_ENTRIES", 50)
    crowded = compile_cache.bind(SHA_C)
    for i in range(60):
        (crowded.writable[0] / "triton" / f"f{i}").touch()
    assert compile_cache.trim(crowded) is not None and not crowded.writable[0].exists()
