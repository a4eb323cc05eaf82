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


# ------------------------------------------------------------------ bounds read at run time (Fluid 1.8's tensor inputs)

TENSOR_CASES = [  # (shape, axes, starts, ends, decrease_axis)
    ((3, 4, 5), [0, 2], [1, -3], [3, 100], []),
    ((3, 4, 5), [1], [2], [3], [1]),
    ((6, 2), [0], [-1], [10000000], [0]),
]


@pytest.mark.parametrize("shape,axes,starts,ends,decrease", TENSOR_CASES)
@pytest.mark.parametrize("how", ["tensor", "list"])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_slice_bounds_from_tensors(shape, axes, starts, ends, decrease, how, index_dtype):
    x = rand(*shape)
    if how == "tensor":
        inputs = {"Input": x, "StartsTensor": np.array(starts, index_dtype), "EndsTensor": np.array(ends, index_dtype)}
    else:  # starts from one tensor per axis, ends from the attribute
        inputs = {"Input": x,
                  "StartsTensorList": [("s%d" % i, np.array([v], index_dtype)) for i, v in enumerate(starts)]}
    attrs = {"axes": axes, "starts": [-1] * len(axes), "ends": ends if how == "list" else [-1] * len(axes),
             "infer_flags": [-1] * len(axes), "decrease_axis": decrease}
    t = OpTest("slice", inputs, {"Out": slice_ref(x, axes, starts, ends, decrease)}, attrs)
    t.check_output()
    t.check_grad(["Input"], "Out")


def test_slice_layer_with_variable_bounds():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", shape=[4, 6], dtype="float32")
        i = fluid.data("i", shape=[1], dtype="int64")
        se = fluid.data("se", shape=[2], dtype="int32")
        rows = fluid.layers.slice(x, axes=[0, 1], starts=[i, 1], ends=[i + 2, 4])
        both = fluid.layers.slice(x, axes=[0, 1], starts=se, ends=[4, 6])
        assert rows.shape == (-1, 3)  # axis 0's bounds come at run time, axis 1's are known
        assert both.shape == (-1, -1)
        op = main.global_block().ops[-1]
        assert op.attr("infer_flags") == [-1, -1] and op.input("StartsTensor") == ["se"]
    xv = rand(4, 6, dtype="float32")
    got_rows, got_both = run(main, {"x": xv, "i": np.array([1], "int64"), "se": np.array([2, 3], "int32")},
                             [rows, both])
    np.testing.assert_array_equal(got_rows, xv[1:3, 1:4])
    np.testing.assert_array_equal(got_both, xv[2:4, 3:6])


def test_slice_tensor_bound_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", shape=[4, 6], dtype="float32")
        two = fluid.data("two", shape=[2], dtype="int64")
        out = fluid.layers.slice(x, axes=[0], starts=[two], ends=[3])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"slice: StartsTensorList has 1 tensors for 2 axes"):
            fluid.layers.slice(x, axes=[0, 1], starts=[two], ends=[3, 4])
        with pytest.raises(TypeError, match=r"slice: 'ends' must be a list or tuple \(of ints or Variables\) or a "
                                            r"Variable, got int"):
            fluid.layers.slice(x, axes=[0], starts=[0], ends=3)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"slice: StartsTensorList 'two' must have 1 element, got \[2\]"):
        run(main, {"x": rand(4, 6, dtype="float32"), "two": np.array([0, 1], "int64")}, [out])


def test_variable_getitem():
    """Fluid 1.8's Variable.__getitem__: ints (dim dropped), negative ints, int Variables, slices, ::-1, tuples."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", shape=[None, 4, 5], dtype="float32")
        t = fluid.data("t", shape=[1], dtype="int64")
        shape = fluid.layers.shape(x)
        views = [x[1], x[-1], x[:, 2], x[0, 1:3, -2:], x[:, ::-1], x[t], x[1:, t], shape[0], shape[-1], x[:]]
        assert x[:] is x
        assert x[1].shape == (4, 5) and x[:, 2].shape == (-1, 5) and x[0, 1:3, -2:].shape == (2, 2)
        assert x[t].shape == (4, 5) and x[1:, t].shape == (-1, 5) and shape[0].shape == (1,)
        with pytest.raises(TypeError, match=r"a slice step other than 1 \(or ::-1 alone\) is not supported"):
            x[::2]
        with pytest.raises(TypeError, match=r"an index must be an int, an int Variable or a slice, got str"):
            x["a"]
        with pytest.raises(TypeError, match="not iterable"):
            iter(x)
    xv = rand(3, 4, 5, dtype="float32")
    got = run(main, {"x": xv, "t": np.array([2], "int64")}, views[:-1])
    want = [xv[1], xv[-1], xv[:, 2], xv[0, 1:3, -2:], xv[:, ::-1], xv[2], xv[1:, 2], np.array([3]), np.array([5])]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
