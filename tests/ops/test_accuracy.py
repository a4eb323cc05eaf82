"""accuracy: exact results through the layer and the op, label shape errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def np_topk(x, k):
    # stable argsort of -x: descending values, lower index first among ties
    idx = np.argsort(-x, axis=-1, kind="stable")[..., :k].astype("int64")
    return np.take_along_axis(x, idx, axis=-1), idx


@pytest.mark.parametrize("k", [1, 2, 3])
def test_accuracy_layer(k):
    rng = np.random.RandomState(1)
    n, c = 16, 5
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[c], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        correct = fluid.layers.create_tensor(dtype="int32")
        total = fluid.layers.create_tensor(dtype="int32")
        acc = fluid.layers.accuracy(x, label, k=k, correct=correct, total=total)
    assert acc.shape == (1,)
    xv = rng.rand(n, c).astype("float32")
    lv = rng.randint(0, c, (n, 1)).astype("int64")
    a, cr, t = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "label": lv}, fetch_list=[acc, correct, total])
    _, idx = np_topk(xv, k)
    hits = int((idx == lv).any(axis=1).sum())
    assert a.dtype == np.float32 and cr.dtype == np.int32 and t.dtype == np.int32
    np.testing.assert_array_equal(cr, [hits])
    np.testing.assert_array_equal(t, [n])
    np.testing.assert_array_equal(a, np.array([hits / n], dtype="float32"))


def test_accuracy_op_direct():
    idx = np.array([[0, 1], [2, 0], [1, 2], [3, 3]], dtype="int64")
    out = np.zeros((4, 2), dtype="float64")
    label = np.array([[1], [1], [2], [3]], dtype="int64")
    OpTest("accuracy", {"Out": out, "Indices": idx, "Label": label},
           {"Accuracy": np.array([0.75], dtype="float32"), "Correct": np.array([3], dtype="int32"),
            "Total": np.array([4], dtype="int32")}).check_output()


@pytest.mark.parametrize("lshape,msg", [
    ([4, 2], r"accuracy: Label 'label' \[4, 2\] must be \[N, 1\]"),
    ([3, 1], r"accuracy: Label 'label' \[3, 1\] and Indices '.*' \[4, 2\] have different numbers of rows"),
])
def test_accuracy_label_shape_mismatch(lshape, msg):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4, 5], dtype="float32", append_batch_size=False)
        label = fluid.layers.data(name="label", shape=lshape, dtype="int64", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=msg):
            fluid.layers.accuracy(x, label, k=2)
