"""The optimizer ops (kernels/optimizer_ops.cc): steps from fixed weights equal a numpy reference (sgd, momentum,
adam, adagrad).
sgd: float64, and float32 within 1e-5. momentum: with and without Nesterov; the velocity accumulator is a
persistable var with Fluid's name. adam: moments and beta powers are persistable vars with Fluid's names."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import record_checked
from optimizer_problem import B0, F32, W0, X, Y, _build, _numpy_grads, _run


def test_sgd_step_matches_numpy():
    main, startup, *_ = _build(lambda: fluid.optimizer.SGD(learning_rate=0.1))
    w, b, _ = _run(main, startup, 2)
    we, be = W0.copy(), B0.copy()
    for _ in range(2):
        gw, gb = _numpy_grads(we, be)
        we, be = we - F32(0.1) * gw, be - F32(0.1) * gb
    np.testing.assert_allclose(w, we, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b, be, rtol=1e-12, atol=1e-14)
    record_checked("output", "sgd")


def test_float32_sgd_within_1e5():
    main, startup, *_ = _build(lambda: fluid.optimizer.SGD(learning_rate=0.1), dtype="float32")
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    exe.run(main, feed={"x": X.astype("float32"), "y": Y.astype("float32")}, scope=scope)
    gw, gb = _numpy_grads(W0, B0)
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), W0 - 0.1 * gw, atol=1e-5)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_steps_match_numpy(nesterov):
    main, startup, *_ = _build(lambda: fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9,
                                                                use_nesterov=nesterov))
    assert "w_velocity_0" in main.global_block().vars and main.global_block().var("w_velocity_0").persistable
    w, b, scope = _run(main, startup, 3)
    we, be, vw, vb = W0.copy(), B0.copy(), np.zeros_like(W0), np.zeros_like(B0)
    mu, lr = F32(0.9), F32(0.05)
    for _ in range(3):
        gw, gb = _numpy_grads(we, be)
        vw, vb = mu * vw + gw, mu * vb + gb
        if nesterov:
            we, be = we - (gw + mu * vw) * lr, be - (gb + mu * vb) * lr
        else:
            we, be = we - lr * vw, be - lr * vb
    np.testing.assert_allclose(w, we, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b, be, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.array(scope.find_var("w_velocity_0").get_tensor()), vw, rtol=1e-12, atol=1e-14)
    record_checked("output", "momentum")


def test_adam_steps_match_numpy():
    main, startup, *_ = _build(lambda: fluid.optimizer.Adam(learning_rate=0.01, beta1=0.9, beta2=0.99, epsilon=1e-8))
    names = set(main.global_block().vars)
    assert {"w_moment1_0", "w_moment2_0", "w_beta1_pow_acc_0", "w_beta2_pow_acc_0"} <= names
    w, b, scope = _run(main, startup, 3)
    we, be = W0.copy(), B0.copy()
    m = {k: np.zeros_like(v) for k, v in (("w", W0), ("b", B0))}
    v = {k: np.zeros_like(val) for k, val in (("w", W0), ("b", B0))}
    b1, b2, eps, lr = F32(0.9), F32(0.99), F32(1e-8), F32(0.01)
    b1p, b2p = b1, b2
    for _ in range(3):
        gw, gb = _numpy_grads(we, be)
        lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
        for k, g in (("w", gw), ("b", gb)):
            m[k] = b1 * m[k] + (1 - b1) * g
            v[k] = b2 * v[k] + (1 - b2) * g * g
        we = we - lr_t * m["w"] / (np.sqrt(v["w"]) + eps)
        be = be - lr_t * m["b"] / (np.sqrt(v["b"]) + eps)
        b1p, b2p = b1p * b1, b2p * b2
    np.testing.assert_allclose(w, we, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(b, be, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(np.array(scope.find_var("w_beta1_pow_acc_0").get_tensor()), [b1 ** 4], rtol=1e-12)
    record_checked("output", "adam")


@pytest.mark.parametrize("initial", [0.0, 0.1])
def test_adagrad_steps_match_numpy(initial):
    main, startup, *_ = _build(lambda: fluid.optimizer.AdagradOptimizer(learning_rate=0.05, epsilon=1e-6,
                                                                        initial_accumulator_value=initial))
    assert main.global_block().var("w_moment_0").persistable
    assert [op.type for op in main.global_block().ops].count("adagrad") == 2
    w, b, scope = _run(main, startup, 3)
    we, be = W0.copy(), B0.copy()
    mw, mb = np.full_like(W0, F32(initial)), np.full_like(B0, F32(initial))
    lr, eps = F32(0.05), F32(1e-6)
    for _ in range(3):
        gw, gb = _numpy_grads(we, be)
        mw, mb = mw + gw * gw, mb + gb * gb
        we, be = we - lr * gw / (np.sqrt(mw) + eps), be - lr * gb / (np.sqrt(mb) + eps)
    np.testing.assert_allclose(w, we, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b, be, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.array(scope.find_var("w_moment_0").get_tensor()), mw, rtol=1e-12, atol=1e-14)
    record_checked("output", "adagrad")


def test_adagrad_moment_shape_error():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        p = block.create_var(name="p", shape=[3, 2], dtype="float32", persistable=True)
        g = block.create_var(name="g", shape=[3, 2], dtype="float32")
        m = block.create_var(name="m", shape=[2, 3], dtype="float32", persistable=True)
        lr = block.create_var(name="lr", shape=[1], dtype="float32", persistable=True)
        with pytest.raises(Exception, match=r"adagrad: .*Moment.* must have the shape of .*Param"):
            block.append_op(type="adagrad", inputs={"Param": p, "Grad": g, "Moment": m, "LearningRate": lr},
                            outputs={"ParamOut": p, "MomentOut": m})


def _run_update_op(op_type, inputs, outputs, attrs, steps=2, seed=0):
    """Runs `op_type` `steps` times on float64 state from scope: inputs maps slot -> (name, initial array) or
    (name, None) for the fed Grad; outputs maps slot -> name. Returns ({name: final array}, grads fed)."""
    rng = np.random.RandomState(seed)
    main = fluid.Program()
    block = main.global_block()
    vars_ = {}
    for slot, (name, value) in inputs.items():
        shape = list(value.shape) if value is not None else list(inputs["Param"][1].shape)
        vars_[slot] = block.create_var(name=name, dtype="float64", shape=shape, persistable=value is not None)
    block.append_op(type=op_type, inputs={k: [v] for k, v in vars_.items()},
                    outputs={k: [block.var(n)] for k, n in outputs.items()}, attrs=attrs)
    scope = fluid.Scope()
    for name, value in inputs.values():
        if value is not None:
            scope.var(name).get_tensor().set(value)
    exe = fluid.Executor(fluid.CPUPlace())
    grads = [rng.randn(*inputs["Param"][1].shape) for _ in range(steps)]
    for g in grads:
        exe.run(main, feed={inputs["Grad"][0]: g}, scope=scope)
    return {n: np.array(scope.find_var(n).get_tensor()) for n, v in inputs.values() if v is not None}, grads


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_steps_match_numpy(centered):
    rng = np.random.RandomState(1)
    p0, ms0, mg0, m0 = rng.randn(4, 3), rng.rand(4, 3), 0.1 * rng.randn(4, 3), 0.1 * rng.randn(4, 3)
    ins = {"Param": ("p", p0), "MeanSquare": ("ms", ms0), "MeanGrad": ("mg", mg0), "Moment": ("m", m0),
           "LearningRate": ("lr", np.array([0.01])), "Grad": ("g", None)}
    outs = {"ParamOut": "p", "MeanSquareOut": "ms", "MeanGradOut": "mg", "MomentOut": "m"}
    got, grads = _run_update_op("rmsprop", ins, outs, {"decay": 0.9, "momentum": 0.5, "epsilon": 1e-6,
                                                       "centered": centered})
    p, ms, mg, m = p0, ms0, mg0, m0
    for g in grads:
        ms = 0.9 * ms + 0.1 * g * g
        denom = ms + 1e-6
        if centered:
            mg = 0.9 * mg + 0.1 * g
            denom = denom - mg * mg
        m = 0.5 * m + 0.01 * g / np.sqrt(denom)
        p = p - m
    for name, want in (("p", p), ("ms", ms), ("m", m)) + ((("mg", mg),) if centered else (("mg", mg0),)):
        np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-6)
    record_checked("output", "rmsprop")


def test_rmsprop_centered_needs_mean_grad():
    main = fluid.Program()
    b = main.global_block()
    v = {n: b.create_var(name=n, dtype="float32", shape=[4, 3], persistable=True) for n in ("p", "ms", "m", "g")}
    lr = b.create_var(name="lr", dtype="float32", shape=[1], persistable=True)
    with pytest.raises(Exception, match="rmsprop: centered=True needs MeanGrad and MeanGradOut"):
        b.append_op(type="rmsprop", inputs={"Param": v["p"], "MeanSquare": v["ms"], "Moment": v["m"],
                                             "Grad": v["g"], "LearningRate": lr},
                    outputs={"ParamOut": v["p"], "MeanSquareOut": v["ms"], "MomentOut": v["m"]},
                    attrs={"centered": True})


@pytest.mark.parametrize("l1,l2,lr_power", [(0.0, 0.0, -0.5), (0.5, 0.1, -0.5), (0.05, 0.1, -0.6)])
def test_ftrl_steps_match_numpy(l1, l2, lr_power):
    rng = np.random.RandomState(2)
    p0, sq0, lin0 = rng.randn(4, 3), rng.rand(4, 3) + 0.1, rng.randn(4, 3)
    ins = {"Param": ("p", p0), "SquaredAccumulator": ("sq", sq0), "LinearAccumulator": ("lin", lin0),
           "LearningRate": ("lr", np.array([0.1])), "Grad": ("g", None)}
    outs = {"ParamOut": "p", "SquaredAccumOut": "sq", "LinearAccumOut": "lin"}
    got, grads = _run_update_op("ftrl", ins, outs, {"l1": l1, "l2": l2, "lr_power": lr_power}, steps=3)
    p, sq, lin = p0, sq0, lin0
    for g in grads:
        new_sq = sq + g * g
        lin = lin + g - (new_sq ** -lr_power - sq ** -lr_power) / 0.1 * p
        p = np.where(np.abs(lin) > l1, (l1 * np.sign(lin) - lin) / (new_sq ** -lr_power / 0.1 + 2 * l2), 0.0)
        sq = new_sq
    if l1 > 0.3:
        assert (p == 0).any()  # the L1 shrinkage zeroes some weights
    for name, want in (("p", p), ("sq", sq), ("lin", lin)):
        np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-8)
    record_checked("output", "ftrl")


def test_adam_on_a_large_parameter_matches_numpy():
    # 400 x 300 elements: the update is split over the thread pool (in place, as the optimizer appends it)
    rng = np.random.RandomState(3)
    w0 = rng.uniform(-1, 1, (400, 300)).astype("float32")
    coef = rng.uniform(-1, 1, (400, 300)).astype("float32")  # loss = sum(w * coef * t): gradient coef * t
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        w = fluid.layers.create_parameter([400, 300], "float32", name="big_w",
                                          default_initializer=fluid.initializer.NumpyArrayInitializer(w0))
        c = fluid.layers.data(name="c", shape=[400, 300], dtype="float32", append_batch_size=False)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(w, c))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    assert [op for op in main.global_block().ops if op.type == "adam"][0].output("ParamOut") == ["big_w"]
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    we, m, v = w0.astype("float64"), np.zeros(w0.shape), np.zeros(w0.shape)
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 0.01
    for t in range(1, 4):
        exe.run(main, feed={"c": coef * t}, scope=scope)
        g = coef.astype("float64") * t
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        we = we - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
    np.testing.assert_allclose(np.array(scope.find_var("big_w").get_tensor()), we, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(scope.find_var("big_w_moment2_0").get_tensor()), v, rtol=1e-4)  # float32
