"""Ops that update parameters (optimizers, regularization, gradient clipping) land in the program of the
parameters they update, even when called outside any program_guard with another default main program
(Fluid: minimize guards loss.block.program; append_regularization_ops / append_gradient_clip_ops use the
parameter's block.program)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import unique_name
from fluidlite.framework import OpRole


@pytest.fixture
def fresh_defaults():
    """Empty default main/startup programs for the test, so 'nothing landed there' is exact."""
    main = fluid.framework.switch_main_program(fluid.Program())
    startup = fluid.framework.switch_startup_program(fluid.Program())
    try:
        yield fluid.default_main_program(), fluid.default_startup_program()
    finally:
        fluid.framework.switch_main_program(main)
        fluid.framework.switch_startup_program(startup)


def _net(lr_factor=1.0, param_reg=None):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        attr = fluid.ParamAttr(name="w", learning_rate=lr_factor, regularizer=param_reg)
        y = fluid.layers.fc(input=x, size=2, param_attr=attr, bias_attr=fluid.ParamAttr(name="b"))
        loss = fluid.layers.mean(y)
    return main, startup, loss


def _untouched(program):
    return program.global_block().desc.op_size() == 0 and len(program.global_block().vars) == 0


def _new_ops(program, n_before):
    return [op.type for op in program.global_block().ops[n_before:]]


def test_append_regularization_ops_outside_program_guard(fresh_defaults):
    default_main, default_startup = fresh_defaults
    main, startup, loss = _net(param_reg=fluid.regularizer.L1Decay(0.5))
    params_grads = fluid.backward.append_backward(loss)
    n = len(main.global_block().ops)
    out = fluid.regularizer.append_regularization_ops(params_grads, fluid.regularizer.L2Decay(0.1))
    assert _untouched(default_main) and _untouched(default_startup)
    # b: optimizer's L2 (scale + sum); w: its own L1 (sign + scale + sum)
    assert sorted(_new_ops(main, n)) == sorted(["scale", "sum", "sign", "scale", "sum"])
    for op in main.global_block().ops[n:]:
        assert op.attr("op_role") == OpRole.Optimize
    for (p, _g), (p2, g2) in zip(params_grads, out):
        assert p2 is p and g2.block is main.global_block() and g2.op.type == "sum"


@pytest.mark.parametrize("clip", [fluid.clip.GradientClipByGlobalNorm(1.0), fluid.clip.GradientClipByValue(0.5)],
                         ids=["global_norm", "value"])
def test_append_gradient_clip_ops_outside_program_guard(fresh_defaults, clip):
    default_main, default_startup = fresh_defaults
    main, startup, loss = _net()
    params_grads = fluid.backward.append_backward(loss)
    n = len(main.global_block().ops)
    out = fluid.clip.append_gradient_clip_ops(params_grads, clip)
    assert _untouched(default_main) and _untouched(default_startup)
    new = _new_ops(main, n)
    assert new.count("elementwise_mul" if isinstance(clip, fluid.clip.GradientClipByGlobalNorm) else "clip") == 2
    assert all(g.block is main.global_block() for _, g in out)


@pytest.mark.parametrize("make_opt", [lambda: fluid.optimizer.SGD(0.1),
                                      lambda: fluid.optimizer.Momentum(0.1, momentum=0.9),
                                      lambda: fluid.optimizer.Adam(0.1)], ids=["sgd", "momentum", "adam"])
def test_apply_gradients_outside_program_guard(fresh_defaults, make_opt):
    default_main, default_startup = fresh_defaults
    main, startup, loss = _net(lr_factor=0.5)  # w's learning rate is scaled by a scale op
    params_grads = fluid.backward.append_backward(loss)
    n = len(main.global_block().ops)
    opt = make_opt()
    ops = opt.apply_gradients(params_grads)
    assert _untouched(default_main)
    assert [op.type for op in ops] == [opt.type] * 2
    assert all(op.block is main.global_block() for op in ops)
    assert "scale" in _new_ops(main, n)  # the scaled learning rate of w
    lr = opt._global_learning_rate(main)
    assert lr is not None and lr.block is main.global_block()
    assert opt._global_learning_rate(default_main) is None
    # accumulators live in main; initializers go to the default startup program (no startup was given)
    for acc in opt._accumulators.values():
        for var in acc.values():
            assert var.block is main.global_block()
    init_names = {n for op in default_startup.global_block().ops for n in op.output_arg_names}
    assert lr.name in init_names


def test_minimize_outside_program_guard_runs(fresh_defaults):
    default_main, default_startup = fresh_defaults
    main, startup, loss = _net()
    opt = fluid.optimizer.Adam(0.1, regularization=fluid.regularizer.L2Decay(0.01),
                               grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0))
    opt.minimize(loss, startup_program=startup)
    assert _untouched(default_main) and _untouched(default_startup)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        w0 = np.array(scope.find_var("w").get_tensor())
        exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[loss])
        assert not np.allclose(np.array(scope.find_var("w").get_tensor()), w0)


def test_update_ops_refuse_parameters_of_two_programs(fresh_defaults):
    main1, _, loss1 = _net()
    main2, _, loss2 = _net()
    pg = fluid.backward.append_backward(loss1)[:1] + fluid.backward.append_backward(loss2)[:1]
    with pytest.raises(ValueError, match="different programs"):
        fluid.optimizer.SGD(0.1).apply_gradients(pg)
    with pytest.raises(ValueError, match="different programs"):
        fluid.clip.append_gradient_clip_ops(pg, fluid.clip.GradientClipByGlobalNorm(1.0))
