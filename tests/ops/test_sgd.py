"""sgd: steps from fixed weights equal a numpy reference (float64, and float32 within 1e-5)."""
import numpy as np

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
