"""Bad input: every error is a Python exception naming the op type, the slot/variable, the expected and
actual shape/dtype and the user's file:line where the op was created; the executor stays usable, and
nothing segfaults or hangs."""
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name

HERE = os.path.abspath(__file__)


def _site(offset=0):
    """'<this file>:<line of the caller + offset>', as the ops record it."""
    return "%s:%d" % (HERE, sys._getframe(1).f_lineno + offset)


def _contains(msg, *parts):
    for p in parts:
        assert p in msg, "%r not in error message:\n%s" % (p, msg)


@pytest.fixture(scope="module")
def exe():
    return fluid.Executor(fluid.CPUPlace())


def _good_run(exe):
    """A fresh, correct program must still run right after any error."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="gx", shape=[3], dtype="float64")
        y = fluid.layers.scale(x, scale=3.0, bias=1.0)
    xv = np.arange(6, dtype="float64").reshape(2, 3)
    r, = exe.run(main, feed={"gx": xv}, fetch_list=[y], scope=fluid.Scope())
    np.testing.assert_array_equal(r, xv * 3 + 1)


def _scale_prog(shape=(4,), dtype="float32"):
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=list(shape), dtype=dtype)
        y = fluid.layers.scale(x, scale=2.0); site = _site()  # noqa: E702
    return main, x, y, site


# ---------------------------------------------------------------- feeding and fetching

def _checked_scale_prog():
    """y = 2x with x declared by fluid.data (shape [-1, 4], float32): Executor.run checks its feeds."""
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.data(name="x", shape=[None, 4], dtype="float32")
        y = fluid.layers.scale(x, scale=2.0); site = _site()  # noqa: E702
    return main, x, y, site


def test_wrong_feed_dtype(exe):
    main, x, y, site = _checked_scale_prog()
    with pytest.raises(core.FeedError) as ei:
        exe.run(main, feed={"x": np.ones((2, 4), "float64")}, fetch_list=[y])
    _contains(str(ei.value), "The data type of fed Variable 'x' must be float32, but received float64",
              "read by op scale created at " + site)
    # Fluid raises ValueError; EnforceNotMet catches it too
    assert issubclass(core.FeedError, ValueError) and issubclass(core.FeedError, core.EnforceNotMet)
    with pytest.raises(ValueError, match="The data type of fed Variable 'x' must be float32, but received int64"):
        exe.run(main, feed={"x": np.ones((2, 4), "int64")}, fetch_list=[y])
    with pytest.raises(TypeError, match="numpy dtype complex128 is not supported"):
        exe.run(main, feed={"x": np.ones((2, 4), "complex128")}, fetch_list=[y])
    with pytest.raises(TypeError, match="not supported"):
        exe.run(main, feed={"x": np.array([["a"] * 4])}, fetch_list=[y])
    _good_run(exe)
    r, = exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[y])  # same program, now right
    np.testing.assert_array_equal(r, np.full((2, 4), 2.0))


def test_wrong_feed_shape(exe):
    main, x, y, site = _checked_scale_prog()
    with pytest.raises(core.FeedError) as ei:
        exe.run(main, feed={"x": np.ones((2, 5), "float32")}, fetch_list=[y])
    _contains(str(ei.value), "The fed Variable 'x' should have dimensions = 2, shape = [-1, 4], but received fed "
              "shape [2, 5] on each device", "created at " + site)
    with pytest.raises(ValueError, match=r"dimensions = 2, shape = \[-1, 4\], but received fed shape \[8\] on"):
        exe.run(main, feed={"x": np.ones(8, "float32")}, fetch_list=[y])
    with pytest.raises(core.EnforceNotMet, match=r"received fed shape \[2, 4, 1\]"):
        exe.run(main, feed={"x": np.ones((2, 4, 1), "float32")}, fetch_list=[y])
    with pytest.raises(core.EnforceNotMet, match="rank 10 exceeds the maximum 9"):
        exe.run(main, feed={"x": np.ones((1,) * 10, "float32")}, fetch_list=[y])
    # the shape is checked before the dtype, as in Fluid
    with pytest.raises(ValueError, match=r"received fed shape \[2, 5\]"):
        exe.run(main, feed={"x": np.ones((2, 5), "int64")}, fetch_list=[y])
    _good_run(exe)
    r, = exe.run(main, feed={"x": np.ones((0, 4), "float32")}, fetch_list=[y])  # empty batch is fine
    assert r.shape == (0, 4)


def test_layers_data_feed_is_not_checked_and_the_fed_array_wins(exe, capfd):
    """Fluid never checked layers.data feeds: the fed dtype and shape are used; GLOG level 1 logs it."""
    main, x, y, site = _scale_prog()  # layers.data x: [-1, 4] float32
    assert not x.need_check_feed
    with fluid.vlog_guard(1):
        capfd.readouterr()
        r, = exe.run(main, feed={"x": np.arange(6, dtype="float64").reshape(2, 3)}, fetch_list=[y])
        err = capfd.readouterr().err
    assert r.dtype == np.float64 and r.shape == (2, 3)
    np.testing.assert_array_equal(r, np.arange(6).reshape(2, 3) * 2.0)
    _contains(err, "feed: variable 'x' (layers.data, not checked) is declared float32 [-1, 4] but fed float64 [2, 3]")
    r, = exe.run(main, feed={"x": np.array([[1, 2, 3, 4]], "int64")}, fetch_list=[y])
    assert r.dtype == np.int64
    np.testing.assert_array_equal(r, [[2, 4, 6, 8]])
    capfd.readouterr()
    exe.run(main, feed={"x": np.ones((1, 4), "float64")}, fetch_list=[y])  # level 0: silent
    assert capfd.readouterr().err == ""


def test_missing_feed_and_unknown_names(exe):
    main, x, y, site = _scale_prog()
    with pytest.raises(ValueError) as ei:
        exe.run(main, feed={}, fetch_list=[y])
    _contains(str(ei.value), "feed: variable 'x' is required by op scale (created at " + site + ")",
              "missing from the feed dict")
    with pytest.raises(ValueError, match="fetch_list: variable 'nope' is not in the program"):
        exe.run(main, feed={"x": np.ones((1, 4), "float32")}, fetch_list=["nope"])
    with pytest.raises(ValueError, match="feed: variable 'nope' is not in the program"):
        exe.run(main, feed={"x": np.ones((1, 4), "float32"), "nope": np.ones(1)}, fetch_list=[y])
    _good_run(exe)


def test_fetch_of_a_variable_nobody_computes(exe):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = main.global_block().create_var(name="never", shape=[2], dtype="float32")
    with pytest.raises(core.EnforceNotMet, match="fetch: variable 'never' was never computed"):
        exe.run(main, fetch_list=[v], scope=fluid.Scope())
    _good_run(exe)


# ---------------------------------------------------------------- building ops

def test_unknown_op_type():
    main, x, y, _ = _scale_prog()
    b = main.global_block()
    n = len(b.ops)
    site = _site(+2)
    with pytest.raises(core.EnforceNotMet) as ei:
        b.append_op(type="no_such_op", inputs={"X": x}, outputs={"Out": y})
    _contains(str(ei.value), "unknown op type 'no_such_op'", "created at " + site)
    assert len(b.ops) == n and b.desc.op_size() == n


def test_wrong_attribute_type():
    main, x, y, _ = _scale_prog()
    b = main.global_block()
    site = _site(+2)
    with pytest.raises(TypeError) as ei:
        b.append_op(type="scale", inputs={"X": x}, outputs={"Out": y}, attrs={"scale": "big"})
    _contains(str(ei.value), "op scale: attribute 'scale' expects FLOAT, got str 'big'", "created at " + site)
    with pytest.raises(TypeError, match="attribute 'bias_after_scale' expects BOOLEAN, got int 2"):
        b.append_op(type="scale", inputs={"X": x}, outputs={"Out": y}, attrs={"bias_after_scale": 2})
    with pytest.raises(TypeError, match="attribute 'shape' expects LONGS, got list"):
        b.append_op(type="fill_constant", outputs={"Out": y}, attrs={"shape": [1.5]})
    with pytest.raises(TypeError, match="attribute 'dtype' expects INT, got float"):
        b.append_op(type="fill_constant", outputs={"Out": y}, attrs={"dtype": 5.0})
    with pytest.raises(ValueError, match=r"op fill_constant: attribute 'dtype' value 1099511627776 does not fit a "
                                         r"32-bit integer \(INT attribute\)"):
        b.append_op(type="fill_constant", outputs={"Out": y}, attrs={"dtype": 2 ** 40})
    with pytest.raises(TypeError, match="cannot store a dict as an op attribute"):
        b.append_op(type="scale", inputs={"X": x}, outputs={"Out": y}, attrs={"extra": {}})
    assert [op.type for op in b.ops] == ["scale"]
    # on an existing op
    with pytest.raises(TypeError, match="attribute 'scale' expects FLOAT"):
        b.ops[0]._set_attr("scale", [1.0])
    assert b.ops[0].attr("scale") == 2.0


def test_unknown_and_missing_slots():
    main, x, y, _ = _scale_prog()
    b = main.global_block()
    site = _site(+2)
    with pytest.raises(core.EnforceNotMet) as ei:
        b.append_op(type="scale", inputs={"X": x, "Z": x}, outputs={"Out": y})
    _contains(str(ei.value), "op scale has no input slot 'Z' (inputs: X)", "created at " + site)
    with pytest.raises(core.EnforceNotMet, match="op scale has no output slot 'Y' \\(outputs: Out\\)"):
        b.append_op(type="scale", inputs={"X": x}, outputs={"Out": y, "Y": y})
    site = _site(+2)
    with pytest.raises(core.EnforceNotMet) as ei:
        b.append_op(type="scale", inputs={}, outputs={"Out": y})
    _contains(str(ei.value), "op scale: input X is required but was not given", "created at " + site)
    with pytest.raises(core.EnforceNotMet, match="op scale: output Out is required but was not given"):
        b.append_op(type="scale", inputs={"X": x}, outputs={})
    with pytest.raises(core.EnforceNotMet, match="op scale: input X takes one variable, got 2"):
        b.append_op(type="scale", inputs={"X": [x, x]}, outputs={"Out": y})
    with pytest.raises(core.EnforceNotMet, match="input X variable 'undeclared' is not declared in block 0"):
        b.append_op(type="scale", inputs={"X": ["undeclared"]}, outputs={"Out": y})
    with pytest.raises(core.EnforceNotMet, match="output Out variable 'undeclared' is not declared in block 0"):
        b.append_op(type="scale", inputs={"X": x}, outputs={"Out": ["undeclared"]})
    assert [op.type for op in b.ops] == ["scale"] and b.desc.op_size() == 1


def test_fill_constant_bad_shape_at_build_time():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        site = _site(+2)
        with pytest.raises(core.EnforceNotMet) as ei:
            fluid.layers.fill_constant(shape=[2, -3], dtype="float32", value=1.0)
    _contains(str(ei.value), "fill_constant", "[2, -3]", "negative", "created at " + site)


def test_mul_inner_dims_mismatch_at_build_time():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[5], dtype="float32")
        w = main.global_block().create_var(name="w", shape=[4, 3], dtype="float32")
        site = _site(+2)
        with pytest.raises(core.EnforceNotMet) as ei:
            fluid.layers.mul(x, w)
    _contains(str(ei.value), "mul", "'x'", "'w'", "[-1, 5]", "[4, 3]", "created at " + site)
    assert [op.type for op in main.global_block().ops] == []


def test_fc_inner_dims_mismatch_points_at_fc_line():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[-1, 6], dtype="float32", append_batch_size=False)
        w = main.global_block().create_var(name="w2", shape=[4, 3], dtype="float32", persistable=True)
        site = _site(+2)
        with pytest.raises(core.EnforceNotMet) as ei:
            main.global_block().append_op(type="mul", inputs={"X": x, "Y": w}, outputs={"Out": x})
    _contains(str(ei.value), "mul", "'x'", "'w2'", "[-1, 6]", "[4, 3]", "created at " + site)


def test_elementwise_add_incompatible_at_build_time():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[2, 3], dtype="float32", append_batch_size=False)
        y = fluid.layers.data(name="y", shape=[4], dtype="float32", append_batch_size=False)
        site = _site(+2)
        with pytest.raises(core.EnforceNotMet) as ei:
            fluid.layers.elementwise_add(x, y)
    _contains(str(ei.value), "elementwise_add", "'x'", "'y'", "[2, 3]", "[4]", "created at " + site)
    assert [op.type for op in main.global_block().ops] == []


def test_elementwise_add_dtype_mismatch_is_caught_when_built(exe):
    # build-time shape inference compares the operands' dtypes and names both sides and the user's line
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[2, 3], dtype="float32", append_batch_size=False)
        z = fluid.layers.data(name="z", shape=[2, 3], dtype="float64", append_batch_size=False)
        site = _site(2)
        with pytest.raises(core.EnforceNotMet) as ei:
            fluid.layers.elementwise_add(x, z)
    _contains(str(ei.value), "elementwise_add", "'x'", "float32", "'z'", "float64", "created at " + site)
    assert not any(op.type == "elementwise_add" for op in main.global_block().ops)  # rolled back
    _good_run(exe)


# ---------------------------------------------------------------- errors inside a run

def test_uninitialized_input_at_run_time(exe):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = main.global_block().create_var(name="v", shape=[2], dtype="float32")
        o = fluid.layers.scale(v); site = _site()  # noqa: E702
    with pytest.raises(core.EnforceNotMet) as ei:
        exe.run(main, fetch_list=[o], scope=fluid.Scope())
    _contains(str(ei.value), "op scale: input X variable 'v' is not initialized", "created at " + site)
    _good_run(exe)


def test_kernel_dtype_missing_at_run_time(exe):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = fluid.layers.fill_constant(shape=[2], dtype="bool", value=1.0)
        o = fluid.layers.scale(v); site = _site()  # noqa: E702
    with pytest.raises(core.EnforceNotMet) as ei:
        exe.run(main, fetch_list=[o], scope=fluid.Scope())
    _contains(str(ei.value), "op scale does not have a kernel for data_type[bool]", "registered: CPU:",
              "created at " + site)
    _good_run(exe)


def test_feed_that_changes_shape_fails_in_a_later_op(exe):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[-1, -1], dtype="float32", append_batch_size=False)
        w = fluid.layers.data(name="w", shape=[-1, -1], dtype="float32", append_batch_size=False)
        o = fluid.layers.mul(x, w); site = _site()  # noqa: E702
    scope = fluid.Scope()
    r, = exe.run(main, feed={"x": np.ones((2, 3), "float32"), "w": np.ones((3, 4), "float32")}, fetch_list=[o],
                 scope=scope)
    np.testing.assert_array_equal(r, np.full((2, 4), 3.0))
    with pytest.raises(core.EnforceNotMet) as ei:
        exe.run(main, feed={"x": np.ones((2, 5), "float32"), "w": np.ones((3, 4), "float32")}, fetch_list=[o],
                scope=scope)
    _contains(str(ei.value), "mul", "'x'", "'w'", "[2, 5]", "[3, 4]", "created at " + site)
    # the same prepared program still works with good input afterwards
    r, = exe.run(main, feed={"x": np.ones((1, 3), "float32"), "w": np.ones((3, 2), "float32")}, fetch_list=[o],
                 scope=scope)
    np.testing.assert_array_equal(r, np.full((1, 2), 3.0))
    _good_run(exe)


def test_feed_that_changes_shape_fails_in_sum_at_run_time(exe):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[-1, -1], dtype="float32", append_batch_size=False)
        y = fluid.layers.data(name="y", shape=[-1, -1], dtype="float32", append_batch_size=False)
        o = fluid.layers.sums([x, y]); site = _site()  # noqa: E702
    scope = fluid.Scope()
    ones = lambda *s: np.ones(s, "float32")  # noqa: E731
    r, = exe.run(main, feed={"x": ones(2, 3), "y": ones(2, 3)}, fetch_list=[o], scope=scope)
    np.testing.assert_array_equal(r, np.full((2, 3), 2.0))
    with pytest.raises(core.EnforceNotMet) as ei:
        exe.run(main, feed={"x": ones(2, 3), "y": ones(2, 4)}, fetch_list=[o], scope=scope)
    _contains(str(ei.value), "sum", "'x'", "'y'", "[2, 3]", "[2, 4]", "created at " + site)
    r, = exe.run(main, feed={"x": ones(5, 1), "y": ones(5, 1)}, fetch_list=[o], scope=scope)
    np.testing.assert_array_equal(r, np.full((5, 1), 2.0))
    _good_run(exe)


def test_cross_entropy_label_out_of_range(exe):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        p = fluid.layers.data(name="p", shape=[3], dtype="float32")
        lab = fluid.layers.data(name="lab", shape=[1], dtype="int64")
        o = fluid.layers.cross_entropy(p, lab); site = _site()  # noqa: E702
    probs = np.full((2, 3), 1 / 3, "float32")
    scope = fluid.Scope()
    with pytest.raises(core.EnforceNotMet) as ei:
        exe.run(main, feed={"p": probs, "lab": np.array([[1], [7]], "int64")}, fetch_list=[o], scope=scope)
    _contains(str(ei.value), "cross_entropy", "7", "created at " + site)
    r, = exe.run(main, feed={"p": probs, "lab": np.array([[1], [2]], "int64")}, fetch_list=[o], scope=scope)
    np.testing.assert_allclose(r.ravel(), [np.log(3)] * 2, rtol=1e-6)
    _good_run(exe)


def test_runtime_error_inside_a_sub_scope_leaves_no_scope_behind(exe):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = main.global_block().create_var(name="v", shape=[2], dtype="float32")
        o = fluid.layers.scale(v)
    scope = fluid.Scope()
    gc.collect()  # live_scopes is process-wide: finalise earlier tests' garbage first
    live = core.live_scopes()
    for _ in range(20):
        with pytest.raises(core.EnforceNotMet):
            exe.run(main, fetch_list=[o], scope=scope)
    assert core.live_scopes() == live + 1 and scope.num_kids() == 1  # one reused kid


# ---------------------------------------------------------------- nothing crashes or hangs

CRASH_CASES = r'''
import numpy as np, fluidlite as fluid
from fluidlite import core

def expect_error(f, kinds=(core.EnforceNotMet, TypeError, ValueError, IndexError, BufferError)):
    try:
        f()
    except kinds:
        return
    raise AssertionError("no error")

exe = fluid.Executor(fluid.CPUPlace())
main = fluid.Program()
with fluid.program_guard(main, fluid.Program()):
    x = fluid.layers.data(name="x", shape=[4], dtype="float32")
    y = fluid.layers.scale(x, scale=2.0)
b = main.global_block()
big = np.arange(65536 * 8, dtype="float32").reshape(65536, 8)

# non-contiguous feed / set (a freed temporary was read)
r, = exe.run(main, feed={"x": big[:, ::2]}, fetch_list=[y])
assert np.array_equal(r, big[:, ::2] * 2)
t = core.LoDTensor(); t.set(big[:, ::2]); assert np.array_equal(np.array(t), big[:, ::2])
# a failed set leaves dims ahead of the buffer
t = core.LoDTensor(); t.set(np.zeros(2, "float32"))
expect_error(lambda: t.set(np.zeros(10 ** 7, "float32"), core.cuda_place(0)))
expect_error(lambda: np.array(t))
expect_error(lambda: memoryview(t))
# sizes that overflow
m1 = fluid.Program()
with fluid.program_guard(m1, fluid.Program()):
    f = fluid.layers.fill_constant(shape=[2 ** 31, 2 ** 31], dtype="float32", value=1.0)
expect_error(lambda: exe.run(m1, fetch_list=[f]))
m1 = fluid.Program()
with fluid.program_guard(m1, fluid.Program()):
    g = fluid.layers.fill_constant(shape=[2 ** 62 + 1], dtype="float32", value=1.0)
expect_error(lambda: exe.run(m1, fetch_list=[g]))
# None / @EMPTY@ where an object is expected
expect_error(lambda: b.desc.infer_shape(None))
expect_error(lambda: core.PreparedProgram(main.desc, 0, None, core.cpu_place(), [], []))
m2 = fluid.Program(); b2 = m2.global_block()
b2.create_var(name="o", shape=[1], dtype="float32")
b2.append_op(type="feed", inputs={"X": ["@EMPTY@"]}, outputs={"Out": ["o"]})
expect_error(lambda: exe.run(m2))
m3 = fluid.Program(); b3 = m3.global_block()
b3.create_var(name="i", shape=[1], dtype="float32"); b3.create_var(name="o", shape=[1], dtype="float32")
expect_error(lambda: b3.append_op(type="scale", inputs={"X": ["@EMPTY@"]}, outputs={"Out": ["o"]}))
b3.append_op(type="fill_constant", outputs={"Out": ["i"]}, attrs={"shape": [1], "value": 2.0})
b3.append_op(type="scale", inputs={"X": ["i"]}, outputs={"Out": ["@EMPTY@"]})
expect_error(lambda: exe.run(m3))
b3._remove_op(1)
b3.append_op(type="fetch", inputs={"X": ["i"]}, outputs={"Out": ["@EMPTY@"]})
expect_error(lambda: exe.run(m3))
# dangling kid scopes
s = core.Scope(); k = s.new_scope(); s.drop_kids()
expect_error(lambda: k.var("x"))
expect_error(lambda: k.new_scope())
expect_error(lambda: exe.run(main, feed={"x": np.ones((1, 4), "float32")}, fetch_list=[y], scope=k))
# names that collide with the executor's feed/fetch variables
m4 = fluid.Program()
with fluid.program_guard(m4, fluid.Program()):
    fv = fluid.layers.data(name="feed", shape=[2], dtype="float32")
    fo = fluid.layers.scale(fv)
expect_error(lambda: exe.run(m4, feed={"feed": np.ones((1, 2), "float32")}, fetch_list=[fo]))
# garbage attributes / dtypes from Python
expect_error(lambda: b.ops[0].desc.set_attr("scale", np.ones(3)),
             (core.EnforceNotMet, TypeError, ValueError, RuntimeError))
m5 = fluid.Program(); b5 = m5.global_block()
b5.create_var(name="o", shape=[2], dtype="float32")
expect_error(lambda: b5.append_op(type="fill_constant", outputs={"Out": ["o"]}, attrs={"shape": [2], "dtype": 99}))
b5.append_op(type="fill_constant", outputs={"Out": ["o"]}, attrs={"shape": [2]})
b5.ops[0]._set_attr("dtype", 99)
expect_error(lambda: exe.run(m5, fetch_list=["o"]))
b5.desc.var("o").set_dtype(-7)
expect_error(lambda: exe.run(m5, fetch_list=["o"]))
# a CUDA place on a CPU-only build (core.cuda_place bypasses fluid.CUDAPlace's check)
if not core.is_compiled_with_cuda():
    gexe = fluid.Executor(core.cuda_place(0))
    expect_error(lambda: gexe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[y], scope=core.Scope()))
# the executor still works
r, = exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[y])
assert np.array_equal(r, np.full((2, 4), 2.0))
print("ALL-OK")
'''


def test_risky_inputs_in_a_subprocess_do_not_crash_or_hang():
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(fluid.__file__))))
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(fluid.__file__))) + os.pathsep + \
        env.get("PYTHONPATH", "")
    del root
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(CRASH_CASES)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, "exit code %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout, p.stderr[-4000:])
    assert "ALL-OK" in p.stdout


def test_failed_profiled_runs_do_not_leave_op_events_open(exe):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = main.global_block().create_var(name="v", shape=[2], dtype="float32")
        o = fluid.layers.scale(v)
    scope = fluid.Scope()
    core.reset_profiler()
    core.enable_profiler()
    try:
        for _ in range(300):  # more than the profiler's nesting limit (256), in case events stayed open
            with pytest.raises(core.EnforceNotMet):
                exe.run(main, fetch_list=[o], scope=scope)
        token = core.push_event("after")
        core.pop_event(token)
    finally:
        core.disable_profiler()
    events = core.collect_events()
    core.reset_profiler()
    after = [e for e in events if e[0] == "after"]
    assert len(after) == 1 and after[0][6] == 0  # recorded, and not nested under a failed op
    failed_ops = [e for e in events if e[0] == "scale"]  # the failing op's event is closed and reported
    assert len(failed_ops) == 300 and all(e[6] == failed_ops[0][6] for e in failed_ops)
