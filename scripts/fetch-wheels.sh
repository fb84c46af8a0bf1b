#!/usr/bin/env bash
# Download the wheels a GPU machine without a package index needs on top of its own torch/triton (DuckDB and
# GitPython with its dependencies, nvidia-ml-py), at the versions requirements.txt pins, into .whl/ (git-ignored).
# Default target: CPython 3.12 on manylinux x86-64; override with PYVER=3.11 (or 3.13) and PLATFORM=...
# On the GPU machine: python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#                     export PYTHONPATH=/tmp/site          (see docs/gpu-machine.md)
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER="${PYVER:-3.12}"
PLATFORM="${PLATFORM:-manylinux_2_28_x86_64}"
pin() { grep -i -E "^$1==" requirements.txt | head -1 | cut -d' ' -f1; }
pkgs=("$(pin duckdb)" "$(pin gitpython)" "$(pin nvidia-ml-py)")  # nvidia-ml-py: the GPU state per case
for p in "${pkgs[@]}"; do
  [ -n "$p" ] || { echo "fetch-wheels.sh: a pin is missing from requirements.txt" >&2; exit 1; }
done
# pip matches --platform tags exactly, so list the older manylinux tags a newer glibc also accepts.
plats=(--platform "$PLATFORM")
for tag in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_27_x86_64; do
  [ "$tag" = "$PLATFORM" ] || plats+=(--platform "$tag")
done
mkdir -p .whl
echo "fetch-wheels.sh: ${pkgs[*]} (and dependencies) for CPython $PYVER, $PLATFORM -> .whl/" >&2
python3 -m pip download -q --only-binary=:all: --implementation cp --python-version "$PYVER" "${plats[@]}" \
  --dest .whl "${pkgs[@]}"
ls -1 .whl
