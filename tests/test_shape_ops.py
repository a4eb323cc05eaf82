"""concat, split, reshape2, transpose2: forward against numpy, gradients, shape errors at build time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(11)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


def declare(block, name, shape, dtype="float32"):
    return block.create_var(name=name, shape=shape, dtype=dtype)


# ------------------------------------------------------------------ concat

CONCAT_CASES = [
    ([(2, 3), (4, 3)], 0),
    ([(2, 3), (2, 1), (2, 5)], 1),
    ([(2, 3), (2, 4)], -1),
    ([(2, 3, 4), (2, 1, 4), (2, 2, 4)], -2),
    ([(1, 2, 3, 2), (3, 2, 3, 2)], 0),
    ([(3, 2)], 0),
]


@pytest.mark.parametrize("shapes,axis", CONCAT_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_concat_forward(shapes, axis, dtype):
    xs = [("x%d" % i, (rand(*s) * 10).astype(dtype)) for i, s in enumerate(shapes)]
    OpTest("concat", {"X": xs}, {"Out": np.concatenate([a for _, a in xs], axis)}, {"axis": axis}).check_output()


@pytest.mark.parametrize("shapes,axis", CONCAT_CASES)
def test_concat_grad(shapes, axis):
    xs = [("x%d" % i, rand(*s)) for i, s in enumerate(shapes)]
    t = OpTest("concat", {"X": xs}, {"Out": np.concatenate([a for _, a in xs], axis)}, {"axis": axis})
    t.check_grad(["X"], "Out")


def test_concat_grad_of_some_inputs_only():
    # Only x1 needs a gradient: concat_grad gets X@GRAD = [@EMPTY@, x1@GRAD].
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data("a", shape=[2, 3], dtype="float64", append_batch_size=False)
        b = fluid.layers.data("b", shape=[2, 4], dtype="float64", append_batch_size=False)
        b.stop_gradient = False
        out = fluid.layers.concat([a, b], axis=1)
        loss = fluid.layers.mean(out)
        gb, = fluid.gradients([loss], [b])
    grad_op = [op for op in main.global_block().ops if op.type == "concat_grad"][0]
    assert grad_op.output("X@GRAD")[0] == "@EMPTY@"
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"a": rand(2, 3), "b": rand(2, 4)}, fetch_list=[gb])
    np.testing.assert_allclose(got, np.full((2, 4), 1.0 / 14))


def test_concat_layer_unknown_batch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data("a", shape=[3], dtype="float32")
        b = fluid.layers.data("b", shape=[5], dtype="float32")
        assert fluid.layers.concat([a, b], axis=1).shape == (-1, 8)
        assert fluid.layers.concat([a, a], axis=0).shape == (-1, 3)


def test_concat_errors():
    block = fluid.Program().global_block()
    a, b, c = declare(block, "a", [2, 3]), declare(block, "b", [3, 3]), declare(block, "c", [2, 3, 1])
    out = declare(block, "out", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"concat: X 'a' \[2, 3\] and X 'b' \[3, 3\] differ in dim 0"):
        block.append_op(type="concat", inputs={"X": [a, b]}, outputs={"Out": [out]}, attrs={"axis": 1})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"concat: X 'a' \[2, 3\] and X 'c' \[2, 3, 1\] have different "
                                                       r"ranks"):
        block.append_op(type="concat", inputs={"X": [a, c]}, outputs={"Out": [out]}, attrs={"axis": 0})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"concat: axis 2 is out of range \[-2, 2\) for X 'a' \[2, 3\]"):
        block.append_op(type="concat", inputs={"X": [a, a]}, outputs={"Out": [out]}, attrs={"axis": 2})


# ------------------------------------------------------------------ split

SPLIT_CASES = [
    # shape, num, sections, axis
    ((4, 6), 2, [], 0),
    ((4, 6), 3, [], 1),
    ((4, 6), 3, [], -1),
    ((2, 6, 3), 0, [1, 2, 3], 1),
    ((2, 6, 3), 0, [4, -1], -2),
    ((3, 2, 5), 0, [2, 0, 3], 2),
    ((5, 2), 1, [], 0),
]


def split_ref(x, num, sections, axis):
    if num:
        return np.split(x, num, axis)
    sizes = list(sections)
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    return np.split(x, np.cumsum(sizes)[:-1], axis)


def split_test(x, num, sections, axis):
    parts = split_ref(x, num, sections, axis)
    return OpTest("split", {"X": x}, {"Out": [("o%d" % i, p) for i, p in enumerate(parts)]},
                  {"num": num, "sections": sections, "axis": axis})


@pytest.mark.parametrize("shape,num,sections,axis", SPLIT_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_split_forward(shape, num, sections, axis, dtype):
    split_test((rand(*shape) * 10).astype(dtype), num, sections, axis).check_output()


@pytest.mark.parametrize("shape,num,sections,axis", SPLIT_CASES)
def test_split_grad(shape, num, sections, axis):
    split_test(rand(*shape), num, sections, axis).check_grad(["X"], "Out")


def test_split_grad_with_unused_outputs_is_zero_there():
    # Only the middle part reaches the loss: the other parts' gradients are missing and count as zeros.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[2, 6], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        parts = fluid.layers.split(x, 3, dim=1)
        loss = fluid.layers.mean(parts[1])
        gx, = fluid.gradients([loss], [x])
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": rand(2, 6)}, fetch_list=[gx])
    expect = np.zeros((2, 6))
    expect[:, 2:4] = 1.0 / 4
    np.testing.assert_allclose(got, expect)


def test_split_layer_shapes():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[6, 4], dtype="float32")  # [-1, 6, 4]
        assert [p.shape for p in fluid.layers.split(x, [1, -1, 2], dim=1)] == [(-1, 1, 4), (-1, 3, 4), (-1, 2, 4)]
        assert [p.shape for p in fluid.layers.split(x, 2, dim=-1)] == [(-1, 6, 2)] * 2
        assert [p.shape for p in fluid.layers.split(x, 2, dim=0)] == [(-1, 6, 4)] * 2


def test_split_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[5, 4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"split: X 'x' \[5, 4\] dim 5 at axis 0 is not divisible "
                                                           r"by num=2"):
            fluid.layers.split(x, 2, dim=0)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"split: sections \[2, 2\] sum to 4 but X 'x' \[5, 4\] has "
                                                           r"5 at axis 0"):
            fluid.layers.split(x, [2, 2], dim=0)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"split: axis 2 is out of range \[-2, 2\) for X 'x'"):
            fluid.layers.split(x, 2, dim=2)


# ------------------------------------------------------------------ reshape2

RESHAPE_CASES = [
    ((2, 3, 4), [6, 4]),
    ((2, 3, 4), [0, -1]),
    ((2, 3, 4), [-1, 0, 2]),
    ((2, 3, 4), [4, 0, 2]),
    ((6,), [1, 2, 1, 3]),
    ((2, 1, 3), [-1]),
    ((1,), [1, 1]),
]


def reshape_ref(x, shape):
    return x.reshape([x.shape[i] if s == 0 else s for i, s in enumerate(shape)])


@pytest.mark.parametrize("shape,new", RESHAPE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_reshape_forward(shape, new, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    OpTest("reshape2", {"X": x}, {"Out": reshape_ref(x, new), "XShape": None}, {"shape": new}).check_output()


@pytest.mark.parametrize("shape,new", RESHAPE_CASES)
def test_reshape_grad(shape, new):
    x = rand(*shape)
    OpTest("reshape2", {"X": x}, {"Out": reshape_ref(x, new), "XShape": None}, {"shape": new}).check_grad(["X"], "Out")


def test_reshape_shares_buffer_and_records_xshape():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")
        out = fluid.layers.reshape(x, [0, -1])
        xshape = main.global_block().var(main.global_block().ops[-1].output("XShape")[0])
        assert out.shape == (-1, 12)
        assert xshape.shape == (0, -1, 3, 4)
    for v in (x, out, xshape):  # persistable vars live in the scope after the run
        v.persistable = True
    scope = fluid.Scope()
    xv = rand(2, 3, 4, dtype="float32")
    with fluid.scope_guard(scope):
        got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[out])
    np.testing.assert_array_equal(got, xv.reshape(2, 12))
    xa = scope.find_var("x").get_tensor()._share_numpy()
    oa = scope.find_var(out.name).get_tensor()._share_numpy()
    assert oa.shape == (2, 12)
    assert oa.__array_interface__["data"][0] == xa.__array_interface__["data"][0]  # no copy
    xs = scope.find_var(xshape.name).get_tensor()
    assert xs.shape() == [0, 2, 3, 4] and not xs._is_initialized()


def test_reshape_compile_time_shapes():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")  # [-1, 3, 4]
        assert fluid.layers.reshape(x, [0, 12]).shape == (-1, 12)
        assert fluid.layers.reshape(x, [0, -1, 2]).shape == (-1, 6, 2)
        assert fluid.layers.reshape(x, [-1, 4]).shape == (-1, 4)  # batch unknown: stays -1
        assert fluid.layers.reshape(x, [6, -1]).shape == (6, -1)


def test_reshape_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3, 4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reshape2: cannot reshape X 'x' \[2, 3, 4\] \(24 elements\) "
                                                           r"to \[5, 5\] \(25 elements\)"):
            fluid.layers.reshape(x, [5, 5])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reshape2: cannot reshape X 'x' \[2, 3, 4\] to \[-1, 5\]: "
                                                           r"24 elements are not divisible by 5"):
            fluid.layers.reshape(x, [-1, 5])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reshape2: shape \[-1, -1\] has more than one -1"):
            fluid.layers.reshape(x, [-1, -1])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reshape2: shape \[0, 0, 0, 0\] copies dim 3 \(0\) but X "
                                                           r"'x' \[2, 3, 4\] has rank 3"):
            fluid.layers.reshape(x, [0, 0, 0, 0])


# ------------------------------------------------------------------ transpose2

TRANSPOSE_CASES = [
    ((3, 5), [1, 0]),
    ((70, 33), [1, 0]),            # several 32x32 tiles with ragged edges
    ((130, 67), [1, 0]),           # 8x8 register blocks across 64x64 tiles, ragged rows and columns
    ((16, 8), [1, 0]),             # whole 8x8 blocks only
    ((3, 16, 9, 7), [0, 2, 3, 1]),  # NCHW -> NHWC with 16 channels (conv2d's transposes)
    ((2, 3, 4), [0, 2, 1]),
    ((2, 3, 4), [2, 0, 1]),
    ((2, 3, 4), [1, 0, 2]),        # last axis stays: contiguous rows move
    ((2, 3, 4), [0, 1, 2]),        # identity
    ((2, 3, 4, 5), [0, 2, 3, 1]),  # NCHW -> NHWC
    ((2, 3, 4, 5), [0, 3, 1, 2]),  # NHWC -> NCHW
    ((2, 3, 4, 5), [3, 2, 1, 0]),
    ((2, 1, 4, 1), [3, 2, 0, 1]),  # size-1 dims
    ((1, 1), [1, 0]),
]


@pytest.mark.parametrize("shape,perm", TRANSPOSE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_transpose_forward(shape, perm, dtype):
    x = (rand(*shape) * 100).astype(dtype)
    OpTest("transpose2", {"X": x}, {"Out": x.transpose(perm), "XShape": None}, {"axis": perm}).check_output()


@pytest.mark.parametrize("shape,perm", [c for c in TRANSPOSE_CASES if np.prod(c[0]) <= 200])
def test_transpose_grad(shape, perm):
    x = rand(*shape)
    OpTest("transpose2", {"X": x}, {"Out": x.transpose(perm), "XShape": None}, {"axis": perm}).check_grad(["X"], "Out")


def test_transpose_large_2d_and_batched():
    x = rand(257, 129, dtype="float32")
    OpTest("transpose2", {"X": x}, {"Out": x.T, "XShape": None}, {"axis": [1, 0]}).check_output()
    y = rand(3, 65, 40, 7, dtype="float32")
    OpTest("transpose2", {"X": y}, {"Out": y.transpose(0, 2, 1, 3), "XShape": None},
           {"axis": [0, 2, 1, 3]}).check_output()
    OpTest("transpose2", {"X": y}, {"Out": y.transpose(3, 1, 0, 2), "XShape": None},
           {"axis": [3, 1, 0, 2]}).check_output()


def test_transpose_layer_shape():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")
        assert fluid.layers.transpose(x, [2, 0, 1]).shape == (4, -1, 3)


def test_transpose_bad_permutation():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3, 4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"transpose2: X 'x' \[2, 3, 4\]: axis \[0, 0, 1\] is not a "
                                                           r"permutation of \[0, 3\)"):
            fluid.layers.transpose(x, [0, 0, 1])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"transpose2: X 'x' \[2, 3, 4\]: axis \[1, 0\] has 2 "
                                                           r"entries, expected one per dim \(3\)"):
            fluid.layers.transpose(x, [1, 0])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"not a permutation"):
            fluid.layers.transpose(x, [0, 1, 3])
