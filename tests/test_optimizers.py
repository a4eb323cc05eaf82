"""Optimizer API: minimize returns the update ops and (param, grad) pairs, regularization and gradient clipping
change the SGD step as numpy says, learning_rate must be a number or a Variable. One step of each
optimizer op against numpy lives in tests/ops/test_{sgd,momentum,adam}.py."""
import numpy as np
import pytest

import fluidlite as fluid
from optimizer_problem import B0, F32, W0, _build, _numpy_grads, _run


def test_minimize_returns_ops_and_params_grads():
    main, startup, loss, ops, pg = _build(lambda: fluid.optimizer.SGD(learning_rate=0.1))
    assert [op.type for op in ops] == ["sgd", "sgd"]
    assert sorted(p.name for p, _ in pg) == ["b", "w"]
    assert all(g.name == p.name + "@GRAD" for p, g in pg)


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
