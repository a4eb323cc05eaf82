"""adam: steps from fixed weights equal a numpy reference; moments and beta powers are persistable vars with
Fluid's names."""
import numpy as np

import fluidlite as fluid
from op_test import record_checked
from optimizer_problem import B0, F32, W0, _build, _numpy_grads, _run


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
