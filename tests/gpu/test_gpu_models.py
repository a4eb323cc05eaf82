"""GPU against CPU on whole training steps: every bench model runs a few steps from the same parameters and feed on
CPUPlace and on CUDAPlace(0); losses and parameters agree within float tolerance. This covers every op (and grad
op) the bench models use in the context the bench times, fallbacks to CPU kernels included."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.bench import models

STEPS = 3
# Float32 on two devices (other summation orders, FMA contraction, cuBLAS): relative agreement after a few steps.
RTOL, ATOL = 2e-4, 2e-5


def _run(name, place, params=None):
    mod = models.load(name)
    batch = min(mod.DEFAULTS["batch_size"], 16)
    built = mod.build(batch, 0)
    scope = fluid.Scope()
    exe = fluid.Executor(place)
    exe.run(built.startup, scope=scope)
    names = sorted(p.name for p in built.main.global_block().all_parameters())
    if params is not None:  # the CPU run's initial parameters, so both start alike
        for n in names:
            scope.find_var(n).get_tensor().set(params[n], place)
    start = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
    feed = built.feed()
    losses = [np.array(exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)[0])
              for _ in range(STEPS)]
    end = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
    return start, losses, end


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_model_steps_match_cpu(name):
    start, cpu_losses, cpu_end = _run(name, fluid.CPUPlace())
    _, gpu_losses, gpu_end = _run(name, fluid.CUDAPlace(0), start)
    for k, (c, g) in enumerate(zip(cpu_losses, gpu_losses)):
        np.testing.assert_allclose(g, c, rtol=RTOL, atol=ATOL, err_msg="%s: loss of step %d" % (name, k))
    for n in cpu_end:
        np.testing.assert_allclose(gpu_end[n], cpu_end[n], rtol=RTOL, atol=ATOL,
                                   err_msg="%s: parameter %s after %d steps" % (name, n, STEPS))


def test_startup_random_init_is_bit_identical():
    """uniform_random / gaussian_random draw on the host with the CPU generator, then copy: same bits."""
    cpu, _, _ = _run("mlp", fluid.CPUPlace())
    gpu, _, _ = _run("mlp", fluid.CUDAPlace(0))
    for n in cpu:
        np.testing.assert_array_equal(gpu[n], cpu[n], err_msg=n)
