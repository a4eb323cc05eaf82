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
