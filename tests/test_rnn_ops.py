"""Ops for the RNN models: lookup_table (embedding), slice, gather, stack/unstack, squeeze2/unsqueeze2 and
lstm_unit: forward against numpy, gradients against central differences, errors at build and run time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(5)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


def declare(block, name, shape, dtype="float32"):
    return block.create_var(name=name, shape=shape, dtype=dtype)


def run(main, feed, fetch, startup=None):
    exe = fluid.Executor(fluid.CPUPlace())
    if startup is not None:
        exe.run(startup)
    return exe.run(main, feed=feed, fetch_list=fetch)


# ------------------------------------------------------------------ lookup_table

def lookup_ref(w, ids, padding_idx=-1):
    out = w[ids[..., 0]]
    if padding_idx != -1:
        out[ids[..., 0] == padding_idx] = 0
    return out


@pytest.mark.parametrize("ids_shape", [(6, 1), (4, 3, 1), (1, 1), (2, 2, 2, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("padding_idx", [-1, 0, 3])
def test_lookup_table_forward(ids_shape, dtype, padding_idx):
    w = rand(7, 5, dtype=dtype)
    ids = rng.randint(0, 7, ids_shape).astype("int64")
    ids.reshape(-1)[0] = 3  # make sure a padding row occurs
    t = OpTest("lookup_table", {"W": w, "Ids": ids}, {"Out": lookup_ref(w, ids, padding_idx)},
               {"padding_idx": padding_idx})
    t.check_output()


@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_lookup_table_grad(padding_idx):
    w = rand(5, 3)
    ids = np.array([[0], [2], [2], [4], [1], [2]], dtype="int64")
    OpTest("lookup_table", {"W": w, "Ids": ids}, {"Out": lookup_ref(w, ids, padding_idx)},
           {"padding_idx": padding_idx}).check_grad(["W"], "Out")


def test_embedding_layer_padding_rows_zero_and_no_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", shape=[3, 1], dtype="int64", append_batch_size=False)
        emb = fluid.layers.embedding(ids, size=[6, 4], padding_idx=-1, dtype="float64")  # -1 -> row 5
        assert emb.shape == (3, 4)
        op = [o for o in main.global_block().ops if o.type == "lookup_table"][0]
        assert op.attr("padding_idx") == 5
        w = main.global_block().var("embedding_0.w_0")
        assert tuple(w.shape) == (6, 4)
        loss = fluid.layers.reduce_sum(emb)
        gw, = fluid.gradients([loss], [w])
    out, g, wv = run(main, {"ids": np.array([[1], [5], [1]], "int64")}, [emb, gw, w], startup)
    np.testing.assert_array_equal(out[1], 0)
    np.testing.assert_allclose(out[0], wv[1])
    want = np.zeros((6, 4))
    want[1] = 2  # row 1 used twice, row 5 is padding
    np.testing.assert_array_equal(g, want)


def test_embedding_layer_defaults():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = fluid.layers.data("words", shape=[20, 32, 1], dtype="int64", append_batch_size=False)
        emb = fluid.layers.embedding(input=words, size=[100, 8])
        assert emb.shape == (20, 32, 8) and emb.dtype == fluid.core.VarDesc.VarType.FP32
        op = main.global_block().ops[-1]
        assert op.attr("padding_idx") == -1 and op.attr("is_sparse") is False
        data = fluid.layers.data("d", shape=[1], dtype="int64")
        assert fluid.layers.embedding(data, size=[10, 3]).shape == (-1, 3)
    # The Xavier-initialised table is not all zeros.
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    w = np.array(fluid.global_scope().find_var("embedding_0.w_0").get_tensor())
    assert w.shape == (100, 8) and np.abs(w).max() > 0 and np.abs(w).max() <= np.sqrt(6.0 / 108) + 1e-6


def test_lookup_table_ids_out_of_range_at_run_time():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[10, 4])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for bad, pos in ((10, 2), (-1, 0)):
        feed = np.array([[1], [2], [3]], "int64")
        feed[pos] = bad
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"lookup_table: Ids 'ids' has value %d at position %d, out of range \[0, 10\) of "
                                 r"W 'embedding_0.w_0' \[10, 4\]" % (bad, pos)):
            exe.run(main, feed={"ids": feed}, fetch_list=[emb])
    out, = exe.run(main, feed={"ids": np.array([[9], [0]], "int64")}, fetch_list=[emb])  # still works
    assert out.shape == (2, 4)


def test_lookup_table_build_errors():
    block = fluid.Program().global_block()
    w = declare(block, "w", [10, 4])
    out = declare(block, "out", None)
    cases = [
        (declare(block, "ids2", [3, 2], "int64"), {}, r"lookup_table: Ids 'ids2' \[3, 2\] must have last dim 1"),
        (declare(block, "ids32", [3, 1], "int32"), {}, r"lookup_table: Ids 'ids32' \[3, 1\] must be int64, got int32"),
        (declare(block, "ids", [3, 1], "int64"), {"padding_idx": 10},
         r"lookup_table: padding_idx 10 is out of range \[0, 10\) of W 'w' \[10, 4\]"),
    ]
    for ids, attrs, msg in cases:
        with pytest.raises(fluid.core.EnforceNotMet, match=msg):
            block.append_op(type="lookup_table", inputs={"W": [w], "Ids": [ids]}, outputs={"Out": [out]}, attrs=attrs)
    w3 = declare(block, "w3", [10, 4, 1])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lookup_table: W 'w3' \[10, 4, 1\] must have rank 2"):
        block.append_op(type="lookup_table", inputs={"W": [w3], "Ids": [cases[2][0]]}, outputs={"Out": [out]})


# ------------------------------------------------------------------ slice

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


# ------------------------------------------------------------------ gather

GATHER_CASES = [((5,), [0, 4, 4, 2]), ((5, 3), [1, 0, 1, 4, 3, 1]), ((4, 2, 3), [3, 0]), ((1, 7), [0, 0, 0])]


@pytest.mark.parametrize("shape,index", GATHER_CASES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_gather_forward(shape, index, index_dtype, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    idx = np.array(index, dtype=index_dtype)
    OpTest("gather", {"X": x, "Index": idx}, {"Out": x[idx]}).check_output()


def test_gather_index_n_by_1():
    x = rand(5, 3)
    idx = np.array([[2], [0], [2]], dtype="int64")
    OpTest("gather", {"X": x, "Index": idx}, {"Out": x[idx[:, 0]]}).check_output()


@pytest.mark.parametrize("shape,index", GATHER_CASES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_gather_grad(shape, index, index_dtype):
    x = rand(*shape)
    idx = np.array(index, dtype=index_dtype)
    OpTest("gather", {"X": x, "Index": idx}, {"Out": x[idx]}).check_grad(["X"], "Out")


def test_gather_grad_accumulates_repeated_rows():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[4, 2], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        idx = fluid.layers.data("idx", shape=[5], dtype="int32", append_batch_size=False)
        out = fluid.layers.gather(x, idx)
        assert out.shape == (5, 2)
        gx, = fluid.gradients([fluid.layers.reduce_sum(out)], [x])
    g, = run(main, {"x": rand(4, 2), "idx": np.array([3, 3, 0, 3, 1], "int32")}, [gx])
    np.testing.assert_array_equal(g, [[1, 1], [1, 1], [0, 0], [3, 3]])


def test_gather_errors():
    main = fluid.Program()
    block = main.global_block()
    x = declare(block, "x", [4, 3])
    out = declare(block, "out", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather: Index 'fi' \[2\] must be int32 or int64, got float32"):
        block.append_op(type="gather", inputs={"X": [x], "Index": [declare(block, "fi", [2])]}, outputs={"Out": [out]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather: Index 'i2' \[2, 2\] must be \[N\] or \[N, 1\]"):
        block.append_op(type="gather", inputs={"X": [x], "Index": [declare(block, "i2", [2, 2], "int64")]},
                        outputs={"Out": [out]})
    idx = declare(block, "idx", [3], "int64")
    block.append_op(type="gather", inputs={"X": [x], "Index": [idx]}, outputs={"Out": [out]})
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather: Index 'idx' has value 4 at position 1, out of range "
                                                       r"\[0, 4\) of X 'x' \[4, 3\]"):
        exe.run(main, feed={"x": rand(4, 3, dtype="float32"), "idx": np.array([0, 4, 1], "int64")}, fetch_list=[out])
    got, = exe.run(main, feed={"x": np.eye(4, 3, dtype="float32"), "idx": np.array([1, 1, 0], "int64")},
                   fetch_list=[out])
    np.testing.assert_array_equal(got, np.eye(4, 3)[[1, 1, 0]])


# ------------------------------------------------------------------ stack / unstack

STACK_CASES = [((3,), 2, 0), ((2, 3), 3, 0), ((2, 3), 2, 1), ((2, 3), 4, 2), ((2, 3), 2, -1), ((2, 1, 3), 1, -2)]


@pytest.mark.parametrize("shape,n,axis", STACK_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_stack_forward(shape, n, axis, dtype):
    xs = [("x%d" % i, (rand(*shape) * 10).astype(dtype)) for i in range(n)]
    OpTest("stack", {"X": xs}, {"Y": np.stack([a for _, a in xs], axis)}, {"axis": axis}).check_output()


@pytest.mark.parametrize("shape,n,axis", STACK_CASES)
def test_stack_grad(shape, n, axis):
    xs = [("x%d" % i, rand(*shape)) for i in range(n)]
    OpTest("stack", {"X": xs}, {"Y": np.stack([a for _, a in xs], axis)}, {"axis": axis}).check_grad(["X"], "Y")


def test_stack_grad_skips_empty():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data("a", shape=[2, 3], dtype="float64", append_batch_size=False)
        b = fluid.layers.data("b", shape=[2, 3], dtype="float64", append_batch_size=False)
        b.stop_gradient = False
        y = fluid.layers.stack([a, b], axis=1)
        assert y.shape == (2, 2, 3)
        w = fluid.layers.assign(np.arange(12, dtype="float64").reshape(2, 2, 3))
        gb, = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.elementwise_mul(y, w))], [b])
    # stack's gradient is unstack of Y@GRAD; the slice of a, which needs none, goes to @EMPTY@
    grad_op, = [op for op in main.global_block().ops if op.type == "unstack"]
    assert grad_op.output("Y") == ["@EMPTY@", b.name + "@GRAD"]
    g, = run(main, {"a": rand(2, 3), "b": rand(2, 3)}, [gb])
    np.testing.assert_array_equal(g, np.arange(12).reshape(2, 2, 3)[:, 1])


UNSTACK_CASES = [((3,), 0), ((2, 3), 0), ((2, 3), 1), ((2, 3, 4), -1), ((4, 1, 2), 1)]


@pytest.mark.parametrize("shape,axis", UNSTACK_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_unstack_forward(shape, axis, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    ys = [("y%d" % i, np.take(x, i, axis=axis)) for i in range(shape[axis])]
    OpTest("unstack", {"X": x}, {"Y": ys}, {"axis": axis, "num": shape[axis]}).check_output()


@pytest.mark.parametrize("shape,axis", UNSTACK_CASES)
def test_unstack_grad(shape, axis):
    x = rand(*shape)
    ys = [("y%d" % i, np.take(x, i, axis=axis)) for i in range(shape[axis])]
    OpTest("unstack", {"X": x}, {"Y": ys}, {"axis": axis, "num": shape[axis]}).check_grad(["X"], "Y")


def test_unstack_layer_partial_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 2], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        ys = fluid.layers.unstack(x, axis=1)
        assert len(ys) == 2 and ys[0].shape == (3,)
        gx, = fluid.gradients([fluid.layers.reduce_sum(ys[1])], [x])  # ys[0] gets no gradient
    xv = rand(3, 2)
    y0, g = run(main, {"x": xv}, [ys[0], gx])
    np.testing.assert_array_equal(y0, xv[:, 0])
    np.testing.assert_array_equal(g, [[0, 1]] * 3)


def test_stack_unstack_errors():
    block = fluid.Program().global_block()
    a, b = declare(block, "a", [2, 3]), declare(block, "b", [2, 4])
    out = declare(block, "out", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"stack: X 'a' \[2, 3\] and X 'b' \[2, 4\] must have the same "
                                                       r"dims"):
        block.append_op(type="stack", inputs={"X": [a, b]}, outputs={"Y": [out]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"stack: axis 3 is out of range \[-3, 3\)"):
        block.append_op(type="stack", inputs={"X": [a, a]}, outputs={"Y": [out]}, attrs={"axis": 3})
    y0, y1 = declare(block, "y0", None), declare(block, "y1", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"unstack: num=2 but X 'a' \[2, 3\] has 3 at axis 1"):
        block.append_op(type="unstack", inputs={"X": [a]}, outputs={"Y": [y0, y1]}, attrs={"axis": 1, "num": 2})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"unstack: axis -3 is out of range \[-2, 2\)"):
        block.append_op(type="unstack", inputs={"X": [a]}, outputs={"Y": [y0, y1]}, attrs={"axis": -3, "num": 2})
    with pytest.raises(ValueError, match="unstack: cannot infer num"):
        with fluid.program_guard(fluid.Program()):
            fluid.layers.unstack(fluid.layers.data("d", shape=[3]), axis=0)


# ------------------------------------------------------------------ squeeze2 / unsqueeze2

SQUEEZE_CASES = [((1, 3, 1, 2), [0, 2], (3, 2)), ((1, 3, 1, 2), [], (3, 2)), ((4, 1), [-1], (4,)),
                 ((1, 1), [1], (1,)), ((2, 3), [], (2, 3))]


@pytest.mark.parametrize("shape,axes,want", SQUEEZE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_squeeze2_forward(shape, axes, want, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    OpTest("squeeze2", {"X": x}, {"Out": x.reshape(want), "XShape": None}, {"axes": axes}).check_output()


@pytest.mark.parametrize("shape,axes,want", SQUEEZE_CASES)
def test_squeeze2_grad(shape, axes, want):
    x = rand(*shape)
    OpTest("squeeze2", {"X": x}, {"Out": x.reshape(want), "XShape": None}, {"axes": axes}).check_grad(["X"], "Out")


UNSQUEEZE_CASES = [((3, 2), [0], (1, 3, 2)), ((3, 2), [-1], (3, 2, 1)), ((3, 2), [0, 2], (1, 3, 1, 2)),
                   ((3,), [0, 0], (1, 1, 3)), ((3, 2), [1, -1], (3, 1, 2, 1)), ((3, 2), [2, 1], (3, 1, 2, 1))]


@pytest.mark.parametrize("shape,axes,want", UNSQUEEZE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_unsqueeze2_forward(shape, axes, want, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    OpTest("unsqueeze2", {"X": x}, {"Out": x.reshape(want), "XShape": None}, {"axes": axes}).check_output()


@pytest.mark.parametrize("shape,axes,want", UNSQUEEZE_CASES)
def test_unsqueeze2_grad(shape, axes, want):
    x = rand(*shape)
    OpTest("unsqueeze2", {"X": x}, {"Out": x.reshape(want), "XShape": None}, {"axes": axes}).check_grad(["X"], "Out")


def test_squeeze_unsqueeze_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[1, 4], dtype="float32")  # [-1, 1, 4]
        s = fluid.layers.squeeze(x, axes=[1])
        u = fluid.layers.unsqueeze(s, axes=[-1, 0])
        assert s.shape == (-1, 4) and u.shape == (1, -1, 4, 1)
        assert main.global_block().ops[-1].type == "unsqueeze2"
    xv = rand(3, 1, 4, dtype="float32")
    got_s, got_u = run(main, {"x": xv}, [s, u])
    np.testing.assert_array_equal(got_s, xv.reshape(3, 4))
    np.testing.assert_array_equal(got_u, xv.reshape(1, 3, 4, 1))


def test_squeeze_unsqueeze_errors():
    block = fluid.Program().global_block()
    x = declare(block, "x", [1, 3])
    out, xs = declare(block, "out", None), declare(block, "xs", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"squeeze2: axis 1 of X 'x' \[1, 3\] has size 3; only size-1 "
                                                       r"dims can be squeezed"):
        block.append_op(type="squeeze2", inputs={"X": [x]}, outputs={"Out": [out], "XShape": [xs]},
                        attrs={"axes": [1]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"squeeze2: axis 2 is out of range \[-2, 2\) for X 'x'"):
        block.append_op(type="squeeze2", inputs={"X": [x]}, outputs={"Out": [out], "XShape": [xs]},
                        attrs={"axes": [2]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"unsqueeze2: axis 4 in axes \[4\] is out of range \[-3, 2\] "
                                                       r"for X 'x' \[1, 3\]"):
        block.append_op(type="unsqueeze2", inputs={"X": [x]}, outputs={"Out": [out], "XShape": [xs]},
                        attrs={"axes": [4]})


# ------------------------------------------------------------------ lstm_unit

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_unit_ref(x, c_prev, forget_bias=0.0):
    i, f, o, g = np.split(x, 4, axis=1)
    c = sigmoid(f + forget_bias) * c_prev + sigmoid(i) * np.tanh(g)
    return c, sigmoid(o) * np.tanh(c)


@pytest.mark.parametrize("n,d", [(1, 1), (3, 5), (32, 16), (2, 33)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("forget_bias", [0.0, 1.0])
def test_lstm_unit_forward(n, d, dtype, forget_bias):
    x = (rand(n, 4 * d) * 3).astype(dtype)
    x.reshape(-1)[:2] = [40.0, -40.0]  # saturated gates
    c_prev = rand(n, d, dtype=dtype)
    c, h = lstm_unit_ref(x.astype("float64"), c_prev.astype("float64"), forget_bias)
    tol = 1e-6 if dtype == "float32" else 1e-12
    OpTest("lstm_unit", {"X": x, "C_prev": c_prev}, {"C": c.astype(dtype), "H": h.astype(dtype)},
           {"forget_bias": forget_bias}).check_output(atol=tol, rtol=tol)


@pytest.mark.parametrize("outputs", [["C", "H"], ["H"], ["C"]])
@pytest.mark.parametrize("forget_bias", [0.0, 0.5])
def test_lstm_unit_grad(outputs, forget_bias):
    x, c_prev = rand(3, 8) * 2, rand(3, 2)
    c, h = lstm_unit_ref(x, c_prev, forget_bias)
    OpTest("lstm_unit", {"X": x, "C_prev": c_prev}, {"C": c, "H": h},
           {"forget_bias": forget_bias}).check_grad(["X", "C_prev"], outputs)


def test_lstm_unit_errors():
    block = fluid.Program().global_block()
    c_prev = declare(block, "c_prev", [-1, 4])
    c, h = declare(block, "c", None), declare(block, "h", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstm_unit: X 'x' \[-1, 12\] must have width 4 \* D = 16 for "
                                                       r"C_prev 'c_prev' \[-1, 4\]"):
        block.append_op(type="lstm_unit", inputs={"X": [declare(block, "x", [-1, 12])], "C_prev": [c_prev]},
                        outputs={"C": [c], "H": [h]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstm_unit: X 'x3' \[2, 16\] and C_prev 'c3' \[3, 4\] must "
                                                       r"have the same batch size"):
        block.append_op(type="lstm_unit", inputs={"X": [declare(block, "x3", [2, 16])],
                                                  "C_prev": [declare(block, "c3", [3, 4])]},
                        outputs={"C": [c], "H": [h]})


def test_lstm_unit_layer_matches_numpy():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[3], dtype="float64")
        h0 = fluid.layers.data("h0", shape=[2], dtype="float64")
        c0 = fluid.layers.data("c0", shape=[2], dtype="float64")
        h, c = fluid.layers.lstm_unit(x, h0, c0, forget_bias=1.0)
        assert h.shape == (-1, 2) and c.shape == (-1, 2)
        params = [p.name for p in main.global_block().all_parameters()]
        assert sorted(params) == ["fc_0.b_0", "fc_0.w_0"]
        loss = fluid.layers.mean(h)
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    scope = fluid.global_scope()
    w = np.array(scope.find_var("fc_0.w_0").get_tensor()).copy()
    b = np.array(scope.find_var("fc_0.b_0").get_tensor()).copy()
    xv, hv, cv = rand(4, 3), rand(4, 2), rand(4, 2)
    got_h, got_c = exe.run(main, feed={"x": xv, "h0": hv, "c0": cv}, fetch_list=[h, c])
    want_c, want_h = lstm_unit_ref(np.concatenate([xv, hv], 1) @ w + b, cv, 1.0)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-12, atol=1e-12)
    assert not np.allclose(np.array(scope.find_var("fc_0.w_0").get_tensor()), w)  # trained


def test_lstm_unit_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float32")
        h = fluid.layers.data("h", shape=[2], dtype="float32")
        c = fluid.layers.data("c", shape=[4], dtype="float32")
        with pytest.raises(ValueError, match="lstm_unit: hidden_t_prev .* and cell_t_prev .* must have the same width"):
            fluid.layers.lstm_unit(x, h, c)
        with pytest.raises(ValueError, match=r"lstm_unit: x_t x3 must have rank 2, got shape \(-1, 3, 2\)"):
            fluid.layers.lstm_unit(fluid.layers.data("x3", shape=[3, 2]), h, h)
