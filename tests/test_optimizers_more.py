"""Fluid 1.8's other optimizers through their Python classes (tests/optimizer_problem.py's fc regression):
several steps of DecayedAdagrad, Adadelta, Adamax, Lamb, LarsMomentum (and RMSProp/Ftrl when their ops are
registered) against numpy, their accumulator names and persistence across save/load, convergence, the long and
short names; gradient clipping (grad_clip, set_gradient_clip, precedence); the backward / apply_gradients /
apply_optimize split; ExponentialMovingAverage and ModelAverage against numpy, with apply/restore."""
import warnings

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from optimizer_problem import B0, F32, W0, X, Y, _build, _numpy_grads, _run

optim = fluid.optimizer


def _numpy_steps(update, steps, state_init):
    """Run `update(name, p, g, state) -> p` for w and b over `steps` steps of the shared problem."""
    p = {"w": W0.copy(), "b": B0.copy()}
    st = {k: state_init(v) for k, v in p.items()}
    for t in range(1, steps + 1):
        gw, gb = _numpy_grads(p["w"], p["b"])
        for k, g in (("w", gw), ("b", gb)):
            p[k] = update(p[k], g, st[k], t)
    return p, st


def _check(main, startup, expect, steps, rtol=1e-10):
    w, b, scope = _run(main, startup, steps)
    np.testing.assert_allclose(w, expect["w"], rtol=rtol, atol=1e-13)
    np.testing.assert_allclose(b, expect["b"], rtol=rtol, atol=1e-13)
    return scope


def _tensor(scope, name):
    return np.array(scope.find_var(name).get_tensor())


def test_decayed_adagrad_steps_match_numpy():
    lr, decay, eps = F32(0.05), F32(0.9), F32(1e-6)

    def upd(p, g, s, t):
        s["m"] = decay * s["m"] + (1 - decay) * g * g
        return p - lr * g / (np.sqrt(s["m"]) + eps)

    main, startup, *_ = _build(lambda: optim.DecayedAdagrad(learning_rate=0.05, decay=0.9, epsilon=1e-6))
    assert [op.type for op in main.global_block().ops].count("decayed_adagrad") == 2
    expect, st = _numpy_steps(upd, 3, lambda v: {"m": np.zeros_like(v)})
    scope = _check(main, startup, expect, 3)
    np.testing.assert_allclose(_tensor(scope, "w_moment_0"), st["w"]["m"], rtol=1e-10)


def test_adadelta_steps_match_numpy():
    rho, eps = F32(0.95), F32(1e-6)

    def upd(p, g, s, t):
        s["eg"] = rho * s["eg"] + (1 - rho) * g * g
        u = -np.sqrt((s["eu"] + eps) / (s["eg"] + eps)) * g
        s["eu"] = rho * s["eu"] + (1 - rho) * u * u
        return p + u

    main, startup, *_ = _build(lambda: optim.Adadelta(learning_rate=0.5, epsilon=1e-6, rho=0.95))
    names = set(main.global_block().vars)
    assert {"w__avg_squared_grad_0", "w__avg_squared_update_0"} <= names
    expect, st = _numpy_steps(upd, 3, lambda v: {"eg": np.zeros_like(v), "eu": np.zeros_like(v)})
    scope = _check(main, startup, expect, 3)
    np.testing.assert_allclose(_tensor(scope, "w__avg_squared_update_0"), st["w"]["eu"], rtol=1e-10)


def test_adamax_steps_match_numpy_and_beta1_pow_advances():
    lr, b1, b2, eps = F32(0.01), F32(0.9), F32(0.99), F32(1e-8)

    def upd(p, g, s, t):
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["u"] = np.maximum(b2 * s["u"] + eps, np.abs(g))
        return p - lr / (1 - b1 ** t) * s["m"] / s["u"]

    main, startup, *_ = _build(lambda: optim.Adamax(learning_rate=0.01, beta1=0.9, beta2=0.99, epsilon=1e-8))
    ops = [op.type for op in main.global_block().ops]
    assert ops.count("adamax") == 2 and ops[-2:] == ["scale", "scale"]  # Fluid's _finish_update
    expect, st = _numpy_steps(upd, 4, lambda v: {"m": np.zeros_like(v), "u": np.zeros_like(v)})
    scope = _check(main, startup, expect, 4)
    np.testing.assert_allclose(_tensor(scope, "w_inf_norm_0"), st["w"]["u"], rtol=1e-10)
    np.testing.assert_allclose(_tensor(scope, "b_beta1_pow_acc_0"), [np.float32(b1) ** 5], rtol=1e-6)


