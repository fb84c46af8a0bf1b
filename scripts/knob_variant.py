"""Write a knob variant of a kernel family file: module constants replaced, the docstring saying which (issue 23).

    python scripts/knob_variant.py kernels/FAMILY.py OUT_DIR NAME "hypothesis" _KNOB=VALUE [...]

The variant is a self-contained contest file (OUT_DIR/NAME.py, for a scratch folder); its docstring names the
family file as its parent and the settings, so the store's copy of the source says what was changed.
"""

import re
import sys
from pathlib import Path


def main():
    family, out_dir, name, hypothesis, *knobs = sys.argv[1:]
    src = Path(family).read_text()
    fam = Path(family).stem
    settings = []
    for kv in knobs:
        key, val = kv.split("=", 1)
        pat = re.compile(rf"^{re.escape(key)} = .*$", re.M)
        if len(pat.findall(src)) != 1:
            sys.exit(f"knob_variant: {key} is not one module constant of {family}")
        src = pat.sub(f"{key} = {val}  # knob (family {fam})", src)
        settings.append(f"{key}={val}")
    head = '"""'
    i = src.index(head) + 3
    doc = f"{fam} with {', '.join(settings)}.\n\nKnob variant of {family} (scripts/knob_variant.py).\nParent: {fam}\n"
    doc += f"Hypothesis: {hypothesis}\n\nFamily docstring: "
    src = src[:i] + doc + src[i:]
    out = Path(out_dir) / f"{name}.py"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(src)
    print(out)


if __name__ == "__main__":
    main()
