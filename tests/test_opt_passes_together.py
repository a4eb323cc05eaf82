"""fuse_bn_act, fuse_gradient_sums, fuse_optimizer_ops and inplace all on at once: the bench models train bit for bit
as with none of them (losses, parameters and accumulators after two steps), and each pass fired."""
import importlib

import numpy as np
import pytest

import fluidlite as fluid

FLAGS = ("fuse_bn_act_ops", "fuse_gradient_sums", "fuse_all_optimizer_ops", "enable_inplace")


def _strategy(on, everything=False):
    """These four passes on or off; the passes on by default (elementwise and reduction fusion, which also drop
    elementwise_add_grad's copies) off, unless `everything`: then every training pass is on or off."""
    bs = fluid.BuildStrategy()
    for f in FLAGS + ("fuse_elementwise_chains", "fuse_reductions", "fuse_elewise_add_act_ops"):
        setattr(bs, f, on if (everything or f in FLAGS) else False)
    return bs


def _run(b, feed, on, init, everything=False):
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    prog = fluid.CompiledProgram(b.main, build_strategy=_strategy(on, everything))
    with fluid.scope_guard(scope):
        exe.run(b.startup)
        for n, v in init.items():
            scope.find_var(n).get_tensor().set(v, fluid.CPUPlace())
        out = [exe.run(prog, feed=feed, fetch_list=b.fetch_list) for _ in range(2)]
        state = {n: np.array(scope.find_var(n).get_tensor()) for n in init}
    return out, state


@pytest.mark.parametrize("model,fired", [
    ("resnet_small", {"fuse_bn_act", "fuse_gradient_sums", "fuse_optimizer_ops", "inplace"}),
    ("ctr_dnn", {"fuse_optimizer_ops", "inplace"}),
    ("transformer_encoder", {"fuse_gradient_sums", "fuse_optimizer_ops", "inplace"}),
    ("seq2seq", {"fuse_gradient_sums", "fuse_optimizer_ops", "inplace"}),
])
def test_all_on_equal_all_off(model, fired):
    _check_on_equals_off(model, fired, everything=False)


@pytest.mark.parametrize("model", ["resnet_small", "transformer_encoder", "seq2seq", "lstm_primitive"])
def test_every_training_pass_on_equals_all_off(model):
    _check_on_equals_off(model, {"fuse_elementwise_chains"}, everything=True)


def _check_on_equals_off(model, fired, everything):
    mod = importlib.import_module("fluidlite.bench.models." + model)
    b = mod.build(2, 0)
    feed = b.feed()
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(
        fluid.CompiledProgram(b.main, build_strategy=_strategy(True, everything)), feed=list(feed),
        fetch_list=b.fetch_list)
    assert {r["pass"] for r in view.pass_results if r["changes"]} >= fired
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(b.startup)
    held = {v.name: scope.find_var(v.name) for v in b.main.list_vars() if v.persistable}
    init = {n: np.array(var.get_tensor()) for n, var in held.items()
            if var is not None and var.get_tensor()._is_initialized()}
    (out_off, st_off), (out_on, st_on) = _run(b, feed, False, init, everything), _run(b, feed, True, init, everything)
    for x, y in zip(out_off, out_on):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)
    for n in st_off:
        np.testing.assert_array_equal(st_off[n], st_on[n], err_msg=n)
