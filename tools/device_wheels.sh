#!/usr/bin/env bash
# Fetches into ./.whl (git-ignored) the wheels tools/device_check.sh installs on the GPU machine, which has no
# package index: the packages fluidlite needs that its image lacks, for its Python (3.12 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${DEVICE_PYTHON_VERSION:-3.12}
mkdir -p .whl
for pkg in scipy-openblas32; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "$pkg"
done
ls -la .whl
