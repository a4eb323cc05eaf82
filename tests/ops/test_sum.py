"""The n-ary sum op: values for 1..5 inputs, the in-place form, skipped inputs, errors and gradients."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest


def run(main, feed=None, fetch_list=(), exe=None):
    exe = exe or fluid.Executor(fluid.CPUPlace())
    return exe.run(main, feed=feed or {}, fetch_list=list(fetch_list))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("shape", [(3, 4), (1,), (2, 1, 5), (3000,)])
def test_sum_n_inputs(n, dtype, shape):
    rng = np.random.RandomState(n)
    xs = [(rng.uniform(-10, 10, shape)).astype(dtype) for _ in range(n)]
    want = xs[0].copy()
    for x in xs[1:]:
        want = want + x
    OpTest("sum", {"X": [("x%d" % i, x) for i, x in enumerate(xs)]}, {"Out": want.astype(dtype)}).check_output()


def test_sum_large_and_odd_sized():
    # Several accumulation blocks plus a ragged tail.
    rng = np.random.RandomState(0)
    xs = [rng.standard_normal(10007) for _ in range(4)]
    OpTest("sum", {"X": [("x%d" % i, x) for i, x in enumerate(xs)]},
           {"Out": xs[0] + xs[1] + xs[2] + xs[3]}).check_output(atol=1e-12, rtol=1e-12)


def test_sum_equal_numel_different_shapes_takes_first_shape():
    a = np.arange(6, dtype="float32").reshape(2, 3)
    b = np.ones(6, "float32")
    OpTest("sum", {"X": [("a", a), ("b", b)]}, {"Out": a + 1}).check_output()


def test_sums_layer_shape_dtype_and_values():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data("a", shape=[3], dtype="float64")
        b = fluid.layers.data("b", shape=[3], dtype="float64")
        s = fluid.layers.sums([a, b, a])
    assert s.shape == (-1, 3) and s.dtype == a.dtype
    av, bv = np.random.rand(4, 3), np.random.rand(4, 3)
    np.testing.assert_allclose(run(main, {"a": av, "b": bv}, [s])[0], 2 * av + bv, rtol=1e-15)


def _in_place_program(n, fed_first):
    """x0 = x0 + x1 + ... written with block.append_op (Out is X[0])."""
    main = fluid.Program()
    block = main.global_block()
    with fluid.program_guard(main, fluid.Program()):
        xs = [fluid.layers.data("x%d" % i, shape=[4], dtype="float32", append_batch_size=False) for i in range(n)]
        if fed_first:
            acc = xs[0]
        else:  # a computed (owned) buffer
            acc = fluid.layers.scale(xs[0], scale=1.0)
        block.append_op(type="sum", inputs={"X": [acc] + xs[1:]}, outputs={"Out": [acc]})
        after = fluid.layers.scale(acc, scale=1.0)  # reads acc after the in-place sum
    return main, acc, after


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("fed_first", [True, False])
def test_sum_in_place(n, fed_first):
    main, acc, after = _in_place_program(n, fed_first)
    sum_op = [op for op in main.global_block().ops if op.type == "sum"][0]
    assert sum_op.output("Out") == [sum_op.input("X")[0]]
    rng = np.random.RandomState(n)
    feed = {"x%d" % i: rng.rand(4).astype("float32") for i in range(n)}
    want = sum(feed["x%d" % i] for i in range(n))
    exe = fluid.Executor(fluid.CPUPlace())
    for _ in range(3):  # re-running must not accumulate into stale buffers
        got_acc, got_after = run(main, feed, [acc, after], exe)
        np.testing.assert_allclose(got_acc, want, rtol=1e-6)
        np.testing.assert_allclose(got_after, want, rtol=1e-6)
    # A fed X[0] is never written through: the caller's array is unchanged.
    np.testing.assert_array_equal(feed["x0"], np.random.RandomState(n).rand(4).astype("float32"))


def test_sum_in_place_keeps_buffer():
    # Out is X[0], computed in this program: the sum lands in X[0]'s own buffer.
    main = fluid.Program()
    block = main.global_block()
    with fluid.program_guard(main, fluid.Program()):
        acc = fluid.layers.fill_constant([1000], "float64", 1.0)
        ys = [fluid.layers.fill_constant([1000], "float64", float(k)) for k in (2, 3)]
        block.append_op(type="sum", inputs={"X": [acc] + ys}, outputs={"Out": [acc]})
    np.testing.assert_array_equal(run(main, fetch_list=[acc])[0], np.full(1000, 6.0))


def test_sum_in_place_out_is_a_later_input():
    main = fluid.Program()
    block = main.global_block()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.fill_constant([5000], "float32", 1.0)
        b = fluid.layers.fill_constant([5000], "float32", 2.0)
        c = fluid.layers.fill_constant([5000], "float32", 4.0)
        block.append_op(type="sum", inputs={"X": [a, b, c]}, outputs={"Out": [c]})
    np.testing.assert_array_equal(run(main, fetch_list=[c])[0], np.full(5000, 7.0, "float32"))


def test_sum_skips_uninitialized_and_empty_inputs():
    main = fluid.Program()
    block = main.global_block()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data("a", shape=[2, 3], dtype="float32", append_batch_size=False)
        b = fluid.layers.data("b", shape=[2, 3], dtype="float32", append_batch_size=False)
        never = block.create_var(name="never_written", shape=[2, 3], dtype="float32")
        empty = fluid.layers.fill_constant([0, 3], "float32", 5.0)
        out = block.create_var(name="out", dtype="float32")
        block.append_op(type="sum", inputs={"X": [never, a, empty, b, never]}, outputs={"Out": [out]})
    assert out.shape == (2, 3)
    av, bv = np.random.rand(2, 3).astype("float32"), np.random.rand(2, 3).astype("float32")
    np.testing.assert_allclose(run(main, {"a": av, "b": bv}, [out])[0], av + bv, rtol=1e-6)


def test_sum_of_only_empty_inputs_is_empty():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        e1 = fluid.layers.fill_constant([0, 3], "float32", 1.0)
        e2 = fluid.layers.fill_constant([0, 3], "float32", 1.0)
        out = fluid.layers.sums([e1, e2])
    assert run(main, fetch_list=[out])[0].shape == (0, 3)


def test_sum_numel_mismatch_at_build_time():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        a = fluid.layers.fill_constant([2, 3], "float32", 1.0)
        b = fluid.layers.fill_constant([4], "float32", 1.0)
        with pytest.raises(core.EnforceNotMet,
                           match=r"sum: .*same number of elements; X\[0\] 'fill_constant.*' \[2, 3\] vs "
                                 r"X\[1\] 'fill_constant.*' \[4\]"):
            fluid.layers.sums([a, b])


def test_sum_numel_mismatch_at_run_time():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data("a", shape=[3], dtype="float32")
        b = fluid.layers.data("b", shape=[3], dtype="float32")
        s = fluid.layers.sums([a, b])
    with pytest.raises(core.EnforceNotMet, match=r"sum: .*X\[0\] 'a' \[2, 3\] vs X\[1\] 'b' \[5, 3\]"):
        run(main, {"a": np.ones((2, 3), "float32"), "b": np.ones((5, 3), "float32")}, [s])


def test_sum_dtype_mismatch_at_run_time():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data("a", shape=[3], dtype="float32")
        b = fluid.layers.data("b", shape=[3], dtype="float64")
        s = main.global_block().create_var(name="s", dtype="float32")
        main.global_block().append_op(type="sum", inputs={"X": [a, b]}, outputs={"Out": [s]})  # the layer refuses
    with pytest.raises(core.EnforceNotMet, match=r"sum: .*same dtype; X\[0\] 'a' is float32 but X\[1\] 'b' is float64"):
        run(main, {"a": np.ones((2, 3), "float32"), "b": np.ones((2, 3))}, [s])


def test_sum_bool_has_no_kernel():
    x = np.array([True, False])
    with pytest.raises(core.EnforceNotMet, match="sum.*kernel.*bool"):
        OpTest("sum", {"X": [("a", x), ("b", x)]}, {"Out": x}).check_output()


# ------------------------------------------------------------------------------------------ gradient

def test_sum_grad_ops_are_one_scale_per_input():
    main = fluid.Program()
    block = main.global_block()
    xs = [block.create_var(name="x%d" % i, shape=[3], dtype="float32") for i in range(3)]
    out = block.create_var(name="out", dtype="float32")
    op = block.append_op(type="sum", inputs={"X": xs}, outputs={"Out": out})
    grads = core.make_grad_ops(op.desc, {"x1@GRAD"})
    assert [g.type() for g in grads] == ["scale", "scale"]
    assert [g.output("Out") for g in grads] == [["x0@GRAD"], ["x2@GRAD"]]
    for g in grads:
        assert g.input("X") == ["out@GRAD"]
        assert g.attr("scale") == 1.0 and g.attr("bias") == 0.0


@pytest.mark.parametrize("n", [1, 2, 4])
def test_sum_gradients_equal_out_grad(n):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xs = [fluid.layers.data("x%d" % i, shape=[2, 3], dtype="float64", append_batch_size=False,
                                stop_gradient=False) for i in range(n)]
        dout = fluid.layers.data("dout", shape=[2, 3], dtype="float64", append_batch_size=False)
        s = fluid.layers.sums(xs)
        grads = fluid.gradients([s], xs, target_gradients=[dout])
    feed = {"x%d" % i: np.random.rand(2, 3) for i in range(n)}
    feed["dout"] = np.random.rand(2, 3)
    for g in run(main, feed, grads):
        np.testing.assert_array_equal(g, feed["dout"])


def test_sum_gradient_with_repeated_input():
    # d(x + x + y)/dx = 2: backward aggregates the two contributions (with another sum).
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[4], dtype="float32", append_batch_size=False, stop_gradient=False)
        y = fluid.layers.data("y", shape=[4], dtype="float32", append_batch_size=False, stop_gradient=False)
        s = fluid.layers.sums([x, x, y])
        gx, gy = fluid.gradients([s], [x, y])
    got_x, got_y = run(main, {"x": np.ones(4, "float32"), "y": np.ones(4, "float32")}, [gx, gy])
    np.testing.assert_array_equal(got_x, np.full(4, 2.0, "float32"))
    np.testing.assert_array_equal(got_y, np.ones(4, "float32"))


@pytest.mark.parametrize("n", [1, 3])
def test_sum_check_grad(n):
    rng = np.random.RandomState(3)
    xs = [rng.uniform(-1, 1, (2, 3)) for _ in range(n)]
    OpTest("sum", {"X": [("x%d" % i, x) for i, x in enumerate(xs)]}, {"Out": sum(xs)}).check_grad(["X"], "Out")
