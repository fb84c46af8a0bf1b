"""Git state of a kernel file with GitPython, in a real repository made in tmp_path; a run outside any repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest

from tracker.capture.runner import RunRequest, run_variant
from tracker.common.gitinfo import EMPTY, capture_git, diff_commits, source_hash
from tracker.store import Store

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "kernels" / "geqrf_reference.py"
ACTOR = git.Actor("Test Author", "test@example.com")


@pytest.fixture
def repo(tmp_path):
    """A repository with one commit holding kernels/k.py, on branch `work`."""
    path = tmp_path / "proj"
    (path / "kernels").mkdir(parents=True)
    r = git.Repo.init(path, initial_branch="work")
    shutil.copy(REFERENCE, path / "kernels" / "k.py")
    r.index.add(["kernels/k.py"])
    r.index.commit("first kernel", author=ACTOR, committer=ACTOR)
    yield r
    r.close()


def test_clean_repository(repo):
    info = capture_git(Path(repo.working_tree_dir) / "kernels" / "k.py")
    assert info["git_repo"] == repo.working_tree_dir
    assert info["git_commit"] == repo.head.commit.hexsha and len(info["git_commit"]) == 40
    assert info["git_branch"] == "work"
    assert info["git_dirty"] is False
    assert info["git_diff"] == ""


def test_an_edit_makes_it_dirty_and_the_diff_holds_the_edit(repo):
    kernel = Path(repo.working_tree_dir) / "kernels" / "k.py"
    kernel.write_text(kernel.read_text() + "\nBLOCK = 64  # tuned-edit-marker\n")
    info = capture_git(kernel)
    assert info["git_dirty"] is True
    assert "+BLOCK = 64  # tuned-edit-marker" in info["git_diff"]
    assert "kernels/k.py" in info["git_diff"]
    assert info["git_commit"] == repo.head.commit.hexsha


def test_an_untracked_kernel_is_dirty_with_its_content_in_the_diff(repo):
    new = Path(repo.working_tree_dir) / "kernels" / "new_idea.py"
    new.write_text("# untracked-kernel-marker\nimport torch\n")
    info = capture_git(new)
    assert info["git_dirty"] is True
    assert "+# untracked-kernel-marker" in info["git_diff"]
    assert "new_idea.py" in info["git_diff"]
    # another file's view: the repository is clean apart from untracked files, which are not its business
    assert capture_git(Path(repo.working_tree_dir) / "kernels" / "k.py")["git_dirty"] is False


def test_a_detached_head_has_no_branch(repo):
    kernel = Path(repo.working_tree_dir) / "kernels" / "k.py"
    first = repo.head.commit.hexsha
    kernel.write_text(kernel.read_text() + "# v2\n")
    repo.index.add(["kernels/k.py"])
    second = repo.index.commit("second", author=ACTOR, committer=ACTOR).hexsha
    repo.git.checkout(first)
    info = capture_git(kernel)
    assert info["git_branch"] is None and info["git_commit"] == first and info["git_dirty"] is False
    diff = diff_commits(repo.working_tree_dir, first, second)
    assert "+# v2" in diff
    assert diff_commits(repo.working_tree_dir, first, "0" * 40) is None


def test_outside_any_repository_every_git_field_is_none(tmp_path):
    with pytest.raises(git.InvalidGitRepositoryError):
        git.Repo(tmp_path, search_parent_directories=True)
    kernel = tmp_path / "k.py"
    shutil.copy(REFERENCE, kernel)
    assert capture_git(kernel) == EMPTY
    assert all(v is None for v in EMPTY.values())


def test_source_hash_is_sha256_of_the_text():
    assert source_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def _run(path: Path, store: Path):
    outcome = run_variant(
        RunRequest(path=str(path), suite="smoke", mode="test", cases=[0], store=str(store), timeout=90)
    )
    assert outcome.status == "passed", outcome.record.run.error
    return Store(store).run_bundle(outcome.run_id)


def test_a_run_in_a_repository_records_its_git_state_and_source(repo, tmp_path):
    new = Path(repo.working_tree_dir) / "kernels" / "fresh.py"
    source = REFERENCE.read_text() + "# fresh-kernel-marker\n"
    new.write_text(source)
    bundle = _run(new, tmp_path / "runs.duckdb")
    run = bundle["run"]
    assert run["git_repo"] == repo.working_tree_dir
    assert run["git_commit"] == repo.head.commit.hexsha and run["git_branch"] == "work"
    assert run["git_dirty"] is True and "+# fresh-kernel-marker" in run["git_diff"]
    assert run["variant"] == "fresh" and run["variant_sha256"] == source_hash(source)
    assert bundle["source"] == source


def test_a_run_outside_any_repository_works_with_empty_git_fields(tmp_path):
    with pytest.raises(git.InvalidGitRepositoryError):
        git.Repo(tmp_path, search_parent_directories=True)
    kernel = tmp_path / "outside.py"
    shutil.copy(REFERENCE, kernel)
    bundle = _run(kernel, tmp_path / "runs.duckdb")
    run = bundle["run"]
    for key in ("git_repo", "git_commit", "git_branch", "git_dirty", "git_diff"):
        assert run[key] is None, key
    assert run["variant_sha256"] == source_hash(REFERENCE.read_text())
    assert bundle["source"] == REFERENCE.read_text()
    assert len(bundle["cases"]) == 1 and bool(bundle["cases"]["passed"].iloc[0])


def test_a_copy_without_history_records_the_declared_commit(tmp_path, monkeypatch):
    kernel = tmp_path / "k.py"
    kernel.write_text("def custom_kernel(data):\n    return data\n")
    monkeypatch.setenv("KERNELBEAM_GIT_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    info = capture_git(kernel)
    assert info["git_commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert info["git_repo"] is None and info["git_dirty"] is None
    monkeypatch.setenv("KERNELBEAM_GIT_COMMIT", "--output=/tmp/x")  # not an object name: ignored
    assert capture_git(kernel)["git_commit"] is None


def test_a_declared_commit_wins_over_a_stale_repository(tmp_path, monkeypatch):
    """A copy sent to a GPU machine can carry an old .git: the declared commit is what ran."""
    repo = git.Repo.init(tmp_path)
    kernel = tmp_path / "k.py"
    kernel.write_text("def custom_kernel(data):\n    return data\n")
    repo.index.add([str(kernel)])
    repo.index.commit("old")
    monkeypatch.setenv("KERNELBEAM_GIT_COMMIT", "abcdef0123456789abcdef0123456789abcdef01")
    info = capture_git(kernel)
    assert info["git_commit"] == "abcdef0123456789abcdef0123456789abcdef01" and info["git_diff"] is None