@pytest.mark.parametrize("exclude_bias", [False, True])
def test_lamb_steps_match_numpy(exclude_bias):
    lr, wd, b1, b2, eps = F32(0.01), F32(0.02), F32(0.9), F32(0.999), F32(1e-6)

    def upd_for(decay):
        def upd(p, g, s, t):
            s["m1"] = b1 * s["m1"] + (1 - b1) * g
            s["m2"] = b2 * s["m2"] + (1 - b2) * g * g
            r = s["m1"] / (np.sqrt(s["m2"]) + eps) + decay * p
            return p - lr * (np.linalg.norm(p) / np.linalg.norm(r)) * r
        return upd

    fn = (lambda p: p.name == "b") if exclude_bias else None
    main, startup, *_ = _build(lambda: optim.Lamb(learning_rate=0.01, lamb_weight_decay=0.02,
                                              exclude_from_weight_decay_fn=fn))
    decays = {op.input("Param")[0]: op.attr("weight_decay") for op in main.global_block().ops if op.type == "lamb"}
    assert decays == {"w": pytest.approx(0.02), "b": 0.0 if exclude_bias else pytest.approx(0.02)}
    assert {"w_moment1_0", "w_moment2_0", "w_beta1_pow_acc_0", "w_beta2_pow_acc_0"} <= set(main.global_block().vars)
    p = {"w": W0.copy(), "b": B0.copy()}
    st = {k: {"m1": np.zeros_like(v), "m2": np.zeros_like(v)} for k, v in p.items()}
    for t in range(1, 4):
        gw, gb = _numpy_grads(p["w"], p["b"])
        p["w"] = upd_for(wd)(p["w"], gw, st["w"], t)
        p["b"] = upd_for(0.0 if exclude_bias else wd)(p["b"], gb, st["b"], t)
    scope = _check(main, startup, p, 3)
    # as in Fluid 1.8, the beta powers are neither read nor advanced
    np.testing.assert_allclose(_tensor(scope, "w_beta1_pow_acc_0"), [np.float32(0.9)], rtol=1e-7)


def test_lars_momentum_steps_match_numpy():
    lr, mu, coeff, wd = F32(0.5), F32(0.9), F32(0.01), F32(0.0005)

    def upd(p, g, s, t):
        pn, gn = np.linalg.norm(p), np.linalg.norm(g)
        local = lr * coeff * pn / (gn + wd * pn)
        s["v"] = s["v"] * mu + local * (g + wd * p)
        return p - s["v"]

    main, startup, *_ = _build(lambda: optim.LarsMomentum(learning_rate=0.5, momentum=0.9, lars_coeff=0.01))
    expect, st = _numpy_steps(upd, 3, lambda v: {"v": np.zeros_like(v)})
    scope = _check(main, startup, expect, 3)
    np.testing.assert_allclose(_tensor(scope, "w_velocity_0"), st["w"]["v"], rtol=1e-10)


@pytest.mark.skipif(not core.has_op("rmsprop"), reason="the rmsprop op is not registered in this build")
@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_steps_match_numpy(centered):
    lr, rho, eps, mom = F32(0.01), F32(0.9), F32(1e-6), F32(0.5)

    def upd(p, g, s, t):
        s["ms"] = rho * s["ms"] + (1 - rho) * g * g
        if centered:
            s["mg"] = rho * s["mg"] + (1 - rho) * g
            s["mom"] = mom * s["mom"] + lr * g / np.sqrt(s["ms"] - s["mg"] ** 2 + eps)
        else:
            s["mom"] = mom * s["mom"] + lr * g / np.sqrt(s["ms"] + eps)
        return p - s["mom"]

    main, startup, *_ = _build(lambda: optim.RMSProp(learning_rate=0.01, rho=0.9, epsilon=1e-6, momentum=0.5,
                                                 centered=centered))
    assert {"w_momentum_0", "w_mean_square_0", "w_mean_grad_0"} <= set(main.global_block().vars)
    expect, _ = _numpy_steps(upd, 3, lambda v: {k: np.zeros_like(v) for k in ("ms", "mg", "mom")})
    _check(main, startup, expect, 3, rtol=1e-9)


