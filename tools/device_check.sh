#!/usr/bin/env bash
# The GPU check, in one command on a machine with a CUDA GPU (docs/gpu.md): builds fluidlite with CUDA, runs the GPU
# test subset (every op test on CUDAPlace(0) against numpy and the CPU kernels, copies, the allocator, profiler
# events, DLPack with CuPy and torch) and `python -m fluidlite.bench --device gpu --model all --compare torch`, and
# writes what it found to $OUT (default ./device_out): device_check.log (everything), pytest.log, bench.json,
# bench.txt and env.txt. Meant to finish in under 10 minutes on one H200 with 16 cores.
#
# Python packages the machine lacks can travel as wheels in ./.whl (tools/device_wheels.sh fetches them on a
# machine with an index; they are installed into /tmp/fluidlite-site, nothing is installed system-wide).
# Exit status: 0 when the build, the tests and the bench all passed; else the first failing stage's.
# DEVICE_CHECK_TESTS overrides the test paths (default "tests/gpu tests/ops"), e.g. for a dry run without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./device_out}
mkdir -p "$OUT"
LOG="$OUT/device_check.log"
: > "$LOG"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
start=$(date +%s)
say() { echo "[device_check $(( $(date +%s) - start ))s] $*" | tee -a "$LOG"; }
status=0
fail() { say "FAIL: $1 (exit $2)"; [ "$status" -eq 0 ] && status=$2; }

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  say "installing the carried wheels: $(ls .whl | tr '\n' ' ')"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/fluidlite-site \
    .whl/*.whl >>"$LOG" 2>&1 || fail "wheel install" $?
  export PYTHONPATH=/tmp/fluidlite-site${PYTHONPATH:+:$PYTHONPATH}
fi

{
  echo "date: $(date -u)"; uname -a; "$PY" --version
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || echo "no nvidia-smi"
  command -v nvcc && nvcc --version | tail -2
  nproc
  "$PY" -m pip list 2>/dev/null | grep -i -E "^(torch|cupy|numpy|pybind11|scipy-openblas32|nvidia-cublas) " || true
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt" >> "$LOG"

say "build (FLUIDLITE_CUDA=1, $(nproc) jobs)"
FLUIDLITE_CUDA=1 FLUIDLITE_BUILD_JOBS=$(nproc) "$PY" setup.py build_ext --inplace -q >>"$LOG" 2>&1 || {
  fail "build" $?; tail -40 "$LOG"; exit "$status"; }
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
"$PY" - <<'PYEOF' 2>&1 | tee -a "$LOG"
import fluidlite as fluid
from fluidlite import core, _core
print("is_compiled_with_cuda:", core.is_compiled_with_cuda(), "devices:", core.get_cuda_device_count())
if core.get_cuda_device_count():
    print("device 0:", _core.cuda_device_name(0), "| cuBLAS:", _core.cublas_library())
PYEOF

say "GPU tests: tests/gpu (GPU vs CPU for every op with a CUDA kernel, copies, allocator, profiler, DLPack) and tests/ops on CUDAPlace(0)"
XDIST=""
"$PY" -c "import xdist" 2>/dev/null && XDIST="-n 8"
# shellcheck disable=SC2086
timeout 300 "$PY" -m pytest -q -rs -p no:cacheprovider $XDIST ${DEVICE_CHECK_TESTS:-tests/gpu tests/ops} \
  -k "not test_coverage" > "$OUT/pytest.log" 2>&1
rc=$?
tail -30 "$OUT/pytest.log" | tee -a "$LOG"
[ $rc -eq 0 ] || fail "GPU tests" $rc

say "bench: python -m fluidlite.bench --device gpu --model all --compare torch"
timeout 330 "$PY" -m fluidlite.bench --device gpu --model all --compare torch --repeat 3 --no_progress \
  --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
rc=$?
cat "$OUT/bench.txt" >> "$LOG"
tail -60 "$OUT/bench.txt"
[ $rc -eq 0 ] || fail "bench" $rc

say "done: exit $status (files in $OUT)"
exit "$status"
