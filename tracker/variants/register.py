"""Register variants without running them (`tracker add`): source snapshots from files and their git history.

One snapshot per distinct content (sha256). For a file in a git repository, one snapshot per commit that changed
it (oldest first; the same content in several commits keeps the earliest), plus the working copy if it differs
from HEAD. Lineage: `--parent` wins; else the previous version of the same file; else a `Parent: NAME` line in
the source (a docstring or comment), resolved by variant name or file stem. Names: each file's name (from its path,
or `--name`) is recorded for its newest snapshot in variant_names, also where that content is registered already
under another name (an unchanged copy); see register().
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tracker import store as store_mod
from tracker.common.errors import InputError
from tracker.common.gitinfo import GitError, git, repo_root, source_hash
from tracker.store import Store
from tracker.store.validate import MAX_CHARS, name_problem
from tracker.variants.naming import unique_names

MAX_SOURCE_CHARS = MAX_CHARS[("variants", "source")]  # what an import takes: a version beyond it is not registered

PARENT_LINE = re.compile(r"^[\s#*-]*Parent:\s*([\w./-]+)", re.MULTILINE | re.IGNORECASE)
# What makes a file a kernel, for `run FOLDER`, `add` and the dashboard's list: it defines or imports custom_kernel.
_KERNEL_DEF = re.compile(
    r"^\s*(def\s+custom_kernel\b|custom_kernel\s*=|from\s+\S+\s+import\s.*\bcustom_kernel\b)", re.MULTILINE
)


def parent_line(source: str) -> str | None:
    """The NAME of a `Parent: NAME` line (docstring or comment), if any."""
    m = PARENT_LINE.search(source)
    return m.group(1) if m else None


def defines_kernel(path: Path) -> bool:
    """Whether the file defines (or imports) custom_kernel."""
    try:
        return bool(_KERNEL_DEF.search(path.read_text(errors="replace")))
    except OSError:
        return False


def find_variant_files(paths: Iterable[str], pattern: str | None = None) -> list[Path]:
    """Kernel files named by `paths` and `--glob`: a file as given; a folder gives every `submission.py` below
    it, or if it has none, every `*.py` below it that defines custom_kernel. Sorted, without duplicates."""
    found: list[Path] = []
    for text in paths:
        p = Path(text)
        if p.is_dir():
            subs = sorted(p.rglob("submission.py"))
            found += subs or sorted(f for f in p.rglob("*.py") if defines_kernel(f))
        elif p.is_file():
            found.append(p)
        else:
            raise InputError(f"no kernel file at {text}")
    if pattern:
        matched = sorted(Path(f) for f in _glob(pattern) if Path(f).is_file())
        if not matched:
            raise InputError(f"--glob {pattern!r} matches no file")
        found += matched
    return list(dict.fromkeys(found))


def _glob(pattern: str) -> list[str]:
    import glob

    return glob.glob(pattern, recursive=True)


@dataclass
class Snapshot:
    file: Path  # on disk
    path: str  # as recorded (relative to the repository root inside one)
    source: str
    commit: str | None = None
    committed_at: datetime | None = None
    message: str | None = None

    @property
    def sha256(self) -> str:
        return source_hash(self.source)


def recorded_path(file: Path) -> tuple[str, str | None]:
    """The path a file is recorded under (relative to its repository's root) and that root (or None)."""
    root = repo_root(file)
    if root is None:  # no git, or not in a repository
        return str(file), None
    return str(file.resolve().relative_to(Path(root).resolve())), root


def _history(root: str, rel: str, commits: str | None) -> list[tuple[str, datetime, str]]:
    """(commit, authored at, message) of the commits that changed `rel`, newest first."""
    if commits is not None and (not commits.strip() or commits.startswith("-")):
        raise InputError(f"--commits {commits!r}: not a revision range")
    out = git(root, "log", "-z", "--format=%H%n%aI%n%B", "--end-of-options", commits or "HEAD", "--", rel)
    history = []
    for entry in filter(None, out.split("\0")):
        sha, when, message = (entry.lstrip("\n").split("\n", 2) + ["", ""])[:3]
        history.append((sha, datetime.fromisoformat(when), message))
    return history


def file_snapshots(file: Path, commits: str | None = None) -> list[Snapshot]:
    """The versions of one file, oldest first: one per commit that changed it (within `commits`, `A..B`, if
    given), then the working copy if it differs from the last one (only without `commits`). A version larger than
    MAX_SOURCE_CHARS is left out; a working copy that large is an InputError."""
    rel, root = recorded_path(file)
    if file.stat().st_size > MAX_SOURCE_CHARS:
        raise InputError(f"{file} is larger than {MAX_SOURCE_CHARS:,} bytes: not a kernel's source")
    current = file.read_text()
    if root is None:
        return [Snapshot(file, rel, current)]
    snaps: list[Snapshot] = []
    try:
        history = _history(root, rel, commits)
    except GitError as exc:  # an empty repository, or an unknown revision
        if commits:
            raise InputError(f"--commits {commits!r}: {exc}") from None
        history = []
    for sha, when, message in reversed(history):
        try:  # cat-file: the stored bytes, no filter or textconv
            if int(git(root, "cat-file", "-s", f"{sha}:{rel}")) > MAX_SOURCE_CHARS:
                continue  # a version no store takes (a 600 MB blob compresses to 780 KB of history): left out
            blob = git(root, "cat-file", "blob", f"{sha}:{rel}")
        except GitError:  # the commit deleted the file
            continue
        snaps.append(Snapshot(file, rel, blob, sha, when, message.strip()))
    if not commits and (not snaps or snaps[-1].source != current):
        snaps.append(Snapshot(file, rel, current))
    return snaps


def register(
    paths: Iterable[str],
    store: str | os.PathLike,
    *,
    pattern: str | None = None,
    commits: str | None = None,
    family: str | None = None,
    parent: str | None = None,
    name: str | None = None,
) -> list[dict[str, Any]]:
    """Register every snapshot of the named files; one dict per snapshot with `added` False when the content
    was already there, and `name_added` True where its name was recorded for it now.

    Names: each file's name (`name`, for one file, else from its path) stands for its newest snapshot. A name is
    unique: an unchanged copy's name is recorded beside the name its content has; a changed file's name moves to
    its new content (as before names had a table); a name that another file's content holds is an InputError."""
    files = find_variant_files(paths, pattern)
    if not files:
        raise InputError("no kernel file to register")
    if name is not None:
        problem = name_problem(name)
        if problem:
            raise InputError(f"--name {name!r} {problem}")
        if len(files) > 1:
            raise InputError(f"--name names one file; {len(files)} were given")
    exists = Path(store).exists()
    known = Store(store).variant_index() if exists else []
    held = {n["name"]: n for n in Store(store).variant_names()} if exists else {}
    per_file = [file_snapshots(f, commits) for f in files]
    names = unique_names([s[0].path for s in per_file if s], Store(store).name_paths() if exists else {})
    if name is not None:
        names = dict.fromkeys(names, name)
    by_name: dict[str, str] = {}  # name or file stem -> latest sha256, as the history is walked
    for v in sorted(known, key=lambda v: str(v["at"])):
        by_name[v["name"]] = v["sha256"]
        if v["path"]:
            by_name.setdefault(Path(v["path"]).stem, v["sha256"])
    by_name.update({n: h["sha256"] for n, h in held.items()})  # a recorded name means its content
    seen = {v["sha256"] for v in known}
    stored = {v["sha256"]: v for v in known}
    forced = _resolve(parent, by_name, seen) if parent else None
    if parent and forced is None:
        raise InputError(f"--parent {parent!r} names no registered variant")
    now = store_mod.now()
    snaps = sorted((s for group in per_file for s in group), key=lambda s: (s.committed_at or now).timestamp())
    newest = {snap.path: snap for snap in snaps}  # each file's name stands for its newest snapshot
    name_rows = {path: _name_row(snap, names[path], held, family, now) for path, snap in newest.items()}
    previous: dict[str, str] = {}
    rows, out = [], []
    for snap in snaps:
        sha, called = snap.sha256, names[snap.path]
        if sha in seen:
            # The same content under another name or family: a variant is its content, so it keeps its name (the
            # file's name is recorded beside it, in name_rows), but a family it has none of is recorded, and the
            # summary says which name the content is known by.
            was = stored.get(sha, {})
            if family and not was.get("family"):
                rows.append({"sha256": sha, "family": family})
            summary = _summary(snap, called, None, was.get("family") or family, added=False)
            summary["known_as"] = was.get("name") if was.get("name") not in (None, called) else None
            out.append(summary)
        else:
            named = parent_line(snap.source)
            par = forced or previous.get(snap.path) or (_resolve(named, by_name, seen) if named else None)
            rows.append(
                {
                    "sha256": sha, "name": called, "path": snap.path, "source": snap.source, "first_seen": now,
                    "commit": snap.commit, "committed_at": snap.committed_at, "message": snap.message,
                    "family": family, "parent": par, "registered_at": now,
                }
            )  # fmt: skip
            seen.add(sha)
            out.append(_summary(snap, called, par, family, added=True))
        previous[snap.path] = sha
        by_name[called] = sha
        by_name[Path(snap.path).stem] = sha
    changes = [r for r in name_rows.values() if _changes(r, held.get(r["name"]))]
    added = set(Store(store).register_variants(rows, changes)) if rows or changes else set()
    for row, snap in zip(out, snaps, strict=True):
        row["added"] = row["sha256"] in added
        own = name_rows[snap.path] if newest[snap.path] is snap else None  # older snapshots' names are not theirs
        before = held.get(row["variant"])
        # True where this call made the name stand for this content: an unchanged copy's name (a new variant's own
        # name is no news: `added` says it)
        row["name_added"] = bool(own) and not row["added"] and (before is None or before["sha256"] != row["sha256"])
        row["name_family"] = own["family"] if own else None
    return out


def _changes(row: dict, holder: dict | None) -> bool:
    """Whether writing this name row changes the store: a new name, one that moves, or a family it lacked."""
    return holder is None or holder["sha256"] != row["sha256"] or bool(row["family"] and not holder["family"])


def _name_row(snap: Snapshot, name: str, held: dict[str, dict], family: str | None, now: datetime) -> dict:
    """The variant_names row that makes `name` stand for this snapshot; InputError where the name is another
    file's (it holds other content, recorded from another path)."""
    holder = held.get(name)
    if holder is not None and holder["sha256"] != snap.sha256 and holder["path"] != snap.path:
        raise InputError(
            f"{snap.path}: the name {name!r} is taken: it stands for other content (sha256 {holder['sha256'][:12]}, "
            f"from {holder['path'] or 'an unknown file'}); give the file another name with --name"
        )
    same = holder is not None and holder["sha256"] == snap.sha256
    kept_family = holder.get("family") if holder is not None else None
    return {
        "name": name, "sha256": snap.sha256, "path": snap.path, "added_at": now,
        "family": (kept_family or family) if same else (family or kept_family),
    }  # fmt: skip


def _resolve(text: str, by_name: dict[str, str], shas: set[str]) -> str | None:
    if text in by_name:
        return by_name[text]
    matches = [s for s in shas if s.startswith(text)]
    return matches[0] if len(matches) == 1 else None


def _summary(snap: Snapshot, name: str, parent: str | None, family: str | None, *, added: bool) -> dict[str, Any]:
    return {
        "variant": name,
        "path": snap.path,
        "sha256": snap.sha256,
        "commit": snap.commit,
        "committed_at": snap.committed_at.isoformat() if snap.committed_at else None,
        "message": snap.message,
        "parent": parent,
        "family": family,
        "added": added,
    }


def unique_name_in_store(path: str, store: str) -> str | None:
    """The variant's name from its path, told apart from other paths of the same name already in the store
    (None for a path that is not a file). A busy or foreign store names it from the path alone: the run itself
    copes with it (side file, its own error)."""
    if not Path(path).is_file():
        return None
    rel = recorded_path(Path(path))[0]
    try:
        taken = Store(store).name_paths() if Path(store).exists() else {}
    except (store_mod.StoreLockedError, store_mod.NotAStoreError):
        taken = {}
    return unique_names([rel], taken)[rel]


def resolve_parent(store: str, text: str, suite: str | None = None, mode: str | None = None) -> str:
    """A run id, a unique prefix of one, or a variant name (its newest run, a passed one of this suite and mode
    first), as the full run id; InputError for anything else."""
    run_id = Store(store).resolve_run_id(text) or Store(store).latest_run_of_variant(text, suite, mode)
    if run_id is None:
        raise InputError(f"--parent {text!r} is not a run in {store}, nor a variant with runs there")
    return run_id