@pytest.mark.skipif(not core.has_op("ftrl"), reason="the ftrl op is not registered in this build")
def test_ftrl_steps_match_numpy():
    lr, l1, l2 = F32(0.1), F32(0.01), F32(0.02)

    def upd(p, g, s, t):
        n_new = s["n"] + g * g
        sigma = (np.sqrt(n_new) - np.sqrt(s["n"])) / lr
        s["z"] = s["z"] + g - sigma * p
        s["n"] = n_new
        out = (l1 * np.sign(s["z"]) - s["z"]) / (np.sqrt(n_new) / lr + 2 * l2)
        return np.where(np.abs(s["z"]) > l1, out, 0.0)

    main, startup, *_ = _build(lambda: optim.Ftrl(learning_rate=0.1, l1=0.01, l2=0.02))
    ops = [op for op in main.global_block().ops if op.type == "ftrl"]
    assert ops[0].attr("l2") == pytest.approx(0.02)  # l2, not Fluid 1.8's l1 (docstring)
    assert {"w_squared_0", "w_linear_0"} <= set(main.global_block().vars)
    expect, _ = _numpy_steps(upd, 3, lambda v: {"n": np.zeros_like(v), "z": np.zeros_like(v)})
    _check(main, startup, expect, 3, rtol=1e-9)


# ------------------------------------------------------------------ names, convergence, persistence

def test_long_and_short_names():
    for short, long_ in [("DecayedAdagrad", "DecayedAdagradOptimizer"), ("Adadelta", "AdadeltaOptimizer"),
                         ("Adamax", "AdamaxOptimizer"), ("RMSProp", "RMSPropOptimizer"), ("Ftrl", "FtrlOptimizer"),
                         ("Lamb", "LambOptimizer"), ("LarsMomentum", "LarsMomentumOptimizer")]:
        assert getattr(optim, short) is getattr(optim, long_)
        assert issubclass(getattr(optim, long_), optim.Optimizer)
    assert issubclass(optim.LambOptimizer, optim.AdamOptimizer)  # as in Fluid 1.8


FACTORIES = {
    "DecayedAdagrad": lambda: optim.DecayedAdagrad(learning_rate=0.05),
    "Adadelta": lambda: optim.Adadelta(learning_rate=1.0, rho=0.9, epsilon=1e-4),
    "Adamax": lambda: optim.Adamax(learning_rate=0.05),
    "Lamb": lambda: optim.Lamb(learning_rate=0.05),
    "LarsMomentum": lambda: optim.LarsMomentum(learning_rate=1.0, momentum=0.9, lars_coeff=0.05),
    "RMSProp": lambda: optim.RMSProp(learning_rate=0.01),
    "Ftrl": lambda: optim.Ftrl(learning_rate=0.5),
}
NEEDS = {"RMSProp": "rmsprop", "Ftrl": "ftrl"}


def _loss_trace(factory, steps):
    main, startup, loss, *_ = _build(factory)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    return [float(exe.run(main, feed={"x": X, "y": Y}, scope=scope, fetch_list=[loss])[0][0]) for _ in range(steps)]


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_converges_on_the_regression_problem(name):
    if name in NEEDS and not core.has_op(NEEDS[name]):
        pytest.skip("the %s op is not registered in this build" % NEEDS[name])
    trace = _loss_trace(FACTORIES[name], 200)
    assert trace[-1] < 0.5 * trace[0], (name, trace[0], trace[-1])


@pytest.mark.parametrize("name", ["Adamax", "Lamb", "Adadelta"])
def test_accumulators_persist_through_save_and_load(tmp_path, name):
    """3 steps, save_persistables, load into a fresh scope, 3 more steps == 6 uninterrupted steps."""
    main, startup, *_ = _build(FACTORIES[name])
    exe = fluid.Executor(fluid.CPUPlace())
    s1 = fluid.Scope()
    exe.run(startup, scope=s1)
    for _ in range(3):
        exe.run(main, feed={"x": X, "y": Y}, scope=s1)
    with fluid.scope_guard(s1):
        fluid.io.save_persistables(exe, str(tmp_path), main_program=main)
    s2 = fluid.Scope()
    exe.run(startup, scope=s2)
    with fluid.scope_guard(s2):
        fluid.io.load_persistables(exe, str(tmp_path), main_program=main)
    for s in (s1, s2):
        for _ in range(3):
            exe.run(main, feed={"x": X, "y": Y}, scope=s)
    accs = [v.name for v in main.list_vars() if v.persistable and "_0" in v.name and v.name not in ("w", "b")]
    assert accs
    for n in accs + ["w", "b"]:
        np.testing.assert_array_equal(_tensor(s1, n), _tensor(s2, n), err_msg=n)


