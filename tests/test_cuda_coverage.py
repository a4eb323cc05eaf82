"""Every op the bench models run has a CUDA kernel in a CUDA build (CI's build has one: nvcc is there), so a GPU
program of any bench model runs on the device end to end; the only ops without one are those the executor runs
itself on any place (their sub-blocks' ops have kernels)."""
import pytest

from fluidlite import core
from fluidlite.bench import models

pytestmark = pytest.mark.skipif(not core.is_compiled_with_cuda(), reason="a CPU-only build registers no CUDA kernels")

# Kernel-less ops: run by the executor on the program's place (recurrent runs its step block there).
PLACE_AGNOSTIC = {"feed", "fetch", "recurrent", "recurrent_grad", "rnn_memory_helper", "rnn_memory_helper_grad"}


def _bench_ops():
    ops = set()
    for name in models.MODELS:
        mod = models.load(name)
        built = mod.build(mod.DEFAULTS["batch_size"], 0)
        for program in (built.main, built.startup):
            for block in program.blocks:
                ops.update(op.type for op in block.ops)
    return ops


def test_every_bench_op_has_a_cuda_kernel_for_float32():
    missing = []
    for t in sorted(_bench_ops() - PLACE_AGNOSTIC):
        kernels = dict(part.strip().split(":", 1) for part in core.op_proto(t)["kernels"].split(";") if ":" in part)
        if "float32" not in kernels.get("CUDA", "").split(","):
            missing.append("%s (%s)" % (t, core.op_proto(t)["kernels"]))
    assert not missing, "bench ops without a float32 CUDA kernel: %s" % ", ".join(missing)


def test_place_agnostic_ops_have_no_kernels_but_run_anywhere():
    for t in PLACE_AGNOSTIC:
        assert core.op_proto(t)["kernels"] == "none", t
