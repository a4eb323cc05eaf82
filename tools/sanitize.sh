#!/usr/bin/env bash
# Builds fluidlite._core with AddressSanitizer and UndefinedBehaviorSanitizer (FLUIDLITE_SANITIZE=1, see
# setup.py) in a temporary copy of this checkout, then runs the test suite against that build. Any report
# (a heap overflow, a use after free, undefined behaviour) aborts the run: the exit status is non-zero.
# Leak checking is off (CPython itself keeps memory until exit); a huge allocation returns null, as without
# ASan, so that the allocator's out-of-memory error is what the tests see. Arguments go to pytest, e.g.
#   tools/sanitize.sh -x tests/ops          # a part of the suite
#   KEEP=1 tools/sanitize.sh                # keep the build directory (printed) for reruns
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/fluidlite-sanitize.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
echo "sanitize: building in $work"
git ls-files -co --exclude-standard -z | (cd "$src" && xargs -0 cp --parents -t "$work")
cd "$work"
# CPU only, for the build and for the tests (tests/test_device_cpu.py then expects no CUDA build even where nvcc is)
export FLUIDLITE_CUDA=0
FLUIDLITE_SANITIZE=1 python setup.py -q build_ext --inplace > build.log 2>&1 \
  || { tail -30 build.log; echo "sanitize: build failed" >&2; exit 1; }
asan=$(gcc -print-file-name=libasan.so)
ubsan=$(gcc -print-file-name=libubsan.so)
echo "sanitize: running the tests with $asan and $ubsan preloaded"
LD_PRELOAD="$asan $ubsan" \
ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:abort_on_error=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1" \
UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1" \
  python -m pytest -q -p no:cacheprovider "$@"