def test_name_prefixes_accumulators():
    made = []
    main, *_ = _build(lambda: made.append(optim.Adamax(learning_rate=0.01, name="ax")) or made[0])
    names = {"w_ax_moment_0", "w_ax_inf_norm_0", "w_ax_beta1_pow_acc_0"}
    assert names <= set(main.global_block().vars)
    assert names <= set(made[0].get_opti_var_name_list()) and len(made[0].get_opti_var_name_list()) == 6


def test_argument_errors():
    with pytest.raises(TypeError, match="AdamaxOptimizer: beta1 must be a number"):
        optim.Adamax(beta1="0.9")
    with pytest.raises(ValueError, match="RMSPropOptimizer: rho is not set"):
        optim.RMSProp(learning_rate=0.1, rho=None)
    with pytest.raises(TypeError, match="exclude_from_weight_decay_fn must be a function"):
        optim.Lamb(exclude_from_weight_decay_fn="bias")
    with pytest.raises(TypeError, match="'grad_clip' should be an instance of GradientClipBase"):
        optim.Adamax(grad_clip=1.0)


# ------------------------------------------------------------------ backward / apply_gradients / apply_optimize

def test_backward_then_apply_gradients_equals_minimize():
    ref_w, ref_b, _ = _run(*_build(lambda: optim.Adamax(learning_rate=0.01))[:2], 3)
    for via in ("apply_gradients", "apply_optimize"):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            loss = _net()
            opt = optim.Adamax(learning_rate=0.01)
            pg = opt.backward(loss)
            assert sorted(p.name for p, _ in pg) == ["b", "w"]
            assert [op.type for op in main.global_block().ops].count("adamax") == 0
            ops = opt.apply_gradients(pg) if via == "apply_gradients" else opt.apply_optimize(loss, startup, pg)
            assert [op.type for op in ops].count("adamax") == 2
        w, b, _ = _run(main, startup, 3)
        np.testing.assert_array_equal(w, ref_w)
        np.testing.assert_array_equal(b, ref_b)


def _net():
    x = fluid.layers.data(name="x", shape=[3], dtype="float64")
    y = fluid.layers.data(name="y", shape=[2], dtype="float64")
    pred = fluid.layers.fc(input=x, size=2, param_attr=fluid.ParamAttr(
        name="w", initializer=fluid.initializer.NumpyArrayInitializer(W0)),
        bias_attr=fluid.ParamAttr(name="b", initializer=fluid.initializer.NumpyArrayInitializer(B0)))
    return fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))


def test_parameter_list_restricts_the_update():
    main, startup, loss, ops, pg = _build(lambda: optim.DecayedAdagrad(learning_rate=0.1, parameter_list=["w"]))
    assert [p.name for p, _ in pg] == ["w"]
    w, b, _ = _run(main, startup, 1)
    assert not np.array_equal(w, W0) and np.array_equal(b, B0)


# ------------------------------------------------------------------ gradient clipping

def _sgd_with(clip=None, before=None):
    def make():
        if before is not None:
            before()
        return optim.SGD(learning_rate=1.0, grad_clip=clip)
    main, startup, *_ = _build(make)
    w, b, _ = _run(main, startup, 1)
    return w, b


def test_grad_clip_by_value_and_need_clip():
    gw, gb = _numpy_grads(W0, B0)
    w, b = _sgd_with(fluid.clip.GradientClipByValue(max=0.1, min=-0.05))
    np.testing.assert_allclose(w, W0 - np.clip(gw, F32(-0.05), F32(0.1)), rtol=1e-12)
    np.testing.assert_allclose(b, B0 - np.clip(gb, F32(-0.05), F32(0.1)), rtol=1e-12)
    w, b = _sgd_with(fluid.clip.GradientClipByValue(0.05, need_clip=lambda p: p.name == "w"))
    np.testing.assert_allclose(w, W0 - np.clip(gw, F32(-0.05), F32(0.05)), rtol=1e-12)
    np.testing.assert_allclose(b, B0 - gb, rtol=1e-12)  # b left alone
    assert np.abs(gb).max() > 0.05  # so the clip would have changed b


