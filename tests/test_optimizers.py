"""One SGD / Momentum / Adam step from fixed weights equals a numpy reference; accumulators are
persistable vars with Fluid's names, initialised by the startup program; regularization and clipping."""
import numpy as np
import pytest

import fluidlite as fluid

# float32-representable: NumpyArrayInitializer stores values as fp32 (Fluid's assign_value)
W0 = np.array([[0.5, -0.2], [0.1, 0.3], [-0.4, 0.8]], dtype=np.float32).astype(np.float64)
B0 = np.array([0.05, -0.1], dtype=np.float32).astype(np.float64)
X = np.array([[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [0.0, 1.0, 1.0], [2.0, 0.1, -0.3]])
Y = np.array([[0.3, -0.7], [1.2, 0.4], [-0.5, 0.9], [0.1, 0.2]])


def _build(opt_factory, dtype="float64"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype=dtype)
        y = fluid.layers.data(name="y", shape=[2], dtype=dtype)
        pred = fluid.layers.fc(input=x, size=2, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.NumpyArrayInitializer(W0)),
            bias_attr=fluid.ParamAttr(name="b", initializer=fluid.initializer.NumpyArrayInitializer(B0)))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
        opt = opt_factory()
        ops, params_grads = opt.minimize(loss)
    return main, startup, loss, ops, params_grads


F32 = lambda v: float(np.float32(v))  # attributes and the LR variable are float32, as in Fluid


def _numpy_grads(w, b):
    pred = X @ w + b
    d = 2 * (pred - Y) / pred.size
    return X.T @ d, d.sum(0)


def _run(main, startup, steps):
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for _ in range(steps):
        exe.run(main, feed={"x": X, "y": Y}, scope=scope, fetch_list=[])
    return (np.array(scope.find_var("w").get_tensor()), np.array(scope.find_var("b").get_tensor()), scope)


def test_minimize_returns_ops_and_params_grads():
    main, startup, loss, ops, pg = _build(lambda: fluid.optimizer.SGD(learning_rate=0.1))
    assert [op.type for op in ops] == ["sgd", "sgd"]
    assert sorted(p.name for p, _ in pg) == ["b", "w"]
    assert all(g.name == p.name + "@GRAD" for p, g in pg)


def test_sgd_step_matches_numpy():
    main, startup, *_ = _build(lambda: fluid.optimizer.SGD(learning_rate=0.1))
    w, b, _ = _run(main, startup, 2)
    we, be = W0.copy(), B0.copy()
    for _ in range(2):
        gw, gb = _numpy_grads(we, be)
        we, be = we - F32(0.1) * gw, be - F32(0.1) * gb
    np.testing.assert_allclose(w, we, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b, be, rtol=1e-12, atol=1e-14)


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


def test_float32_sgd_within_1e5():
    main, startup, *_ = _build(lambda: fluid.optimizer.SGD(learning_rate=0.1), dtype="float32")
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    exe.run(main, feed={"x": X.astype("float32"), "y": Y.astype("float32")}, scope=scope)
    gw, gb = _numpy_grads(W0, B0)
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), W0 - 0.1 * gw, atol=1e-5)


def test_l2_decay_adds_coeff_times_param():
    main, startup, *_ = _build(lambda: fluid.optimizer.SGD(
        learning_rate=0.1, regularization=fluid.regularizer.L2Decay(0.01)))
    w, b, _ = _run(main, startup, 1)
    gw, gb = _numpy_grads(W0, B0)
    np.testing.assert_allclose(w, W0 - F32(0.1) * (gw + F32(0.01) * W0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b, B0 - F32(0.1) * (gb + F32(0.01) * B0), rtol=1e-12, atol=1e-14)


def test_global_norm_clip_scales_all_gradients():
    clip_norm = 0.05
    main, startup, *_ = _build(lambda: fluid.optimizer.SGD(
        learning_rate=1.0, grad_clip=fluid.clip.GradientClipByGlobalNorm(clip_norm)))
    w, b, _ = _run(main, startup, 1)
    gw, gb = _numpy_grads(W0, B0)
    norm = np.sqrt((gw ** 2).sum() + (gb ** 2).sum())
    assert norm > clip_norm  # the clip is active in this case
    s = F32(clip_norm) / max(norm, F32(clip_norm))
    np.testing.assert_allclose(w, W0 - gw * s, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b, B0 - gb * s, rtol=1e-12, atol=1e-14)


def test_learning_rate_must_be_number_or_variable():
    with pytest.raises(TypeError, match="learning_rate"):
        fluid.optimizer.SGD(learning_rate="0.1")
