"""cross_entropy: forward vs numpy (hard/soft labels, ignore_index), gradients vs central differences, label
shape and dtype errors, out-of-range labels at run time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def hard_labels(rng, shape, classes, axis):
    lshape = list(shape)
    lshape[axis] = 1
    return rng.randint(0, classes, lshape).astype("int64")


@pytest.mark.parametrize("shape", [(4, 5), (1, 3), (2, 3, 4)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_hard(shape, dtype):
    rng = np.random.RandomState(4)
    x = np_softmax(rng.uniform(-2, 2, shape)).astype(dtype)
    label = hard_labels(rng, shape, shape[-1], -1)
    y = -np.log(np.take_along_axis(x, label, axis=-1))
    OpTest("cross_entropy", {"X": x, "Label": label}, {"Y": y.astype(dtype)}).check_output()


def test_cross_entropy_hard_ignore_index_and_zero_probability():
    x = np.array([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]], dtype="float64")
    label = np.array([[1], [-1], [2], [-1]], dtype="int64")
    y = np.array([[-np.log(0.8)], [0.0], [-np.log(0.8)], [0.0]])
    OpTest("cross_entropy", {"X": x, "Label": label}, {"Y": y}, {"ignore_index": -1}).check_output()
    # log(0) is clipped to a large finite loss (Fluid's TolerableValue), not inf
    label0 = np.array([[2], [0], [0], [0]], dtype="int64")
    y0 = -np.log(np.take_along_axis(np.maximum(x, 1e-300), label0, axis=1))
    y0[0, 0] = 1e20
    OpTest("cross_entropy", {"X": x, "Label": label0}, {"Y": y0}).check_output(rtol=1e-6)


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4), (3, 20)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_soft(shape, dtype):
    rng = np.random.RandomState(5)
    x = np_softmax(rng.uniform(-2, 2, shape)).astype(dtype)
    label = np_softmax(rng.uniform(-2, 2, shape)).astype(dtype)
    y = -(label * np.log(x)).sum(-1, keepdims=True)
    OpTest("cross_entropy", {"X": x, "Label": label}, {"Y": y.astype(dtype)}, {"soft_label": True}).check_output()


def test_cross_entropy_grad_hard_with_ignore():
    rng = np.random.RandomState(6)
    x = rng.uniform(0.1, 1.0, (5, 4))
    label = np.array([[0], [3], [7], [1], [7]], dtype="int64")  # 7 is ignored
    y = np.where(label == 7, 0.0, -np.log(np.take_along_axis(x, np.where(label == 7, 0, label), axis=1)))
    OpTest("cross_entropy", {"X": x, "Label": label}, {"Y": y}, {"ignore_index": 7}).check_grad(["X"], "Y")


def test_cross_entropy_grad_soft():
    rng = np.random.RandomState(7)
    x = rng.uniform(0.1, 1.0, (3, 4))
    label = np_softmax(rng.uniform(-1, 1, (3, 4)))
    y = -(label * np.log(x)).sum(-1, keepdims=True)
    OpTest("cross_entropy", {"X": x, "Label": label}, {"Y": y}, {"soft_label": True}).check_grad(["X"], "Y")


@pytest.mark.parametrize("lshape,soft,msg", [
    ([4, 2], False, r"Label 'lbl' \[4, 2\] does not match X 'px' \[4, 5\] at dim 1: expected 1"),
    ([3, 1], False, r"Label 'lbl' \[3, 1\] does not match X 'px' \[4, 5\] at dim 0: expected 4"),
    ([4], False, r"Label 'lbl' \[4\] must have the same rank as X 'px' \[4, 5\]"),
    ([4, 1], True, r"Label 'lbl' \[4, 1\] does not match X 'px' \[4, 5\] at dim 1: expected 5"),
])
def test_cross_entropy_label_shape_mismatch(lshape, soft, msg):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="px", shape=[4, 5], dtype="float32", append_batch_size=False)
        lbl = fluid.layers.data(name="lbl", shape=lshape, dtype="float32" if soft else "int64",
                                append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match="cross_entropy: " + msg):
            fluid.layers.cross_entropy(x, lbl, soft_label=soft)


def test_cross_entropy_hard_label_must_be_int64():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="px", shape=[4, 5], dtype="float32", append_batch_size=False)
        lbl = fluid.layers.data(name="lbl", shape=[4, 1], dtype="int32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"cross_entropy: hard Label 'lbl' must be int64, got int32"):
            fluid.layers.cross_entropy(x, lbl)


def _run_time_label_check(build, name, x_name, x_shape):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name=x_name, shape=list(x_shape[1:]), dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        out = build(x, label)
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np_softmax(np.random.RandomState(8).rand(*x_shape)).astype("float32")
    bad = np.array([[0], [2], [7], [1]], dtype="int64")
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"%s: Label 'label' holds 7 at position 2, out of range \[0, 5\) for %s '%s' \[4, 5\]"
                       % (name, {"cross_entropy": "X"}.get(name, "Logits"), x_name)):
        exe.run(main, feed={x_name: xv, "label": bad}, fetch_list=[out])
    neg = np.array([[0], [-3], [1], [1]], dtype="int64")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"holds -3 at position 1"):
        exe.run(main, feed={x_name: xv, "label": neg}, fetch_list=[out])
    good = np.array([[0], [2], [4], [1]], dtype="int64")  # the executor still works afterwards
    got, = exe.run(main, feed={x_name: xv, "label": good}, fetch_list=[out])
    assert got.shape == (4, 1) and np.isfinite(got).all()


def test_cross_entropy_label_out_of_range_at_run_time():
    _run_time_label_check(lambda x, label: fluid.layers.cross_entropy(x, label), "cross_entropy", "probs", (4, 5))