def test_grad_clip_by_norm_scales_each_gradient_on_its_own():
    gw, gb = _numpy_grads(W0, B0)
    c = 0.2
    w, b = _sgd_with(fluid.clip.GradientClipByNorm(c))
    for p0, g, got in ((W0, gw, w), (B0, gb, b)):
        n = np.linalg.norm(g)
        np.testing.assert_allclose(got, p0 - g * (F32(c) / max(n, F32(c))), rtol=1e-12)
    assert np.linalg.norm(gw) > c > 0  # active for w


def test_grad_clip_by_global_norm_with_need_clip():
    gw, gb = _numpy_grads(W0, B0)
    c = 0.05
    w, b = _sgd_with(fluid.clip.GradientClipByGlobalNorm(c, need_clip=lambda p: p.name == "w"))
    s = F32(c) / max(np.linalg.norm(gw), F32(c))  # the global norm over w only
    np.testing.assert_allclose(w, W0 - gw * s, rtol=1e-12)
    np.testing.assert_allclose(b, B0 - gb, rtol=1e-12)


def test_set_gradient_clip_applies_at_minimize():
    gw, gb = _numpy_grads(W0, B0)
    with pytest.warns(UserWarning, match="set_gradient_clip' is not recommended"):
        w, b = _sgd_with(before=lambda: fluid.clip.set_gradient_clip(fluid.clip.GradientClipByValue(0.1),
                                                                     param_list=["w"]))
    np.testing.assert_allclose(w, W0 - np.clip(gw, F32(-0.1), F32(0.1)), rtol=1e-12)
    np.testing.assert_allclose(b, B0 - gb, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w, b = _sgd_with(before=lambda: fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(0.05)))
    s = F32(0.05) / np.sqrt((gw ** 2).sum() + (gb ** 2).sum())
    np.testing.assert_allclose(w, W0 - gw * s, rtol=1e-12)
    np.testing.assert_allclose(b, B0 - gb * s, rtol=1e-12)


def test_optimizer_grad_clip_wins_over_set_gradient_clip_with_fluids_warning():
    gw, gb = _numpy_grads(W0, B0)
    with pytest.warns(UserWarning) as rec:
        w, b = _sgd_with(fluid.clip.GradientClipByValue(0.2),
                         before=lambda: fluid.clip.set_gradient_clip(fluid.clip.GradientClipByValue(0.01)))
    messages = [str(r.message) for r in rec]
    assert any("'set_gradient_clip' will be ineffective, because you have set 'grad_clip' in 'optimizer'" in m
               for m in messages), messages
    np.testing.assert_allclose(w, W0 - np.clip(gw, F32(-0.2), F32(0.2)), rtol=1e-12)


def test_set_gradient_clip_after_minimize_warns_and_checks_types():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _net()
        optim.SGD(learning_rate=0.1).minimize(loss)
        with pytest.warns(UserWarning) as rec:
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByNorm(1.0))
        assert any("'minimize' has been invoked before" in str(r.message) for r in rec)
        with pytest.raises(TypeError, match="'clip' should be an instance of GradientClipBase"), \
                pytest.warns(UserWarning, match="not recommended"):
            fluid.clip.set_gradient_clip(1.0)
    with pytest.raises(ValueError, match="max must be positive"):
        fluid.clip.GradientClipByValue(-1.0)
    with pytest.raises(TypeError, match="need_clip must be a function"):
        fluid.clip.GradientClipByNorm(1.0, need_clip=3)


# ------------------------------------------------------------------ ExponentialMovingAverage

