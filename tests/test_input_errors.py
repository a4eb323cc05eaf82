"""Careless inputs get a clear error or the right result: big-endian and strided feeds, a zero-stride feed
too large to copy, a crafted fetch column, a scope or fetch_list of the wrong kind, layers given shapes
they cannot use, bad FLUIDLITE_NUM_THREADS / GLOG_v values."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fluidlite as fluid


def _scale_program(shape, dtype="float32"):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=shape, dtype=dtype, append_batch_size=False)
        y = fluid.layers.scale(x, scale=2.0)
    return main, y


@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i4", ">i8"])
def test_big_endian_feed_is_read_by_value(dtype):
    native = np.dtype(dtype).newbyteorder("=")
    main, y = _scale_program([4], native.name)
    out, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.array([1, 2, 3, 4], dtype)}, fetch_list=[y])
    assert out.dtype == native
    np.testing.assert_array_equal(out, [2, 4, 6, 8])


@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i8", "<f4"])
def test_lodtensor_set_converts_byte_order(dtype):
    t = fluid.core.LoDTensor()
    t.set(np.array([[1.5 if "f" in dtype else 1, 2], [3, 4]], dtype), fluid.CPUPlace())
    got = np.array(t)
    assert got.dtype == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(got, np.array([[1.5 if "f" in dtype else 1, 2], [3, 4]]))


def test_strided_and_small_zero_stride_feeds_are_copied():
    main, y = _scale_program([4])
    exe = fluid.Executor(fluid.CPUPlace())
    out, = exe.run(main, feed={"x": np.arange(8, dtype="float32")[::2]}, fetch_list=[y])
    np.testing.assert_array_equal(out, [0, 4, 8, 12])
    out, = exe.run(main, feed={"x": np.broadcast_to(np.float32(1.5), (4,))}, fetch_list=[y])
    np.testing.assert_array_equal(out, [3, 3, 3, 3])


def test_huge_zero_stride_feed_names_the_feed_and_its_size():
    main, y = _scale_program([-1])
    huge = np.broadcast_to(np.float32(1), (2 ** 33,))  # 32 GiB if made contiguous
    with pytest.raises(ValueError, match=r"feed 'x' is a non-contiguous float32 array of shape \(8589934592,\): its "
                                         r"contiguous copy would take 32768 MiB"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": huge}, fetch_list=[y])


def test_crafted_fetch_column_is_bounded_by_the_fetch_list():
    main, y = _scale_program([4])
    block = main.global_block()
    block.create_var(name="fetch", type=fluid.core.VarDesc.VarType.FETCH_LIST)
    block.append_op(type="fetch", inputs={"X": [y]}, outputs={"Out": ["fetch"]}, attrs={"col": 30000000})
    msg = r"fetch: column 30000000 of variable 'scale_\d+.tmp_0' is out of range: the fetch list 'fetch' has 1 entries"
    with pytest.raises(fluid.core.EnforceNotMet, match=msg):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones(4, "float32")}, fetch_list=[y])


def test_scope_of_the_wrong_type_is_a_type_error():
    main, y = _scale_program([4])
    with pytest.raises(TypeError, match="Executor.run: scope must be a fluidlite Scope, got str"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones(4, "float32")}, fetch_list=[y], scope="x")


def test_single_fetch_target_is_a_list_of_one():
    # Fluid 1.6+'s _check_fetch_list: a lone Variable or name is wrapped (it was iterated char by char).
    main, y = _scale_program([4])
    exe = fluid.Executor(fluid.CPUPlace())
    for target in (y, y.name):
        out = exe.run(main, feed={"x": np.ones(4, "float32")}, fetch_list=target)
        assert isinstance(out, list) and len(out) == 1
        np.testing.assert_array_equal(out[0], [2, 2, 2, 2])


def test_batch_norm_on_rank_1_input():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data(name="x", shape=[5], dtype="float32", append_batch_size=False)
        with pytest.raises(ValueError, match=r"batch_norm: input x must have at least 2 dims \(a batch of channels\), "
                                             r"got shape \[5\]"):
            fluid.layers.batch_norm(x)


@pytest.mark.parametrize("filter_size", [0, (3, 0), (-1, 2)])
def test_conv2d_non_positive_filter_size(filter_size):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data(name="img", shape=[3, 8, 8], dtype="float32")
        with pytest.raises(ValueError, match=r"conv2d: filter_size must be positive, got \["):
            fluid.layers.conv2d(x, num_filters=4, filter_size=filter_size)


def _stderr_of_import(env, code="import fluidlite as f; print(f.core.get_num_threads())"):
    full = dict(os.environ, **env)
    full.pop("OPENBLAS_NUM_THREADS", None)
    r = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip(), r.stderr


@pytest.mark.parametrize("value", ["0", "-1", "abc", "2.5"])
def test_bad_num_threads_is_reported(value):
    out, err = _stderr_of_import({"FLUIDLITE_NUM_THREADS": value})
    assert int(out) >= 1
    assert "fluidlite: ignoring FLUIDLITE_NUM_THREADS='%s': not an integer in [1, 256]; using %s threads" % (
        value, out) in err


def test_good_num_threads_is_used_quietly():
    out, err = _stderr_of_import({"FLUIDLITE_NUM_THREADS": "3"})
    assert out == "3" and "FLUIDLITE_NUM_THREADS" not in err


@pytest.mark.parametrize("value", ["1e20", "99999999999999", "x"])
def test_bad_glog_v_is_reported_and_ignored(value):
    out, err = _stderr_of_import({"GLOG_v": value}, "import fluidlite as f; print(f.log.get_vlog_level())")
    assert out == "0"
    assert "fluidlite: ignoring GLOG_v='%s': not an integer" % value in err


@pytest.mark.parametrize("entry", ["executor=99999999999", "executor=1e2", "executor="])
def test_bad_glog_vmodule_level_is_reported_and_ignored(entry):
    # The same strict parse as GLOG_v (csrc/parse_int.h): an overflowing level was truncated before.
    out, err = _stderr_of_import({"GLOG_vmodule": entry}, "import fluidlite as f; print(repr(f.core.get_vmodule()))")
    assert out == "''"
    assert "fluidlite: ignoring GLOG_vmodule: GLOG_vmodule entry '%s' has a non-integer level" % entry in err
