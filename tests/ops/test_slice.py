"""slice: forward against numpy, gradients, the layer, errors at build time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run

rng = np.random.RandomState(5)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


def slice_ref(x, axes, starts, ends, decrease_axis=()):
    idx = [np.s_[:]] * x.ndim
    for a, s, e in zip(axes, starts, ends):
        idx[a] = np.s_[s:e]  # Python slicing clamps exactly like Fluid (for non-empty results)
    out = x[tuple(idx)]
    if decrease_axis:
        out = out.squeeze(axis=tuple(decrease_axis))
        if out.ndim == 0:
            out = out.reshape(1)
    return out


SLICE_CASES = [
    ((3, 4, 5), [0, 2], [1, -3], [3, 100], []),
    ((3, 4, 5), [1], [-10], [2], []),
    ((3, 4, 5), [2], [0], [-1], []),
    ((3, 4, 5), [0, 1, 2], [0, 1, 4], [3, -1, 5], [2]),
    ((6,), [0], [2], [3], [0]),
    ((2, 5), [0, 1], [1, 3], [2, 4], [0, 1]),
    ((4, 1, 3), [1], [0], [1], []),
    ((5, 6), [1], [-2], [1000], []),
    ((2, 3, 4, 5), [3, 1], [1, 0], [4, 2], [])
]


@pytest.mark.parametrize("shape,axes,starts,ends,decrease", SLICE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_slice_forward(shape, axes, starts, ends, decrease, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    OpTest("slice", {"Input": x}, {"Out": slice_ref(x, axes, starts, ends, decrease)},
           {"axes": axes, "starts": starts, "ends": ends, "decrease_axis": decrease}).check_output()


@pytest.mark.parametrize("shape,axes,starts,ends,decrease", SLICE_CASES)
def test_slice_grad(shape, axes, starts, ends, decrease):
    x = rand(*shape)
    OpTest("slice", {"Input": x}, {"Out": slice_ref(x, axes, starts, ends, decrease)},
           {"axes": axes, "starts": starts, "ends": ends, "decrease_axis": decrease}).check_grad(["Input"], "Out")


def test_slice_layer_unknown_batch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[8], dtype="float32")
        y = fluid.layers.slice(x, axes=[1], starts=[2], ends=[6])
        assert y.shape == (-1, 4)
        z = fluid.layers.slice(x, axes=[0], starts=[0], ends=[1])
        assert z.shape == (-1, 8)
    xv = rand(3, 8, dtype="float32")
    got_y, got_z = run(main, {"x": xv}, [y, z])
    np.testing.assert_array_equal(got_y, xv[:, 2:6])
    np.testing.assert_array_equal(got_z, xv[:1])


def test_slice_errors():
    block = fluid.Program().global_block()
    x = declare(block, "x", [3, 4])
    out = declare(block, "out", None)
    cases = [
        ({"axes": [2], "starts": [0], "ends": [1]}, r"slice: axis 2 is out of range \[-2, 2\) for Input 'x' \[3, 4\]"),
        ({"axes": [0, 1], "starts": [0], "ends": [1, 2]}, r"slice: axes \[0, 1\], starts \[0\] and ends \[1, 2\] must "
                                                          r"have the same length"),
        ({"axes": [1], "starts": [3], "ends": [2]}, r"slice: Input 'x' \[3, 4\] axis 1 with start 3 and end 2 selects "
                                                    r"nothing"),
        ({"axes": [0], "starts": [5], "ends": [9]}, r"selects nothing \(clamped to \[3, 3\)\)"),
        ({"axes": [0, 0], "starts": [0, 0], "ends": [1, 1]}, r"slice: axes \[0, 0\] names axis 0 twice"),
        ({"axes": [1], "starts": [0], "ends": [2], "decrease_axis": [1]},
         r"slice: decrease_axis \[1\] drops axis 1 of Input 'x' \[3, 4\] but the slice has size 2 there"),
    ]
    for attrs, msg in cases:
        with pytest.raises(fluid.core.EnforceNotMet, match=msg):
            block.append_op(type="slice", inputs={"Input": [x]}, outputs={"Out": [out]}, attrs=attrs)
