"""Git state of a kernel file (repository, commit, branch, dirty flag, uncommitted diff) and diffs between
commits. Every git command of the product runs through `git()`, with a clean configuration.

Why a clean configuration: a repository's own .git/config can name programs that git runs on a plain `diff` or
`status` (diff.external, a textconv or filter driver, core.fsmonitor, a pager). Git only runs in repositories
the user named on this machine (the kernel files they run or register, the checkout the dashboard runs in),
never in one named by a stored run, and even there no configured program runs: system and global configuration
are off, the dangerous keys are overridden on the command line (which wins over the repository's), external
diffs and textconv are off, no prompt, no pager. GitPython is not used: its commands would see all of it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path
from typing import Any

MAX_DIFF_CHARS = 200_000
GIT_TIMEOUT_S = 60
EMPTY = {
    "git_repo": None,
    "git_commit": None,
    "git_branch": None,
    "git_dirty": None,
    "git_diff": None,
}
# Overrides of every key that makes git run a program or read outside the repository during the commands used.
CLEAN_CONFIG = (
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.pager=cat", "core.editor=true",
    "core.attributesFile=/dev/null", "core.sshCommand=false", "core.askPass=", "core.gitProxy=",
    "core.alternateRefsCommand=", "diff.external=", "credential.helper=", "protocol.allow=never",
    "gpg.program=false", "diff.ignoreSubmodules=all", "status.submoduleSummary=false",
)  # fmt: skip
# Program-valued keys of named drivers (set in .git/config, chosen by .gitattributes): blanked per driver found.
_DRIVER_KEYS = re.compile(r"^(filter|diff|merge)\.(.+)\.(clean|smudge|process|textconv|command|driver)$")


class GitError(Exception):
    """A git command failed (not a repository, an unknown revision, git missing)."""


def _environment(blank: list[str]) -> dict[str, str]:
    """The caller's environment without GIT_* variables (GIT_DIR, GIT_EXTERNAL_DIFF, GIT_CONFIG_*...), with
    system and global configuration off and the `blank` keys set to empty. They go through GIT_CONFIG_KEY_n,
    not `-c`, because a driver's name may hold any character, `=` included."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true",
        SSH_ASKPASS="true", GIT_ATTR_NOSYSTEM="1", GIT_NO_REPLACE_OBJECTS="1", GIT_OPTIONAL_LOCKS="0",
        GIT_PAGER="cat", PAGER="cat", LC_ALL="C", GIT_CONFIG_COUNT=str(len(blank)),
    )  # fmt: skip
    for i, key in enumerate(blank):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, "false" if key.endswith(".required") else ""
    return env


def _run(cwd: str | Path, blank: list[str], args: tuple[str, ...], ok_codes: tuple[int, ...]) -> str:
    command = ["git", "--no-pager"] + [x for kv in CLEAN_CONFIG for x in ("-c", kv)] + list(args)
    try:
        proc = subprocess.run(
            command, cwd=cwd, env=_environment(blank), stdin=subprocess.DEVNULL, capture_output=True,
            timeout=GIT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if proc.returncode not in ok_codes:
        first = proc.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git {args[0]}: {first[0] if first else f'exit {proc.returncode}'}")
    return proc.stdout.decode(errors="replace")


def git(cwd: str | Path, *args: str, ok_codes: tuple[int, ...] = (0,)) -> str:
    """stdout of `git ARGS` in `cwd` under the clean configuration; GitError when it fails. Diff and status
    commands get --no-ext-diff, --no-textconv and no submodules (whose configuration is their own)."""
    if args and args[0] == "diff":
        args = ("diff", "--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=all", *args[1:])
    elif args and args[0] == "status":
        args = ("status", "--ignore-submodules=all", *args[1:])
    # Reading the configuration runs nothing; every program-valued key of a named driver is then blanked.
    listed = _run(cwd, [], ("config", "-z", "--name-only", "--get-regexp", r"^(filter|diff|merge)\."), (0, 1))
    blank: list[str] = []
    for key in filter(None, listed.split("\0")):
        m = _DRIVER_KEYS.match(key)
        if m:
            blank.append(key)
            if m.group(1) == "filter":  # a required filter that does not run fails the command instead
                blank.append(f"filter.{m.group(2)}.required")
    return _run(cwd, list(dict.fromkeys(blank)), args, ok_codes)


def repo_root(path: str | Path) -> str | None:
    """The top folder of the git work tree holding `path` (a file or folder), or None."""
    folder = Path(path).resolve()
    folder = folder if folder.is_dir() else folder.parent
    try:
        return git(folder, "rev-parse", "--show-toplevel").strip() or None
    except (GitError, FileNotFoundError, NotADirectoryError):
        return None


def head_commit(root: str | Path) -> str | None:
    """HEAD's commit, or None in a repository without commits."""
    try:
        return git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").strip() or None
    except GitError:
        return None


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
    root = repo_root(path)
    if root is None:
        return declared
    info = dict(EMPTY, git_repo=root)
    try:
        branch = git(root, "symbolic-ref", "--quiet", "--short", "HEAD", ok_codes=(0, 1)).strip()
        info["git_branch"] = branch or None  # detached HEAD: none
        info["git_commit"] = head_commit(root)
        if info["git_commit"] is None:  # a repository without commits
            info["git_dirty"] = True
            return info
        info["git_dirty"] = bool(git(root, "status", "--porcelain", "--untracked-files=no").strip())
        rel = str(Path(path).resolve().relative_to(Path(root).resolve()))
        untracked = bool(git(root, "ls-files", "--others", "--exclude-standard", "--", rel).strip())
        diff = git(root, "diff", "HEAD") if info["git_dirty"] else ""
        if untracked:  # a new kernel file is the most important uncommitted change
            info["git_dirty"] = True
            diff += git(root, "diff", "--no-index", "--", "/dev/null", rel, ok_codes=(0, 1))
    except GitError:
        return info
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


def resolve_commit(root: str | Path, commit: str) -> str | None:
    """The full hex name of `commit` if it is a hex object name that the repository resolves to a commit."""
    if not isinstance(commit, str) or not COMMIT_RE.match(commit):
        return None
    try:
        return git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}").strip() or None
    except GitError:
        return None


def diff_commits(repo_dir: str | Path, a: str, b: str, paths: list[str] | None = None) -> str | None:
    """Unified diff between two commits of a repository the user named, or None if either is not a commit there.

    Commits and paths come from the store (possibly an imported one): commits must be hex names the repository
    resolves, paths must lie inside it, and `--` separates them, so no value can act as an option."""
    root = repo_root(repo_dir) if Path(repo_dir).is_dir() else None
    if root is None:
        return None
    full_a, full_b = resolve_commit(root, a), resolve_commit(root, b)
    if full_a is None or full_b is None:
        return None
    checked = [safe_repo_path(root, p) for p in paths or []]
    if any(c is None for c in checked):
        return None
    try:
        return git(root, "diff", full_a, full_b, "--", *checked)
    except GitError:
        return None
