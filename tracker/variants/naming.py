"""Variant names from file paths: readable (a generic file takes its folder's name) and unique within a set."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePath

# File names that say nothing about the variant: the folder names it instead (solutions/v43_x/submission.py).
GENERIC_STEMS = frozenset({"submission", "solution", "kernel", "main", "__init__"})


def _parts(path: str | PurePath) -> tuple[str, list[str]]:
    """(base name, ancestor folders nearest first) of a path."""
    p = PurePath(path)
    folders = [f for f in p.parent.parts if f not in ("/", ".", "")]
    if p.stem in GENERIC_STEMS and folders:
        return folders[-1], folders[-2::-1]
    return p.stem, folders[::-1]


def variant_name(path: str | PurePath) -> str:
    """`solutions/v43_cholqr/submission.py` -> `v43_cholqr`; `kernels/graphed.py` -> `graphed`."""
    return _parts(path)[0]


def unique_names(paths: Iterable[str], taken: Mapping[str, str] | None = None) -> dict[str, str]:
    """A name per distinct path; paths whose base names collide are told apart by their nearest differing folder
    (`a/v1/submission.py`, `b/v1/submission.py` -> `a/v1`, `b/v1`). `taken` maps names already in use (in the
    store) to their path, so a new path never takes the name of another one."""
    taken = dict(taken or {})
    by_path = {str(p): _parts(p) for p in dict.fromkeys(str(p) for p in paths)}
    known = {path: _parts(path) for path in taken.values() if path and path not in by_path}
    groups: dict[str, list[str]] = {}
    for path, (base, _) in {**by_path, **known}.items():
        groups.setdefault(base, []).append(path)
    names: dict[str, str] = {}
    for base, members in groups.items():
        if len(members) == 1:
            names.update({m: base for m in members})
            continue
        folders = {m: (by_path.get(m) or known[m])[1] for m in members}
        labels = _nearest_differing(base, folders)
        names.update(labels)
    # A path already in the store keeps the name it has there.
    for name, path in taken.items():
        if path in by_path:
            names[path] = name
    return {p: names[p] for p in by_path}


def _nearest_differing(base: str, folders: dict[str, list[str]]) -> dict[str, str]:
    """Label each path `FOLDER/base` with the nearest folder level at which the paths differ; if that still
    collides (three or more paths), prefix every folder up to that level."""
    depth = max(len(f) for f in folders.values())
    for k in range(depth):
        level = {m: (f[k] if k < len(f) else "") for m, f in folders.items()}
        if len(set(level.values())) > 1:
            labels = {m: f"{lv}/{base}" if lv else base for m, lv in level.items()}
            if len(set(labels.values())) == len(folders):
                return labels
            return {m: "/".join([*reversed(f[: k + 1]), base]) for m, f in folders.items()}
    return {m: base for m in folders}  # the same path spelled twice
