"""sigmoid_cross_entropy_with_logits: forward against numpy (ignore_index, normalize), gradients, the layer."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def ref(x, label, ignore_index=-100, normalize=False):
    x64, l64 = x.astype(np.float64), label.astype(np.float64)
    p = 1.0 / (1.0 + np.exp(-x64))
    with np.errstate(divide="ignore", invalid="ignore"):
        naive = -(l64 * np.log(p) + (1 - l64) * np.log(1 - p))
    out = np.where(np.isfinite(naive), naive, np.maximum(x64, 0) - x64 * l64 + np.log1p(np.exp(-np.abs(x64))))
    keep = label != ignore_index
    out = np.where(keep, out, 0.0)
    if normalize:
        out = out / max(keep.sum(), 1e-5)
    return out.astype(x.dtype)


def _data(shape, dtype, seed=0, ignore=None):
    rng = np.random.RandomState(seed)
    x = rng.uniform(-4, 4, shape).astype(dtype)
    label = rng.uniform(0, 1, shape).astype(dtype)
    if ignore is not None:
        label[rng.uniform(size=shape) < 0.3] = ignore
    return x, label


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ignore,normalize", [(-100, False), (-1, False), (-1, True), (-100, True)])
def test_forward(dtype, ignore, normalize):
    x, label = _data((6, 5), dtype, ignore=ignore if ignore != -100 else None)
    attrs = {"ignore_index": ignore, "normalize": normalize}
    OpTest("sigmoid_cross_entropy_with_logits", {"X": x, "Label": label}, {"Out": ref(x, label, ignore, normalize)},
           attrs).check_output(atol=1e-6, rtol=1e-5)


def test_large_logits_stay_finite():
    x = np.array([[-1000.0, -30.0, 0.0, 30.0, 1000.0]], "float32")
    label = np.array([[1.0, 0.0, 0.5, 1.0, 0.0]], "float32")
    want = np.array([[1000.0, 9.357623e-14, np.log(2.0), 9.357623e-14, 1000.0]], "float32")
    OpTest("sigmoid_cross_entropy_with_logits", {"X": x, "Label": label}, {"Out": want}).check_output(rtol=1e-5)


@pytest.mark.parametrize("ignore,normalize", [(-100, False), (-1, True), (-1, False)])
def test_check_grad(ignore, normalize):
    x, label = _data((4, 3, 2), "float64", seed=1, ignore=ignore if ignore != -100 else None)
    t = OpTest("sigmoid_cross_entropy_with_logits", {"X": x, "Label": label},
               {"Out": ref(x, label, ignore, normalize)}, {"ignore_index": ignore, "normalize": normalize})
    t.check_grad(["X"], "Out", max_relative_error=1e-6)


def test_all_ignored_normalize():
    x = np.ones((2, 2), "float32")
    label = np.full((2, 2), -1, "float32")
    OpTest("sigmoid_cross_entropy_with_logits", {"X": x, "Label": label}, {"Out": np.zeros((2, 2), "float32")},
           {"ignore_index": -1, "normalize": True}).check_output()


def test_layer():
    x, label = _data((5, 4), "float32", seed=2, ignore=-1)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=[4], dtype="float32")
        lv = fluid.layers.data("l", shape=[4], dtype="float32")
        out = fluid.layers.sigmoid_cross_entropy_with_logits(xv, lv, ignore_index=-1, normalize=True)
        plain = fluid.layers.sigmoid_cross_entropy_with_logits(xv, lv)
    op = main.global_block().ops[0]
    assert op.type == "sigmoid_cross_entropy_with_logits"
    assert op.attr("ignore_index") == -1 and op.attr("normalize") is True
    assert tuple(out.shape) == (-1, 4)
    exe = fluid.Executor(fluid.CPUPlace())
    got, got_plain = exe.run(main, feed={"x": x, "l": label}, fetch_list=[out, plain])
    np.testing.assert_allclose(got, ref(x, label, -1, True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got_plain, ref(x, label), rtol=1e-5, atol=1e-6)


def test_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[4], dtype="float32")
        bad = fluid.layers.data("bad", shape=[3], dtype="float32")
        ints = fluid.layers.data("ints", shape=[4], dtype="int64")
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"sigmoid_cross_entropy_with_logits: Label 'bad' \[-1, 3\] must have the shape of "
                                 r"X 'x' \[-1, 4\]"):
            fluid.layers.sigmoid_cross_entropy_with_logits(x, bad)
        with pytest.raises(TypeError, match=r"sigmoid_cross_entropy_with_logits: 'label' ints must be float32 or "
                                            r"float64"):
            fluid.layers.sigmoid_cross_entropy_with_logits(x, ints)
        with pytest.raises(TypeError, match=r"sigmoid_cross_entropy_with_logits: 'x' must be a Variable"):
            fluid.layers.sigmoid_cross_entropy_with_logits(np.zeros(4), x)
