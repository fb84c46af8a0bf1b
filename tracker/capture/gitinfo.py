"""Git state of a kernel file, read with GitPython: repository, commit, branch, dirty flag, uncommitted diff."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

MAX_DIFF_CHARS = 200_000
EMPTY = {
    "git_repo": None,
    "git_commit": None,
    "git_branch": None,
    "git_dirty": None,
    "git_diff": None,
}


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _declared_commit() -> dict[str, Any]:
    """The commit a copy without history says it was made from ($KERNELBEAM_GIT_COMMIT, e.g. on a GPU machine
    that received a working tree): recorded as the commit, with the dirty flag unknown."""
    commit = os.environ.get("KERNELBEAM_GIT_COMMIT", "").strip().lower()
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return dict(EMPTY)
    return dict(EMPTY, git_commit=commit, git_branch=os.environ.get("KERNELBEAM_GIT_BRANCH") or None)


def capture_git(path: str | Path) -> dict[str, Any]:
    """Git fields for the repository holding `path`; outside a repository (or without git) all None.
    $KERNELBEAM_GIT_COMMIT, when set, declares the commit the files came from and wins: a copy sent to a GPU
    machine may carry a stale .git whose HEAD is not the code that runs."""
    declared = _declared_commit()
    if declared["git_commit"]:
        return declared
    try:
        import git
    except ImportError:
        return _declared_commit()
    try:
        repo = git.Repo(Path(path).resolve().parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return _declared_commit()
    with repo:
        info = dict(EMPTY, git_repo=repo.working_tree_dir)
        try:
            info["git_branch"] = repo.active_branch.name
        except TypeError:  # detached HEAD
            info["git_branch"] = None
        try:
            info["git_commit"] = repo.head.commit.hexsha
        except ValueError:  # a repository without commits
            info["git_dirty"] = True
            return info
        info["git_dirty"] = repo.is_dirty(untracked_files=False)
        rel = Path(path).resolve().relative_to(Path(repo.working_tree_dir).resolve())
        untracked = str(rel) in repo.untracked_files
        diff = repo.git.diff("HEAD") if info["git_dirty"] else ""
        if untracked:  # a new kernel file is the most important uncommitted change
            info["git_dirty"] = True
            diff += repo.git.diff("--no-index", "/dev/null", str(rel), with_exceptions=False)
        info["git_diff"] = diff[:MAX_DIFF_CHARS] if diff else ""
        return info


COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")


def safe_repo_path(repo_dir: str | Path, path: str) -> str | None:
    """`path` relative to the repository, or None when it is not a plain path inside it (`..`, option-like,
    control characters): such a value from the store or a URL never reaches git."""
    if not isinstance(path, str) or not path or path.startswith("-") or any(ord(c) < 32 for c in path):
        return None
    if ".." in Path(path).parts:
        return None
    root = Path(repo_dir).resolve()
    target = (root / path).resolve() if not Path(path).is_absolute() else Path(path).resolve()
    if not target.is_relative_to(root):
        return None
    return str(target.relative_to(root)) or None


def resolve_commit(repo, commit: str) -> str | None:
    """The full hex name of `commit` if it is a hex object name that the repository resolves to a commit."""
    import git

    if not isinstance(commit, str) or not COMMIT_RE.match(commit):
        return None
    try:
        return repo.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}").strip() or None
    except git.GitCommandError:
        return None


def diff_commits(repo_dir: str | Path, a: str, b: str, paths: list[str] | None = None) -> str | None:
    """Unified diff between two commits of a repository, or None if either is not a commit there.

    Commits and paths come from the store (possibly an imported one): commits must be hex names the repository
    resolves, paths must lie inside it, and `--` separates them, so no value can act as an option."""
    import git

    try:
        with git.Repo(repo_dir, search_parent_directories=True) as repo:
            full_a, full_b = resolve_commit(repo, a), resolve_commit(repo, b)
            if full_a is None or full_b is None:
                return None
            root = repo.working_tree_dir
            checked = [safe_repo_path(root, p) for p in paths or []]
            if any(c is None for c in checked):
                return None
            return repo.git.diff(full_a, full_b, "--", *checked)
    except (
        git.GitCommandError,
        git.InvalidGitRepositoryError,
        git.NoSuchPathError,
        ValueError,
    ):
        return None