def _ema_program(decay, thres=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _net()
        optim.SGD(learning_rate=0.1).minimize(loss)
        steps = fluid.layers.autoincreased_step_counter() if thres else None
        ema = optim.ExponentialMovingAverage(decay, thres_steps=steps)
        ema.update()
    return main, startup, ema


@pytest.mark.parametrize("thres", [False, True])
def test_ema_update_apply_restore_match_numpy(thres):
    decay, steps = 0.9, 4
    main, startup, ema = _ema_program(decay, thres)
    assert {"w_ema_0", "b_ema_0", "scheduled_ema_decay_rate", "@EMA_STEP_COUNTER@"} <= set(main.global_block().vars)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for _ in range(steps):
        exe.run(main, feed={"x": X, "y": Y}, scope=scope)
    # numpy: SGD, then ema = d ema + (1 - d) p with the updated p
    p = {"w": W0.copy(), "b": B0.copy()}
    e = {k: np.zeros_like(v) for k, v in p.items()}
    d = np.float32(decay)
    for t in range(steps):
        gw, gb = _numpy_grads(p["w"], p["b"])
        p["w"], p["b"] = p["w"] - F32(0.1) * gw, p["b"] - F32(0.1) * gb
        d = min(np.float32(decay), np.float32(t + 1 + 1) / np.float32(t + 1 + 10)) if thres else np.float32(decay)
        for k in p:
            e[k] = e[k] * float(d) + p[k] * (1 - float(d))
    np.testing.assert_allclose(_tensor(scope, "w_ema_0"), e["w"], rtol=1e-6)
    trained = _tensor(scope, "w")
    with fluid.scope_guard(scope):
        with ema.apply(exe):
            corrected = e["w"] / (1 - float(d) ** steps)
            np.testing.assert_allclose(_tensor(scope, "w"), corrected, rtol=1e-5)
        np.testing.assert_array_equal(_tensor(scope, "w"), trained)  # restored
        with ema.apply(exe, need_restore=False):
            pass
        np.testing.assert_allclose(_tensor(scope, "w"), corrected, rtol=1e-5)
        ema.restore(exe)
    np.testing.assert_array_equal(_tensor(scope, "w"), trained)
    np.testing.assert_allclose(_tensor(scope, "w_ema_0"), e["w"], rtol=1e-6)  # apply left ema as it was


def test_ema_apply_before_any_update_uses_ema_uncorrected():
    main, startup, ema = _ema_program(0.99)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    with fluid.scope_guard(scope), ema.apply(exe):
        np.testing.assert_array_equal(_tensor(scope, "w"), np.zeros_like(W0))


def test_ema_skips_parameters_without_model_average():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype="float64")
        fluid.layers.fc(input=x, size=2, param_attr=fluid.ParamAttr(name="w", do_model_average=False),
                        bias_attr=fluid.ParamAttr(name="b"))
        ema = optim.ExponentialMovingAverage(0.9)
    assert [p.name for p, _ in ema._params_tmps] == ["b"]
    with pytest.raises(TypeError, match="thres_steps must be a Variable"):
        optim.ExponentialMovingAverage(0.9, thres_steps=5)


# ------------------------------------------------------------------ ModelAverage

def test_model_average_apply_restore_match_numpy():
    rate, min_w, max_w, steps = 0.5, 2, 3, 8
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _net()
        optim.SGD(learning_rate=0.1).minimize(loss)
        ma = optim.ModelAverage(rate, min_average_window=min_w, max_average_window=max_w)
    assert [op.type for op in main.global_block().ops].count("average_accumulates") == 2
    assert {"w_sum_1_0", "w_sum_2_0", "w_sum_3_0", "w_num_accumulates_0", "w_old_num_accumulates_0",
            "w_num_updates_0"} <= set(main.global_block().vars)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for _ in range(steps):
        exe.run(main, feed={"x": X, "y": Y}, scope=scope)
    # numpy: the accumulation reads the parameter after this step's SGD update
    p = W0.copy()
    b = B0.copy()
    s1, s2, s3 = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    n_acc = old_acc = n_upd = 0
    for _ in range(steps):
        gw, gb = _numpy_grads(p, b)
        p, b = p - F32(0.1) * gw, b - F32(0.1) * gb
        n_upd, n_acc = n_upd + 1, n_acc + 1
        s1 = s1 + p
        if n_acc >= min_w and n_acc >= min(max_w, int(np.float32(n_upd) * np.float32(rate))):
            s3, s1, s2 = s1 + s2, np.zeros_like(s1), np.zeros_like(s2)
            old_acc, n_acc = n_acc, 0
    assert old_acc > 0 and n_acc > 0  # a restart happened and a new window is open
    avg = (s1 + s2 + s3) / (n_acc + old_acc)
    trained = _tensor(scope, "w")
    np.testing.assert_allclose(trained, p, rtol=1e-12)
    with fluid.scope_guard(scope):
        with ma.apply(exe):
            np.testing.assert_allclose(_tensor(scope, "w"), avg, rtol=1e-12)
        np.testing.assert_array_equal(_tensor(scope, "w"), trained)
        with ma.apply(exe, need_restore=False):
            pass
        np.testing.assert_allclose(_tensor(scope, "w"), avg, rtol=1e-12)
        ma.restore(exe)
        np.testing.assert_array_equal(_tensor(scope, "w"), trained)


