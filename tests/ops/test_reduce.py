"""reduce_sum / reduce_mean / reduce_max and mean: forward vs numpy over shapes, dims, keep_dim, reduce_all
and dtypes; gradients vs central differences; error paths."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

REF = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max}


def _expected(op_type, x, dim, keep_dim, reduce_all):
    axes = tuple(range(x.ndim)) if reduce_all else tuple(d % x.ndim for d in dim)
    out = REF[op_type](x, axis=axes, keepdims=keep_dim)
    return np.asarray(out, dtype=x.dtype).reshape(out.shape if np.ndim(out) else (1,))


def _unique(shape, dtype, seed=0):
    """Values with a unique max along every axis set (a permutation), so reduce_max grads are defined."""
    rng = np.random.RandomState(seed)
    return (rng.permutation(int(np.prod(shape))).reshape(shape) * 0.37 - 3.0).astype(dtype)


CASES = [
    ((7,), [0], False, False),
    ((7,), [-1], True, False),
    ((3, 4), [1], False, False),
    ((3, 4), [0], True, False),
    ((3, 4), [0, 1], False, False),        # every axis, no keep_dim -> [1]
    ((2, 3, 4), [-1], False, False),
    ((2, 3, 4), [1], True, False),
    ((2, 3, 4), [0, 2], False, False),     # two separate reduced runs (multi-pass)
    ((2, 3, 4), [0, -1], True, False),
    ((2, 3, 4, 5), [1, 2], False, False),  # adjacent reduced axes merge
    ((2, 3, 4, 5), [0, 2], True, False),
    ((2, 3, 4, 5), [1, 3], False, False),
    ((2, 1, 4), [1], False, False),        # size-1 axes
    ((1, 5, 1), [0, 2], True, False),
    ((2, 3, 4), [0], False, True),         # reduce_all ignores dim
    ((2, 3, 4), [0], True, True),
    ((3, 1000), [1], False, False),        # long contiguous run (8-lane accumulators)
    ((37, 3), [0], False, False),
]


@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_mean", "reduce_max"])
@pytest.mark.parametrize("shape,dim,keep_dim,reduce_all", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reduce_forward(op_type, shape, dim, keep_dim, reduce_all, dtype):
    x = np.random.RandomState(1).uniform(-2, 2, shape).astype(dtype)
    attrs = {"dim": dim, "keep_dim": keep_dim, "reduce_all": reduce_all}
    want = _expected(op_type, x, dim, keep_dim, reduce_all)
    OpTest(op_type, {"X": x}, {"Out": want}, attrs).check_output(atol=1e-5, rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_max"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("shape,dim,keep_dim",
                         [((5,), [0], False), ((3, 4, 5), [0, 2], True), ((3, 4, 5), [-2], False)])
def test_reduce_int(op_type, dtype, shape, dim, keep_dim):
    x = np.random.RandomState(2).randint(-50, 50, shape).astype(dtype)
    want = _expected(op_type, x, dim, keep_dim, False)
    OpTest(op_type, {"X": x}, {"Out": want}, {"dim": dim, "keep_dim": keep_dim}).check_output()


def test_reduce_default_attrs_reduce_dim0():
    x = np.arange(6, dtype="float32").reshape(2, 3)
    OpTest("reduce_sum", {"X": x}, {"Out": x.sum(0)}).check_output()


def test_reduce_max_negative_and_infinite():
    x = np.array([[-np.inf, -5.0, -7.0], [-1e30, -np.inf, -2.0]], dtype="float32")
    OpTest("reduce_max", {"X": x}, {"Out": x.max(1)}, {"dim": [1]}).check_output()


@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_mean", "reduce_max"])
@pytest.mark.parametrize("shape,dim,keep_dim,reduce_all", [
    ((4,), [0], False, False),
    ((3, 4), [-1], False, False),
    ((3, 4), [0], True, False),
    ((2, 3, 4), [0, 2], False, False),
    ((2, 3, 4), [1], True, False),
    ((2, 1, 3), [0], False, True),
])
def test_reduce_grad(op_type, shape, dim, keep_dim, reduce_all):
    x = _unique(shape, "float64")
    attrs = {"dim": dim, "keep_dim": keep_dim, "reduce_all": reduce_all}
    OpTest(op_type, {"X": x}, {"Out": _expected(op_type, x, dim, keep_dim, reduce_all)}, attrs).check_grad(["X"], "Out")


def test_reduce_max_grad_goes_to_every_tied_max():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[2, 3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        loss = fluid.layers.reduce_sum(fluid.layers.reduce_max(x, dim=1))
        gx, = fluid.gradients([loss], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.array([[1.0, 3.0, 3.0], [0.0, -1.0, 2.0]])
    g, = exe.run(main, feed={"x": xv}, fetch_list=[gx])
    np.testing.assert_array_equal(g, [[0, 1, 1], [0, 0, 1]])


def test_reduce_grad_ops_take_only_what_they_need():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        s = fluid.layers.reduce_sum(x, dim=[1], keep_dim=True)
        loss = fluid.layers.mean(fluid.layers.reduce_max(s, dim=[0]))
        fluid.gradients([loss], [x])
    ops = {op.type: op for op in main.global_block().ops}
    assert sorted(ops["reduce_sum_grad"].input_names) == ["Out@GRAD", "X"]
    assert sorted(ops["reduce_max_grad"].input_names) == ["Out", "Out@GRAD", "X"]


@pytest.mark.parametrize("layer", [fluid.layers.reduce_sum, fluid.layers.reduce_mean, fluid.layers.reduce_max])
def test_reduce_layers_shapes(layer):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3, 4], dtype="float32")  # [-1, 3, 4]
        a = layer(x)                      # reduce_all -> [1]
        b = layer(x, dim=-1)              # [-1, 3]
        c = layer(x, dim=[1, 2], keep_dim=True)
        d = layer(x, dim=[0, 1, 2], keep_dim=True)
    assert a.shape == (1,)
    assert b.shape == (-1, 3)
    assert c.shape == (-1, 1, 1)
    assert d.shape == (1, 1, 1)
    xv = np.random.RandomState(0).rand(2, 3, 4).astype("float32")
    ra, rb, rc = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[a, b, c])
    ref = REF[layer.__name__]
    np.testing.assert_allclose(ra, [ref(xv)], rtol=1e-5)
    np.testing.assert_allclose(rb, ref(xv, axis=-1), rtol=1e-5)
    np.testing.assert_allclose(rc, ref(xv, axis=(1, 2), keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("dim", [2, -3, [0, 5, 1]])  # 3 dims for rank 2: reduce_all stays False
def test_reduce_dim_out_of_range(dim):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="xr", shape=[3, 4], dtype="float32", append_batch_size=False)
        bad = dim if isinstance(dim, int) else dim[1]
        pattern = r"reduce_mean: dim=%d is out of range for X 'xr' \[3, 4\]" % bad
        with pytest.raises(fluid.core.EnforceNotMet, match=pattern):
            fluid.layers.reduce_mean(x, dim=dim)


@pytest.mark.parametrize("shape", [(1,), (5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mean(shape, dtype):
    x = np.random.RandomState(3).uniform(-1, 1, shape).astype(dtype)
    t = OpTest("mean", {"X": x}, {"Out": np.array([x.mean()], dtype=dtype)})
    t.check_output()
    if dtype == "float64":
        t.check_grad(["X"], "Out")


def test_mean_rejects_int():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="xi", shape=[3], dtype="int32", append_batch_size=False)
        m = fluid.layers.mean(x)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"mean does not have a kernel for data_type\[int\]"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"xi": np.arange(3, dtype="int32")}, fetch_list=[m])


@pytest.mark.parametrize("layer", ["reduce_sum", "reduce_mean", "reduce_max"])
def test_reduce_dim_out_of_range_even_when_it_names_every_axis(layer):
    # One dim for a rank-1 input: the layer sets reduce_all, and dim=[1] must still be refused (it summed
    # everything before).
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x1", shape=[5], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"%s: dim=1 is out of range for X 'x1' \[5\] \(rank 1, valid range \[-1, 1\)\)"
                           % layer):
            getattr(fluid.layers, layer)(x, dim=[1])
        block = main.global_block()
        out = block.create_var(name="o", dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"%s: dim=-2 is out of range for X 'x1'" % layer):
            block.append_op(type=layer, inputs={"X": [x]}, outputs={"Out": [out]},
                            attrs={"dim": [-2], "reduce_all": True})


def test_reduce_repeated_dim_is_not_every_axis():
    # dim=[0, 0] on a rank-2 input names two dims but one axis: it reduces axis 0 only.
    x = np.random.RandomState(5).rand(3, 4).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data(name="x2", shape=[3, 4], dtype="float32", append_batch_size=False)
        s = fluid.layers.reduce_sum(xv, dim=[0, 0])
        a = fluid.layers.reduce_sum(xv, dim=[1, -2])  # both axes: everything
    assert s.op.attr("reduce_all") is False and a.op.attr("reduce_all") is True
    rs, ra = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x2": x}, fetch_list=[s, a])
    np.testing.assert_allclose(rs, x.sum(0), rtol=1e-6)
    np.testing.assert_allclose(ra, [x.sum()], rtol=1e-6)


# ------------------------------------------------------------------ reduce_prod, reduce_all, reduce_any

@pytest.mark.parametrize("shape,dim,keep_dim,reduce_all", CASES[:16])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_reduce_prod_forward(shape, dim, keep_dim, reduce_all, dtype):
    rng = np.random.RandomState(2)
    x = (rng.uniform(0.6, 1.4, shape) * rng.choice([-1, 1], shape)).astype(dtype) if dtype != "int64" \
        else rng.randint(-3, 4, shape).astype(dtype)
    axes = tuple(range(x.ndim)) if reduce_all else tuple(d % x.ndim for d in dim)
    want = np.asarray(np.prod(x, axis=axes, keepdims=keep_dim), dtype=dtype)
    want = want.reshape(want.shape if want.ndim else (1,))
    OpTest("reduce_prod", {"X": x}, {"Out": want}, {"dim": dim, "keep_dim": keep_dim, "reduce_all": reduce_all}
           ).check_output(atol=0 if dtype == "int64" else 1e-6, rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("shape,dim", [((3, 4), [1]), ((2, 3, 4), [0, 2]), ((5,), [0]), ((2, 3, 4), [1])])
def test_reduce_prod_grad(shape, dim):
    rng = np.random.RandomState(3)
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    OpTest("reduce_prod", {"X": x}, {"Out": np.zeros(1)}, {"dim": dim}).check_grad(["X"], "Out")


def test_reduce_prod_grad_is_exact_with_zeros():
    # one zero in a row: its gradient is the product of the others, the rest get 0; two zeros: all 0
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.5, -2.0, 4.0]])
    OpTest("reduce_prod", {"X": x}, {"Out": np.zeros(1)}, {"dim": [1]}).check_grad(["X"], "Out")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.layers.data("x", shape=[3, 3], dtype="float64", append_batch_size=False)
        xv.stop_gradient = False
        dx, = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.reduce_prod(xv, dim=1))], [xv])
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=[dx])
    np.testing.assert_array_equal(got, [[0, 6, 0], [0, 0, 0], [-8, 6, -3]])


BOOL_CASES = [((7,), [0], False, False), ((3, 4), [1], True, False), ((2, 3, 4), [0, 2], False, False),
              ((2, 3, 4), [-1], False, False), ((2, 3, 4), [0], False, True), ((4, 1000), [1], False, False)]


@pytest.mark.parametrize("op_type,ref", [("reduce_all", np.all), ("reduce_any", np.any)])
@pytest.mark.parametrize("shape,dim,keep_dim,reduce_all", BOOL_CASES)
@pytest.mark.parametrize("p", [0.1, 0.9])
def test_reduce_all_any_forward(op_type, ref, shape, dim, keep_dim, reduce_all, p):
    x = np.random.RandomState(4).uniform(0, 1, shape) < p
    axes = tuple(range(x.ndim)) if reduce_all else tuple(d % x.ndim for d in dim)
    want = np.asarray(ref(x, axis=axes, keepdims=keep_dim))
    want = want.reshape(want.shape if want.ndim else (1,))
    OpTest(op_type, {"X": x}, {"Out": want}, {"dim": dim, "keep_dim": keep_dim, "reduce_all": reduce_all}
           ).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("op_type", ["reduce_all", "reduce_any"])
def test_reduce_all_any_need_bool_and_have_no_gradient(op_type):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("xb", shape=[3], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"%s: X 'xb' \[-1, 3\] must be bool, got float32"
                           % op_type):
            getattr(fluid.layers, op_type)(x)
    assert fluid.core.op_proto(op_type)["grad"] == "no_gradient"


def test_reduce_prod_all_any_layers():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3], dtype="float32", append_batch_size=False)
        b = fluid.layers.data("b", shape=[2, 3], dtype="bool", append_batch_size=False)
        p_all, p1 = fluid.layers.reduce_prod(x), fluid.layers.reduce_prod(x, dim=-1, keep_dim=True)
        a_all, a0 = fluid.layers.reduce_all(b), fluid.layers.reduce_all(b, dim=0)
        y_all, y1 = fluid.layers.reduce_any(b), fluid.layers.reduce_any(b, dim=[1], keep_dim=True)
    assert a0.dtype == fluid.core.VarDesc.VarType.BOOL and tuple(y1.shape) == (2, 1) and tuple(p1.shape) == (2, 1)
    xv = np.array([[1, 2, 3], [-1, 0.5, 4]], "float32")
    bv = np.array([[True, False, True], [True, True, True]])
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "b": bv},
                                               fetch_list=[p_all, p1, a_all, a0, y_all, y1])
    np.testing.assert_allclose(got[0], [-12.0])
    np.testing.assert_allclose(got[1], [[6.0], [-2.0]])
    np.testing.assert_array_equal(got[2], [False])
    np.testing.assert_array_equal(got[3], [True, False, True])
    np.testing.assert_array_equal(got[4], [True])
    np.testing.assert_array_equal(got[5], [[True], [True]])
