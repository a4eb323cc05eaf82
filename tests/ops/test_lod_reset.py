"""lod_reset (kernels/lod_reset.cc) and its layers lod_reset / lod_append: Out keeps X's data and gets a new LoD
from Y's LoD, Y's values, or target_lod (replacing X's LoD, or appended below it); X@GRAD = Out@GRAD with X's LoD.
The expected LoD is computed per case from the offsets given (lengths = differences of consecutive offsets)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name
from op_test import OpTest, record_checked

L = fluid.layers


def lengths(offsets):
    """Recursive sequence lengths of one level of offsets, one sequence at a time."""
    return [offsets[i + 1] - offsets[i] for i in range(len(offsets) - 1)]


def x_data(rows, width=3, dtype="float64", seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, (rows, width)).astype(dtype)


# (name, X lod lengths or None, attrs, Y (array, lod lengths or None) or None, expected Out LoD lengths)
CASES = [
    ("target_lod replaces X's LoD", [[3, 2, 5]], {"target_lod": [0, 7, 10]}, None, [lengths([0, 7, 10])]),
    ("target_lod on a tensor without LoD", None, {"target_lod": [0, 4, 10]}, None, [lengths([0, 4, 10])]),
    ("empty and one-row sequences", [[10]], {"target_lod": [0, 0, 1, 1, 10]}, None, [lengths([0, 0, 1, 1, 10])]),
    ("a single sequence", [[3, 7]], {"target_lod": [0, 10]}, None, [[10]]),
    ("Y's values as offsets (int32)", [[3, 2, 5]], {}, (np.array([0, 2, 10], "int32"), None),
     [lengths([0, 2, 10])]),
    ("Y's values as offsets (int64, [1, n])", [[10]], {}, (np.array([[0, 5, 5, 10]], "int64"), None),
     [lengths([0, 5, 5, 10])]),
    ("Y's two-level LoD", [[3, 2, 5]], {}, (np.zeros((10, 1), "float64"), [[2, 1], [4, 2, 4]]),
     [[2, 1], [4, 2, 4]]),
    ("Y's LoD wins over append", [[3, 2, 5]], {"append": True}, (np.zeros((10, 1), "float64"), [[6, 4]]),
     [[6, 4]]),
    ("append below X's level", [[3, 2, 5]], {"target_lod": list(range(11)), "append": True}, None,
     [[3, 2, 5], [1] * 10]),
    ("append below two levels", [[1, 2], [2, 3, 5]], {"target_lod": [0, 1, 2, 4, 5, 6, 10], "append": True}, None,
     None),  # invalid: level 1 has 3 entries, the appended level 6 (checked in test_append_must_fit_x_levels)
    ("append Y's values", [[4, 6]], {"append": True}, (np.array([0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10], "int32"), None),
     [[4, 6], lengths([0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10])]),
    ("append Y's values to a tensor without LoD", None, {"append": True}, (np.array([0, 4, 6, 10], "int32"), None),
     [lengths([0, 4, 6, 10])]),
    ("append to a tensor without LoD", None, {"target_lod": [0, 3, 10], "append": True}, None, [[3, 7]]),
]


def _op_test(x_lod, attrs, y, dtype="float64"):
    x = x_data(10, dtype=dtype)
    inputs = {"X": x if x_lod is None else (x, x_lod)}
    if y is not None:
        inputs["Y"] = y[0] if y[1] is None else y
    return x, inputs


@pytest.mark.parametrize("case", [c for c in CASES if c[4] is not None], ids=lambda c: c[0])
def test_forward(case):
    _, x_lod, attrs, y, want = case
    x, inputs = _op_test(x_lod, attrs, y)
    OpTest("lod_reset", inputs, {"Out": (x, want)}, attrs).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_forward_dtypes(dtype):
    x, inputs = _op_test([[3, 2, 5]], {}, None, dtype)
    OpTest("lod_reset", inputs, {"Out": (x, [[1, 9]])}, {"target_lod": [0, 1, 10]}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("case", [c for c in CASES if c[4] is not None and c[3] is None], ids=lambda c: c[0])
def test_gradient(case):
    _, x_lod, attrs, y, _ = case
    _, inputs = _op_test(x_lod, attrs, y)
    OpTest("lod_reset", inputs, {"Out": None}, attrs).check_grad(["X"], "Out")


def test_gradient_through_y_values_and_x_grad_lod():
    """X@GRAD is Out@GRAD with X's LoD (not Out's), checked on the fetched gradient; and numerically with Y."""
    _, inputs = _op_test([[3, 2, 5]], {}, (np.array([0, 2, 10], "int32"), None))
    OpTest("lod_reset", inputs, {"Out": None}).check_grad(["X"], "Out")
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float64", lod_level=1)
        x.stop_gradient = False
        out = L.lod_reset(x, target_lod=[0, 1, 10])
        loss = L.reduce_sum(L.scale(out, 2.0))
        dx, = fluid.gradients([loss], [x])
    arr = x_data(10)
    got = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": fluid.create_lod_tensor(arr, [[3, 2, 5]], fluid.CPUPlace())}, fetch_list=[out, dx],
        return_numpy=False)
    assert got[0].recursive_sequence_lengths() == [[1, 9]]
    assert got[1].recursive_sequence_lengths() == [[3, 2, 5]] and dx.lod_level == 1
    np.testing.assert_array_equal(np.array(got[1]), np.full((10, 3), 2.0))
    record_checked("grad", "lod_reset")


# ---------------------------------------------------------------- compile time

def test_lod_level_at_build_time():
    with unique_name.guard(), fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 3], lod_level=1)
        x2 = fluid.data("x2", [-1, 3], lod_level=2)
        y0 = fluid.data("y0", [3], "int32")
        y2 = fluid.data("y2", [-1, 1], lod_level=2)
        assert L.lod_reset(x, target_lod=[0, 2, 4]).lod_level == 1
        assert L.lod_reset(x2, target_lod=[0, 2, 4]).lod_level == 1
        assert L.lod_reset(x, y0).lod_level == 1
        assert L.lod_reset(x, y2).lod_level == 2
        assert L.lod_append(x, [0, 1, 2]).lod_level == 2
        assert L.lod_append(x2, [0, 1, 2]).lod_level == 3
        assert L.lod_append(x, y0).lod_level == 2  # Y's values append a level, as at run time
        out = L.lod_reset(x, target_lod=[0, 2, 4])
        assert out.dtype == x.dtype and out.shape == x.shape


# ---------------------------------------------------------------- errors

def _run(x_lod, attrs=None, y=None, rows=10, x_shape=(-1, 3)):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", list(x_shape), "float64", lod_level=len(x_lod or []))
        inputs = {"X": x}
        feed = {"x": fluid.create_lod_tensor(x_data(rows), x_lod, fluid.CPUPlace()) if x_lod else x_data(rows)}
        if y is not None:
            yv = fluid.data("y", [-1] * y[0].ndim, str(y[0].dtype), lod_level=len(y[1] or []))
            inputs["Y"] = yv
            feed["y"] = y[0] if y[1] is None else fluid.create_lod_tensor(y[0], y[1], fluid.CPUPlace())
        out = main.global_block().create_var(name="out", dtype="float64")
        main.global_block().append_op(type="lod_reset", inputs=inputs, outputs={"Out": out}, attrs=attrs or {})
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out], return_numpy=False)[0]


@pytest.mark.parametrize("attrs, y, message", [
    ({"target_lod": [0, 4, 9]}, None, r"lod_reset: attribute target_lod \[0, 4, 9\] must end at the 10 rows of X 'x' "
                                      r"\[10, 3\]"),
    ({}, (np.array([0, 3, 12], "int32"), None),
     r"lod_reset: the new LoD \{\{0, 3, 12\}\} \(from the values of Y 'y'\) does not fit X 'x' \[10, 3\]: the last "
     r"level ends at 12 but the tensor has 10 rows"),
    ({}, (np.array([0, 6, 3, 10], "int64"), None),
     r"lod_reset: Y 'y' \[4\] holds the target LoD offsets \[0, 6, 3, 10\], which must start at 0 and never "
     r"decrease \(position 2: 6 then 3\)"),
    ({}, (np.array([1, 10], "int32"), None),
     r"lod_reset: the new LoD \{\{1, 10\}\} \(from the values of Y 'y'\) does not fit X 'x' \[10, 3\]: level 0 "
     r"starts at 1, not 0"),
    ({}, (np.array([10], "int32"), None),
     r"lod_reset: the target LoD \{10\} \(the values of Y 'y'\) must have at least 2 offsets, got 1"),
    ({}, (np.array([0, 10], "float32"), None), r"lod_reset: Y 'y' \[2\] must be int32 or int64, got float32"),
    ({}, (np.zeros((8, 1)), [[3, 5]]),
     r"lod_reset: the new LoD \{\{0, 3, 8\}\} \(from the LoD of Y 'y'\) does not fit X 'x' \[10, 3\]: the last "
     r"level ends at 8 but the tensor has 10 rows"),
], ids=["target beyond rows", "Y offsets beyond rows", "Y offsets decrease", "Y offsets from 1", "one Y offset",
        "float Y", "Y's LoD over other rows"])
def test_invalid_target_lod_is_an_error_naming_the_offsets(attrs, y, message):
    with pytest.raises(core.EnforceNotMet, match=message):
        _run([[3, 2, 5]], attrs, y)


def test_append_must_fit_x_levels():
    with pytest.raises(core.EnforceNotMet, match=r"lod_reset: the new LoD \{\{0, 1, 3\}\{0, 2, 5, 10\}"
                                                 r"\{0, 1, 2, 4, 5, 6, 10\}\} \(from attribute target_lod, appended "
                                                 r"to X's \{\{0, 1, 3\}\{0, 2, 5, 10\}\}\) does not fit X 'x' "
                                                 r"\[10, 3\]: level 1 ends at 10 but level 2 has 6 entries"):
        _run([[1, 2], [2, 3, 5]], {"target_lod": [0, 1, 2, 4, 5, 6, 10], "append": True})


def test_build_time_errors():
    with unique_name.guard(), fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 3], lod_level=1)
        block = fluid.default_main_program().global_block()
        out = block.create_var(name="out", dtype="float32")
        with pytest.raises(core.EnforceNotMet, match=r"lod_reset: Out 'out': If Input\(Y\) is not provided, the "
                                                     r"output's LoD should be specified by attribute 'target_lod'. "
                                                     r"But the size of 'target_lod' is 0."):
            block.append_op(type="lod_reset", inputs={"X": x}, outputs={"Out": out})
        for bad in ([0, 3, 2], [1, 4], [5]):
            with pytest.raises(core.EnforceNotMet, match=r"lod_reset.*target_lod.*level-0 offsets from 0, never "
                                                         r"decreasing"):
                L.lod_reset(x, target_lod=bad)
        x4 = fluid.data("x4", [4, 3])
        with pytest.raises(core.EnforceNotMet, match=r"lod_reset: attribute target_lod \[0, 2, 5\] must end at the 4 "
                                                     r"rows of X 'x4' \[4, 3\]"):
            L.lod_reset(x4, target_lod=[0, 2, 5])


def test_layer_errors():
    with unique_name.guard(), fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 3], lod_level=1)
        b = fluid.data("b", [-1, 3], "bool")
        with pytest.raises(ValueError, match="y and target_lod should not be both none."):
            L.lod_reset(x)
        with pytest.raises(TypeError, match=r"lod_reset: 'x' must be a Variable, got ndarray"):
            L.lod_reset(np.zeros((2, 3)), target_lod=[0, 2])
        with pytest.raises(TypeError, match=r"lod_reset: 'x' \(b\) must be float32 or float64 or int32 or int64, "
                                            r"got bool"):
            L.lod_reset(b, target_lod=[0, 2])
        with pytest.raises(TypeError, match=r"The type of 'y' in lod_reset must be"):
            L.lod_reset(x, y=[0, 2])
        with pytest.raises(ValueError, match=r"Input\(x\) can't be None."):
            L.lod_append(None, [0, 1])
        with pytest.raises(ValueError, match=r"Input\(level\) must be list, tuple or Variable."):
            L.lod_append(x, 3)
        with pytest.raises(TypeError, match=r"lod_append: 'x' \(b\) must be float32 or float64"):
            L.lod_append(b, [0, 1])


# ---------------------------------------------------------------- layers end to end

def test_layers_lod_reset_and_lod_append_end_to_end():
    """The layers on fed LoDTensors: Fluid's doc examples (x lengths [[2, 3, 1]], 6 rows)."""
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 1], lod_level=1)
        y = fluid.data("y", [-1, 1], lod_level=2)
        level = fluid.data("level", [3], "int32")
        a = L.lod_reset(x, target_lod=[0, 4, 6])
        b = L.lod_reset(x, y=level)
        c = L.lod_reset(x, y=y)
        d = L.lod_append(x, [0, 1, 2, 3, 4, 5, 6])
        level7 = fluid.data("level7", [-1], "int64")
        e = L.lod_append(x, level7)
    xv = np.arange(1, 7, dtype="float32").reshape(6, 1)
    feed = {"x": fluid.create_lod_tensor(xv, [[2, 3, 1]], fluid.CPUPlace()),
            "y": fluid.create_lod_tensor(xv + 0.1, [[2, 1], [2, 3, 1]], fluid.CPUPlace()),
            "level": np.array([0, 2, 6], "int32"), "level7": np.array([0, 1, 1, 3, 4, 4, 6], "int64")}
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(main, feed=feed, fetch_list=[a, b, c, d, e], return_numpy=False)
    want = [[[4, 2]], [[2, 4]], [[2, 1], [2, 3, 1]], [[2, 3, 1], [1] * 6], [[2, 3, 1], [1, 0, 2, 1, 0, 2]]]
    for t, w in zip(got, want):
        np.testing.assert_array_equal(np.array(t), xv)
        assert t.recursive_sequence_lengths() == w
    # Appending a level with as many entries as x has rows' worth of sequences is not: 3 sequences, 2 entries.
    feed["level7"] = np.array([0, 2, 6], "int64")
    with pytest.raises(core.EnforceNotMet, match=r"lod_reset: the new LoD \{\{0, 2, 5, 6\}\{0, 2, 6\}\} \(from the "
                                                 r"values of Y 'level7', appended to X's \{\{0, 2, 5, 6\}\}\) does not "
                                                 r"fit X 'x' \[6, 1\]: level 0 ends at 6 but level 1 has 2 entries"):
        exe.run(main, feed=feed, fetch_list=[e])
