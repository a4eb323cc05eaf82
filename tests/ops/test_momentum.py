"""momentum: steps from fixed weights equal a numpy reference, with and without Nesterov; the velocity
accumulator is a persistable var with Fluid's name."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import record_checked
from optimizer_problem import B0, F32, W0, _build, _numpy_grads, _run


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
