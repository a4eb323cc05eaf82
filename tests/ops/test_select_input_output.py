"""select_input and select_output (kernels/select_input_output.cc): Out = X[Mask] and Out[Mask] = X with an int32
Mask of one element, copies with their LoD; the inputs select_input does not select are never read, the outputs
select_output does not select are cleared; gradients (each op the other's) against central differences; errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest, record_checked

L = fluid.layers


def _mask(k):
    return np.array([k], dtype="int32")


@pytest.mark.parametrize("k", [0, 1, 2])
def test_select_input_copies_the_selected_input(k):
    rng = np.random.RandomState(k)
    xs = [rng.randn(2, 3).astype("float32"), rng.randn(4, 1).astype("float32"), rng.randn(5).astype("float32")]
    OpTest("select_input", {"X": [("x%d" % i, x) for i, x in enumerate(xs)], "Mask": _mask(k)},
           {"Out": xs[k]}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("dtype", ["float64", "int64", "int32", "bool"])
def test_select_input_any_dtype(dtype):
    a = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    b = (np.arange(6).reshape(3, 2) % 3 == 0).astype(dtype)
    OpTest("select_input", {"X": [("a", a), ("b", b)], "Mask": _mask(1)}, {"Out": b}).check_output()


def test_select_input_keeps_the_lod():
    x0 = np.arange(10, dtype="float32").reshape(5, 2)
    x1 = -np.arange(6, dtype="float32").reshape(3, 2)
    OpTest("select_input", {"X": [("x0", (x0, [[2, 0, 3]])), ("x1", (x1, [[1, 2]]))], "Mask": _mask(0)},
           {"Out": (x0, [[2, 0, 3]])}).check_output()


def _select_input_program(k_feed=True):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = L.data(name="a", shape=[2, 3], dtype="float64", append_batch_size=False)
        b = L.data(name="b", shape=[4], dtype="float64", append_batch_size=False)
        m = L.data(name="m", shape=[1], dtype="int32", append_batch_size=False)
        a.stop_gradient = b.stop_gradient = False
        out = fluid.layers.branches.select_input([a, b], m)
        w = L.data(name="w", shape=[-1], dtype="float64", append_batch_size=False)
        loss = L.reduce_sum(L.elementwise_mul(L.reshape(out, [-1]), w))
        ga, gb = fluid.gradients([loss], [a, b])
    return main, out, loss, ga, gb


def test_select_input_infers_the_dims_its_inputs_agree_on():
    main, out, *_ = _select_input_program()
    assert out.shape == (2, 3)  # inputs of different ranks: X[0]'s dims, as Fluid
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        a = L.data(name="a", shape=[2, 3], dtype="float32", append_batch_size=False)
        b = L.data(name="b", shape=[5, 3], dtype="float32", append_batch_size=False)
        m = L.data(name="m", shape=[1], dtype="int32", append_batch_size=False)
        assert fluid.layers.branches.select_input([a, b], m).shape == (-1, 3)


@pytest.mark.parametrize("k", [0, 1])
def test_select_input_gradient_goes_to_the_selected_input(k):
    rng = np.random.RandomState(3)
    main, out, loss, ga, gb = _select_input_program()
    exe = fluid.Executor(fluid.CPUPlace())
    av, bv = rng.randn(2, 3), rng.randn(4)
    wv = rng.randn(6 if k == 0 else 4)
    feed = {"a": av, "b": bv, "m": _mask(k), "w": wv}
    grad = exe.run(main, feed=feed, fetch_list=[ga if k == 0 else gb])[0]
    base = feed["a" if k == 0 else "b"]
    num = np.zeros_like(base)
    eps = 1e-6
    for idx in np.ndindex(*base.shape):
        orig = base[idx]
        base[idx] = orig + eps
        plus = exe.run(main, feed=feed, fetch_list=[loss])[0][0]
        base[idx] = orig - eps
        minus = exe.run(main, feed=feed, fetch_list=[loss])[0][0]
        base[idx] = orig
        num[idx] = (plus - minus) / (2 * eps)
    np.testing.assert_allclose(grad, num, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(grad, wv.reshape(base.shape))
    # the input it did not select gets no gradient written (its select_output output is cleared)
    unselected = gb if k == 0 else ga
    with pytest.raises(core.EnforceNotMet, match="fetch: variable '%s' was never computed" % unselected.name):
        exe.run(main, feed=feed, fetch_list=[unselected])
    record_checked("grad", "select_input", "select_output")


def test_select_output_writes_only_the_selected_output():
    x = np.arange(6, dtype="float32").reshape(2, 3)
    OpTest("select_output", {"X": x, "Mask": _mask(1)},
           {"Out": [("o0", None), ("o1", x), ("o2", None)]}).check_output(atol=0, rtol=0)
    OpTest("select_output", {"X": (x, [[1, 1]]), "Mask": _mask(0)},
           {"Out": [("o0", (x, [[1, 1]])), ("o1", None)]}).check_output()


def test_select_output_clears_the_others_between_runs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[3], dtype="float32", append_batch_size=False)
        m = L.data(name="m", shape=[1], dtype="int32", append_batch_size=False)
        o0 = main.global_block().create_var(name="o0", dtype="float32")
        o1 = main.global_block().create_var(name="o1", dtype="float32")
        fluid.layers.branches.select_output(x, [o0, o1], m)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    x1 = np.array([1, 2, 3], "float32")
    np.testing.assert_array_equal(exe.run(main, feed={"x": x1, "m": _mask(1)}, fetch_list=["o1"], scope=scope)[0], x1)
    np.testing.assert_array_equal(exe.run(main, feed={"x": 2 * x1, "m": _mask(0)}, fetch_list=["o0"],
                                          scope=scope)[0], 2 * x1)
    # one prepared program (the same fetch list) on both runs: o1 does not keep the first run's value
    np.testing.assert_array_equal(exe.run(main, feed={"x": x1, "m": _mask(1)}, fetch_list=["o1"], scope=scope)[0], x1)
    with pytest.raises(core.EnforceNotMet, match="fetch: variable 'o1' was never computed"):
        exe.run(main, feed={"x": x1, "m": _mask(0)}, fetch_list=["o1"], scope=scope)


def test_select_output_gradient_is_the_selected_output_gradient():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[2, 2], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        m = L.data(name="m", shape=[1], dtype="int32", append_batch_size=False)
        outs = [main.global_block().create_var(name="o%d" % i, dtype="float64") for i in range(3)]
        fluid.layers.branches.select_output(x, outs, m)
        loss = L.reduce_sum(L.elementwise_mul(outs[2], outs[2]))  # only output 2 reaches the loss
        gx, = fluid.gradients([loss], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.array([[1.0, -2.0], [0.5, 3.0]])
    g, = exe.run(main, feed={"x": xv, "m": _mask(2)}, fetch_list=[gx])
    np.testing.assert_allclose(g, 2 * xv)  # d sum(x^2) / dx, numerically the same
    eps = 1e-6
    for idx in np.ndindex(2, 2):
        plus, minus = xv.copy(), xv.copy()
        plus[idx] += eps
        minus[idx] -= eps
        num = (exe.run(main, feed={"x": plus, "m": _mask(2)}, fetch_list=[loss])[0][0]
               - exe.run(main, feed={"x": minus, "m": _mask(2)}, fetch_list=[loss])[0][0]) / (2 * eps)
        assert abs(num - g[idx]) < 1e-6
    record_checked("grad", "select_output")


# ------------------------------------------------------------------ errors

def test_a_mask_out_of_range_is_an_error():
    main, *_ = _select_input_program()
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"a": np.ones((2, 3)), "b": np.ones(4), "w": np.ones(6)}
    with pytest.raises(core.EnforceNotMet, match=r"select_input: Mask 'm' = 2 must be in \[0, 2\): X has 2 variables"):
        exe.run(main, feed=dict(feed, m=_mask(2)))
    with pytest.raises(core.EnforceNotMet, match=r"select_input: Mask 'm' = -1 must be in \[0, 2\)"):
        exe.run(main, feed=dict(feed, m=_mask(-1)))


def test_the_mask_must_be_one_int32():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        a = L.data(name="a", shape=[2], dtype="float32", append_batch_size=False)
        f = L.data(name="f", shape=[1], dtype="float32", append_batch_size=False)
        two = L.data(name="two", shape=[2], dtype="int32", append_batch_size=False)
        with pytest.raises(core.EnforceNotMet, match=r"select_input: Mask 'f' \[1\] must be int32, got float32"):
            fluid.layers.branches.select_input([a, a], f)
        with pytest.raises(core.EnforceNotMet, match=r"select_output: Mask 'two' \[2\] must hold one element"):
            fluid.layers.branches.select_output(a, [a.block.create_var(name="o", dtype="float32")], two)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = L.data(name="a", shape=[2], dtype="float32", append_batch_size=False)
        m = L.data(name="m", shape=[-1], dtype="int32", append_batch_size=False)
        out = fluid.layers.branches.select_input([a, a], m)
    with pytest.raises(core.EnforceNotMet, match=r"select_input: Mask 'm' must be an int32 tensor of one element, "
                                                 r"got int32 \[2\]"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"a": np.ones(2, "float32"), "m": np.array([0, 1], "int32")},
                                             fetch_list=[out])


def test_select_input_needs_an_input_and_the_selected_one_computed():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        m = L.data(name="m", shape=[1], dtype="int32", append_batch_size=False)
        with pytest.raises(core.EnforceNotMet, match="select_input: X must list at least one variable"):
            m.block.append_op(type="select_input", inputs={"X": [], "Mask": [m]},
                              outputs={"Out": [m.block.create_var(name="o", dtype="float32")]})
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = L.data(name="a", shape=[2], dtype="float32", append_batch_size=False)
        never = main.global_block().create_var(name="never", dtype="float32", shape=[2])
        m = L.data(name="m", shape=[1], dtype="int32", append_batch_size=False)
        out = fluid.layers.branches.select_input([a, never], m)
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"a": np.ones(2, "float32")}
    np.testing.assert_array_equal(exe.run(main, feed=dict(feed, m=_mask(0)), fetch_list=[out])[0], [1, 1])
    with pytest.raises(core.EnforceNotMet, match=r"select_input: X\[1\] 'never', the one Mask selects, is not "
                                                 r"initialized"):
        exe.run(main, feed=dict(feed, m=_mask(1)), fetch_list=[out])
