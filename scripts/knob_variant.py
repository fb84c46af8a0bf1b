"""Write a knob variant of a kernel family file: module constants replaced, the docstring saying which (issue 23).

    python scripts/knob_variant.py kernels/FAMILY.py OUT_DIR NAME "hypothesis" _KNOB=VALUE [...]
    python scripts/knob_variant.py --list LIST OUT_DIR     # every line of a search list; prints NAME FAMILY PARENT PATH

The variant is a self-contained contest file (OUT_DIR/NAME.py, for a scratch folder such as .kscratch/); its
docstring names the family file as its parent and the settings, so the store's copy of the source says what was
changed. A search list has lines `NAME FAMILY PARENT FAMILY_FILE [KNOB=VALUE ...] [| hypothesis]` (# comments);
a line without knobs whose NAME is the family file's own runs that file unchanged.
"""

import re
import sys
from pathlib import Path


def write_variant(family: str, out_dir: str, name: str, hypothesis: str, knobs: list[str]) -> Path:
    src = Path(family).read_text()
    fam = Path(family).stem
    settings = []
    for kv in knobs:
        key, val = kv.split("=", 1)
        pat = re.compile(rf"^{re.escape(key)} = .*$", re.M)
        if len(pat.findall(src)) != 1:
            sys.exit(f"knob_variant: {key} is not one module constant of {family}")
        src = pat.sub(lambda _m, key=key, val=val: f"{key} = {val}  # knob (family {fam})", src)
        settings.append(f"{key}={val}")
    head = '"""'
    i = src.index(head) + 3
    doc = f"{fam} with {', '.join(settings)}.\n\nKnob variant of {family} (scripts/knob_variant.py).\nParent: {fam}\n"
    doc += f"Hypothesis: {hypothesis}\n\nFamily docstring: "
    src = src[:i] + doc + src[i:]
    out = Path(out_dir) / f"{name}.py"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(src)
    return out


def materialize(list_file: str, out_dir: str) -> list[tuple[str, str, str, str]]:
    """(name, family, parent, path) per line of a search list, knob variants written into out_dir."""
    rows = []
    for line in Path(list_file).read_text().splitlines():
        line, _, hypothesis = line.partition("|")
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        name, fam, parent, family_file, *knobs = words
        if not knobs and Path(family_file).stem == name:
            path = family_file
        else:
            path = str(write_variant(family_file, out_dir, name, hypothesis.strip() or "(none given)", knobs))
        rows.append((name, fam, parent, path))
    return rows


def main():
    if sys.argv[1:2] == ["--list"] and len(sys.argv) == 4:
        for row in materialize(sys.argv[2], sys.argv[3]):
            print(*row)
        return
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        return
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    family, out_dir, name, hypothesis, *knobs = sys.argv[1:]
    print(write_variant(family, out_dir, name, hypothesis, knobs))


if __name__ == "__main__":
    main()
