"""The cross-entropy losses (kernels/cross_entropy.cc).
cross_entropy: hard and soft labels vs numpy, ignore_index, gradients, label shape and dtype errors.
softmax_with_cross_entropy: forward vs numpy (axes, dtypes, hard/soft labels, ignore_index, large logits),
gradients vs central differences, label shape errors. Both: out-of-range labels at run time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


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


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4)])
def test_cross_entropy_hard_labels_without_the_class_axis(shape):
    """Fluid 1.8: ids shaped like X without its class axis ([batch, time] for [batch, time, classes]); the loss takes
    the ids' shape."""
    rng = np.random.RandomState(8)
    x = np_softmax(rng.uniform(-2, 2, shape))
    label = rng.randint(0, shape[-1], shape[:-1]).astype("int64")
    y = -np.log(np.take_along_axis(x, label[..., None], axis=-1))[..., 0]
    t = OpTest("cross_entropy", {"X": x, "Label": label}, {"Y": y})
    t.check_output()
    t.check_grad(["X"], "Y")


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
    ([4, 1, 1], False, r"Label 'lbl' \[4, 1, 1\] must have the same rank as X 'px' \[4, 5\] \(or, for hard "
                       r"labels, one dim less\)"),
    ([3], False, r"Label 'lbl' \[3\] does not match X 'px' \[4, 5\] at dim 0: expected 4 \(hard labels without "
                 r"the class axis have X's other dims\)"),
    ([4], True, r"Label 'lbl' \[4\] must have the same rank as X 'px' \[4, 5\]"),
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
    # Checked at run time only, on the fed tensor: Fluid 1.x programs declare float labels and feed int64.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="px", shape=[4, 5], dtype="float32", append_batch_size=False)
        lbl = fluid.layers.data(name="lbl", shape=[4, 1], dtype="int32", append_batch_size=False)
        out = fluid.layers.cross_entropy(x, lbl)
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.full((4, 5), 0.2, "float32")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"cross_entropy: hard Label 'lbl' must be int64, got int32"):
        exe.run(main, feed={"px": xv, "lbl": np.zeros((4, 1), "int32")}, fetch_list=[out])
    r, = exe.run(main, feed={"px": xv, "lbl": np.zeros((4, 1), "int64")}, fetch_list=[out])
    np.testing.assert_allclose(r, np.full((4, 1), -np.log(0.2)), rtol=1e-6)


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


def test_softmax_with_cross_entropy_label_out_of_range_at_run_time():
    _run_time_label_check(fluid.layers.softmax_with_cross_entropy, "softmax_with_cross_entropy",
                          "logits", (4, 5))


def swce_reference(logits, label, soft, axis=-1, ignore_index=-100):
    sm = np_softmax(logits, axis)
    logp = np_log_softmax(logits, axis)
    if soft:
        loss = -(label * logp).sum(axis=axis, keepdims=True)
    else:
        safe = np.where(label == ignore_index, 0, label)
        loss = -np.take_along_axis(logp, safe, axis=axis)
        loss = np.where(label == ignore_index, 0.0, loss)
    return sm, loss


@pytest.mark.parametrize("shape,axis", [((4, 5), -1), ((1, 3), -1), ((2, 3, 4), -1), ((2, 3, 4), 1), ((3, 2, 2), 0)])
@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_with_cross_entropy_forward(shape, axis, soft, dtype):
    rng = np.random.RandomState(9)
    logits = rng.uniform(-5, 5, shape)
    label = np_softmax(rng.uniform(-1, 1, shape), axis) if soft else hard_labels(rng, shape, shape[axis], axis)
    sm, loss = swce_reference(logits, label, soft, axis)
    if soft:
        label = label.astype(dtype)
    OpTest("softmax_with_cross_entropy", {"Logits": logits.astype(dtype), "Label": label},
           {"Softmax": sm.astype(dtype), "Loss": loss.astype(dtype)},
           {"soft_label": soft, "axis": axis}).check_output(rtol=1e-5 if dtype == "float32" else 1e-10)


def test_softmax_with_cross_entropy_large_logits_and_ignore_index():
    logits = np.array([[1000.0, -1000.0, 0.0], [50.0, 51.0, 52.0], [1e4, 1e4, -1e4]], dtype="float32")
    label = np.array([[1], [5], [0]], dtype="int64")
    sm, loss = swce_reference(logits.astype("float64"), label, False, ignore_index=5)
    OpTest("softmax_with_cross_entropy", {"Logits": logits, "Label": label},
           {"Softmax": sm.astype("float32"), "Loss": loss.astype("float32")}, {"ignore_index": 5}).check_output()
    assert loss[0, 0] == pytest.approx(2000.0)  # finite, where -log(softmax) would be inf


@pytest.mark.parametrize("shape,axis,soft", [((4, 5), -1, False), ((4, 5), -1, True), ((2, 3, 2), 1, False),
                                             ((2, 3, 2), 1, True)])