def test_model_average_argument_errors():
    with pytest.raises(ValueError, match=r"min_average_window \(5\) must not be larger than max_average_window \(4\)"):
        optim.ModelAverage(0.1, min_average_window=5, max_average_window=4)
    with pytest.raises(TypeError, match="ModelAverage: average_window_rate must be a number"):
        optim.ModelAverage("0.1")


@pytest.mark.parametrize("name", ["DecayedAdagrad", "Adadelta", "Adamax", "Lamb", "LarsMomentum"])
def test_float32_training_agrees_with_float64(name):
    """The float32 kernels: 5 steps in float32 stay within 1e-5 of the same 5 steps in float64."""
    got = {}
    for dtype in ("float32", "float64"):
        main, startup, *_ = _build(FACTORIES[name], dtype=dtype)
        scope = fluid.Scope()
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup, scope=scope)
        for _ in range(5):
            exe.run(main, feed={"x": X.astype(dtype), "y": Y.astype(dtype)}, scope=scope)
        got[dtype] = _tensor(scope, "w")
    assert got["float32"].dtype == np.float32
    np.testing.assert_allclose(got["float32"], got["float64"], atol=1e-5)
    assert not np.allclose(got["float64"], W0)  # it trained


def test_set_gradient_clip_global_norm_group_must_share_clip_norm():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = _net()
        fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(1.0), param_list=["w"])
        fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(2.0), param_list=["b"])
        with pytest.raises(ValueError, match="same group should be the same: group 'default_group' has 2.0 and 1.0"):
            optim.SGD(learning_rate=0.1).minimize(loss)


def test_ema_fluid_doc_usage_with_a_cloned_test_program():
    """Fluid 1.8's docstring example: test program cloned before minimize, Adam, a global-step thres_steps, EMA
    applied around the test program's runs (default scope, as a script has it)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        data = fluid.data(name="x", shape=[-1, 5], dtype="float32")
        hidden = fluid.layers.fc(input=data, size=3, param_attr=fluid.ParamAttr(name="fw"),
                                 bias_attr=fluid.ParamAttr(name="fb"))
        cost = fluid.layers.mean(hidden)
        test_program = main.clone(for_test=True)
        optim.Adam(learning_rate=0.001).minimize(cost)
        global_steps = fluid.layers.autoincreased_step_counter()
        ema = optim.ExponentialMovingAverage(0.999, thres_steps=global_steps)
        ema.update()
    rng = np.random.RandomState(3)
    with fluid.scope_guard(fluid.Scope()):
        scope = fluid.global_scope()
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        for _ in range(6):
            exe.run(main, feed={"x": rng.random_sample((10, 5)).astype("float32")}, fetch_list=[cost])
        x = rng.random_sample((4, 5)).astype("float32")
        (trained_out,) = exe.run(test_program, feed={"x": x}, fetch_list=[hidden])
        decay = np.float32(min(0.999, np.float32(7) / np.float32(16)))  # thres_steps = 6 at the last step
        corr = 1 - float(decay) ** 6
        w_ema, b_ema = _tensor(scope, "fw_ema_0") / corr, _tensor(scope, "fb_ema_0") / corr
        with ema.apply(exe):
            (ema_out,) = exe.run(test_program, feed={"x": x}, fetch_list=[hidden])
        np.testing.assert_allclose(ema_out, x @ w_ema + b_ema, rtol=1e-4, atol=1e-6)
        (back,) = exe.run(test_program, feed={"x": x}, fetch_list=[hidden])
        np.testing.assert_array_equal(back, trained_out)
        assert not np.allclose(ema_out, trained_out)


@pytest.mark.parametrize("make", [lambda pl: optim.SGD(learning_rate=0.1, parameter_list=pl),
                                  lambda pl: optim.Momentum(learning_rate=0.1, momentum=0.9, parameter_list=pl),
                                  lambda pl: optim.Adam(learning_rate=0.1, parameter_list=pl),
                                  lambda pl: optim.Adagrad(learning_rate=0.1, parameter_list=pl)],
                         ids=["sgd", "momentum", "adam", "adagrad"])
def test_earlier_optimizers_take_parameter_list(make):
    main, startup, loss, ops, pg = _build(lambda: make(["b"]))
    assert [p.name for p, _ in pg] == ["b"]
    w, b, _ = _run(main, startup, 1)
    assert np.array_equal(w, W0) and not np.array_equal(b, B0)
