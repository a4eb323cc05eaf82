#!/usr/bin/env bash
# Lint: ruff over the Python (config in pyproject.toml) and a clang-format check over the C++ and CUDA
# sources (config in .clang-format). Exit status 0 when both are clean. Install the pinned tools with
# `pip install -r .ci/lint-requirements.txt`; fix formatting with `clang-format -i <files>`.
set -uo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t cxx < <(git ls-files 'csrc/*.cc' 'csrc/*.h' 'csrc/*.cu' 'csrc/*.cuh' 'kernels/*.cc' 'kernels/*.h' 'kernels/*.cu' 'kernels/*.cuh')
else
  mapfile -t cxx < <(find csrc kernels -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | sort)
fi
status=0
echo "lint: ruff $(ruff --version | cut -d' ' -f2) over the Python sources"
ruff check --no-cache . || status=1
echo "lint: $(clang-format --version | sed 's/.*version /clang-format /') over ${#cxx[@]} C++ files"
clang-format --dry-run -Werror "${cxx[@]}" || status=1
[ $status -eq 0 ] && echo "lint: clean"
exit $status