def test_softmax_with_cross_entropy_grad(shape, axis, soft):
    rng = np.random.RandomState(10)
    logits = rng.uniform(-2, 2, shape)
    label = np_softmax(rng.uniform(-1, 1, shape), axis) if soft else hard_labels(rng, shape, shape[axis], axis)
    sm, loss = swce_reference(logits, label, soft, axis)
    OpTest("softmax_with_cross_entropy", {"Logits": logits, "Label": label}, {"Softmax": sm, "Loss": loss},
           {"soft_label": soft, "axis": axis}).check_grad(["Logits"], "Loss")


def test_softmax_with_cross_entropy_grad_ignore_index_and_minimal_inputs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        logits = fluid.layers.data(name="logits", shape=[3], dtype="float64")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        logits.stop_gradient = False
        loss = fluid.layers.reduce_sum(fluid.layers.softmax_with_cross_entropy(logits, label, ignore_index=2))
        g, = fluid.gradients([loss], [logits])
    grad_op = [op for op in main.global_block().ops if op.type == "softmax_with_cross_entropy_grad"][0]
    assert sorted(grad_op.input_names) == ["Label", "Loss@GRAD", "Softmax"]
    assert grad_op.output_names == ["Logits@GRAD"]
    xv = np.random.RandomState(11).uniform(-1, 1, (4, 3))
    lv = np.array([[0], [2], [1], [2]], dtype="int64")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"logits": xv, "label": lv}, fetch_list=[g])
    want = np_softmax(xv)
    want[np.arange(4), lv[:, 0]] -= 1
    want[lv[:, 0] == 2] = 0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_softmax_with_cross_entropy_label_shape_mismatch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="lg", shape=[2, 3, 4], dtype="float32", append_batch_size=False)
        lbl = fluid.layers.data(name="lb", shape=[2, 3, 1], dtype="int64", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"softmax_with_cross_entropy: Label 'lb' \[2, 3, 1\] does "
                                                           r"not match Logits 'lg' \[2, 3, 4\] at dim 1: expected 1"):
            fluid.layers.softmax_with_cross_entropy(x, lbl, axis=1)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"axis=3 is out of range for Logits 'lg'"):
            fluid.layers.softmax_with_cross_entropy(x, lbl, axis=3)


@pytest.fixture
def two_threads():
    """The thread pool at two threads (the kernels split rows over it), restored afterwards."""
    saved = fluid.core.get_num_threads()
    fluid.core.set_num_threads(2)
    yield
    fluid.core.set_num_threads(saved)


def _swce_program(rows, classes, soft):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        logits = fluid.layers.data(name="logits", shape=[classes], dtype="float32")
        logits.stop_gradient = False
        label = fluid.layers.data(name="label", shape=[classes if soft else 1], dtype="float32" if soft else "int64")
        loss = fluid.layers.softmax_with_cross_entropy(logits, label, soft_label=soft)
        weights = fluid.layers.data(name="w", shape=[1], dtype="float32")  # d(total)/d(loss) per row
        g, = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.elementwise_mul(loss, weights))], [logits])
    return main, loss, g


@pytest.mark.parametrize("soft", [False, True])
def test_softmax_with_cross_entropy_rows_split_over_threads(soft, two_threads):
    # 300 x 700: rows split over two threads in the forward and the gradient kernel; row by row in numpy
    rows, classes = 300, 700
    rng = np.random.RandomState(12)
    x = rng.uniform(-4, 4, (rows, classes)).astype("float32")
    label = np_softmax(rng.uniform(-1, 1, (rows, classes))).astype("float32") if soft else \
        rng.randint(0, classes, (rows, 1)).astype("int64")
    w = rng.uniform(0.5, 2, (rows, 1)).astype("float32")
    main, loss, g = _swce_program(rows, classes, soft)
    got_loss, got_g = fluid.Executor(fluid.CPUPlace()).run(main, feed={"logits": x, "label": label, "w": w},
                                                           fetch_list=[loss, g])
    for r in range(rows):
        xr = x[r].astype("float64")
        p = np.exp(xr - xr.max())
        p /= p.sum()
        target = label[r].astype("float64") if soft else np.eye(classes)[label[r, 0]]
        np.testing.assert_allclose(got_loss[r, 0], -(target * np.log(p)).sum(), rtol=2e-5, atol=1e-5)
        np.testing.assert_allclose(got_g[r], (p - target) * w[r, 0], rtol=1e-4, atol=1e-6)


def test_softmax_with_cross_entropy_bad_label_in_a_later_rows_part(two_threads):
    # the out-of-range label lies in the rows the second thread takes: the error still names it
    rows, classes = 300, 700
    x = np.zeros((rows, classes), "float32")
    label = np.zeros((rows, 1), "int64")
    label[290, 0] = classes
    main, loss, g = _swce_program(rows, classes, False)
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(fluid.core.EnforceNotMet, match=r"softmax_with_cross_entropy: Label 'label' holds 700 at "
                                                       r"position 290, out of range \[0, 700\)"):
        exe.run(main, feed={"logits": x, "label": label, "w": np.ones((rows, 1), "float32")}, fetch_list=[loss])
    label[290, 0] = 3  # the executor still works afterwards
    got, = exe.run(main, feed={"logits": x, "label": label, "w": np.ones((rows, 1), "float32")}, fetch_list=[loss])
    np.testing.assert_allclose(got, np.full((rows, 1), np.log(classes)), rtol=1e-5)
