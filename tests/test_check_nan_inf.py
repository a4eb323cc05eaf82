"""FLAGS_check_nan_inf: off by default; on (fluid.set_flags or the environment variable), the first op whose
float output holds a NaN or an Inf raises naming the op, the output variable, its creation site and the
first bad element; the profiler shows the check's cost as "check_nan_inf" events."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import unique_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.basename(__file__)


@pytest.fixture
def check_nan_inf():
    fluid.set_flags({"FLAGS_check_nan_inf": True})
    yield
    fluid.set_flags({"FLAGS_check_nan_inf": False})


def _log_then_scale(dtype="float32", shape=(2, 4)):
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=list(shape), dtype=dtype, append_batch_size=False)
        y = fluid.layers.log(x)  # the line the error names
        z = fluid.layers.scale(y, scale=2.0)
    return main, y, z


def test_off_by_default_and_results_pass_through():
    assert fluid.get_flags("FLAGS_check_nan_inf") == {"FLAGS_check_nan_inf": False}
    main, y, z = _log_then_scale()
    xv = np.array([[1, 2, -1, 0], [1, 1, 1, 1]], "float32")
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = np.log(xv) * 2
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[z])
    np.testing.assert_array_equal(got, ref)


def test_nan_names_op_output_site_and_first_index(check_nan_inf):
    main, y, z = _log_then_scale()
    line = _line_of("y = fluid.layers.log(x)")
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.array([[1, 2, 3, 4], [5, -1, 0, -2]], "float32")  # NaN at [1, 1] first, then -Inf, NaN
    msg = (r"op log: output Out variable 'log_0.tmp_0' \[2, 4\] contains NaN: first at flat index 5 "
           r"\(element \[1, 1\], value nan\) \(FLAGS_check_nan_inf\) \[op log created at .*%s:%d\]" % (HERE, line))
    with pytest.raises(fluid.core.EnforceNotMet, match=msg):
        exe.run(main, feed={"x": xv}, fetch_list=[z])
    # the executor and the scope are fine afterwards
    (got,) = exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[z])
    np.testing.assert_array_equal(got, np.zeros((2, 4)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inf_found_in_a_large_tensor(check_nan_inf, dtype):
    main, y, z = _log_then_scale(dtype, shape=(10, 1000))
    xv = np.ones((10, 1000), dtype)
    xv[7, 321] = 0  # log(0) = -inf, past the first chunk of the vectorised scan
    xv[9, 999] = -1
    with pytest.raises(fluid.core.EnforceNotMet, match=r"op log: output Out variable 'log_0.tmp_0' \[10, 1000\] "
                                                       r"contains Inf: first at flat index 7321 \(element \[7, 321\], "
                                                       r"value -inf\)"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[z])


def test_integer_outputs_are_not_checked_and_profiler_shows_the_cost(check_nan_inf):
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.cast(fluid.layers.scale(x, scale=3.0), "int32")
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        (got,) = exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y])
    np.testing.assert_array_equal(got, np.full((2, 3), 3))
    names = [e["name"] for e in fluid.profiler.events()]
    assert names.count("check_nan_inf") == names.count("scale") + names.count("cast") + names.count("feed") + \
        names.count("fetch") > 0


def test_no_check_events_when_off():
    main, y, z = _log_then_scale()
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[z])
    names = [e["name"] for e in fluid.profiler.events()]
    # log and scale run as one fused op when the check is off (fuse_elementwise_chains), as themselves when it is on
    assert "fused_elementwise" in names and "check_nan_inf" not in names


def test_environment_variable_turns_it_on():
    code = ("import fluidlite as fluid; print(fluid.get_flags(['FLAGS_check_nan_inf'])['FLAGS_check_nan_inf'])")
    env = dict(os.environ, PYTHONPATH=ROOT, FLAGS_check_nan_inf="1")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "True", r.stderr


def test_set_flags_rejects_unknown_names_and_bad_values():
    with pytest.raises(ValueError, match="unknown flag 'FLAGS_nope' \\(fluidlite supports: FLAGS_check_nan_inf\\)"):
        fluid.set_flags({"FLAGS_nope": True})
    with pytest.raises(TypeError, match="flag FLAGS_check_nan_inf expects a bool, got 'yes'"):
        fluid.set_flags({"FLAGS_check_nan_inf": "yes"})
    assert fluid.get_flags("FLAGS_check_nan_inf") == {"FLAGS_check_nan_inf": False}


def _line_of(text):
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if text in line and "_line_of" not in line:
                return i
    raise AssertionError(text)
