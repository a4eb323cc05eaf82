"""sequence_mask: Y[..., j] = j < X[...] against numpy written per length, maxlen from the attribute, the
MaxLenTensor input or max(X), every out_dtype the layer takes, and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest
from sequence_op_cases import run_op

DT = fluid.core.VarDesc.VarType


def mask_ref(x, maxlen, dtype):
    """One row per length: ones for j < length, zeros after."""
    flat = x.reshape(-1)
    rows = [[1 if j < v else 0 for j in range(maxlen)] for v in flat]
    return np.array(rows, dtype).reshape(x.shape + (maxlen,))


@pytest.mark.parametrize("x, maxlen", [
    (np.array([3, 1, 1, 0], "int64"), 4),              # Fluid's example
    (np.array([[2, 0], [5, 1]], "int32"), 6),          # rank 2, lengths beyond nothing
    (np.array([7, 2], "int64"), 3),                    # lengths beyond maxlen: all ones
    (np.array([1.5, 2.0, -1.0], "float32"), 3),        # float lengths: j < 1.5 is j <= 1; negative: none
    (np.array([4.0], "float64"), 5),                   # a single length
])
def test_mask_attribute(x, maxlen):
    OpTest("sequence_mask", {"X": x}, {"Y": mask_ref(x, maxlen, "int64")},
           {"maxlen": maxlen, "out_dtype": int(DT.INT64)}).check_output()


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64", "float32", "float64"])
def test_mask_max_of_x_and_out_dtypes(dtype):
    x = np.array([[3, 0, 2], [1, 4, 4]], "int64")
    vt = fluid.framework.convert_np_dtype_to_dtype_(dtype)
    OpTest("sequence_mask", {"X": x}, {"Y": mask_ref(x, 4, dtype)}, {"out_dtype": int(vt)}).check_output()


def test_mask_max_len_tensor_wins_over_the_attribute():
    x = np.array([2, 5, 0], "int32")
    for lt in ("int32", "int64"):
        OpTest("sequence_mask", {"X": x, "MaxLenTensor": np.array([3], lt)}, {"Y": mask_ref(x, 3, "float32")},
               {"maxlen": 7, "out_dtype": int(DT.FP32)}).check_output()
    # Empty X with maxlen = max(X): a [0, 0] mask.
    got = run_op("sequence_mask", {"X": np.zeros(0, "int64")}, ["Y"], {"out_dtype": int(DT.INT64)})["Y"]
    assert np.array(got).shape == (0, 0)


def test_mask_errors():
    x = np.array([1, 2], "int64")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_mask: MaxLenTensor 'in_MaxLenTensor_maxlentensor_var'"
                                                       r" holds 0; the mask width must be > 0"):
        run_op("sequence_mask", {"X": x, "MaxLenTensor": np.array([0], "int32")}, ["Y"], {"out_dtype": int(DT.INT64)})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_mask: attribute 'maxlen' = 0 is invalid: must be < 0 "
                                                       r"\(max\(X\)\) or >= 1"):
        run_op("sequence_mask", {"X": x}, ["Y"], {"maxlen": 0, "out_dtype": int(DT.INT64)})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"op sequence_mask: attribute 'out_dtype' is required"):
        run_op("sequence_mask", {"X": x}, ["Y"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_mask: the largest value 3e\+10 of X 'in_X_x_var' is "
                                                       r"not a valid mask width"):
        run_op("sequence_mask", {"X": np.array([3e10], "float64")}, ["Y"], {"out_dtype": int(DT.INT64)})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_mask: MaxLenTensor 'in_MaxLenTensor_maxlentensor_var'"
                                                       r" \[1\] must be int32 or int64, got float32"):
        run_op("sequence_mask", {"X": x, "MaxLenTensor": np.array([2], "float32")}, ["Y"],
               {"out_dtype": int(DT.INT64)})


def test_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3], dtype="int64", append_batch_size=False)
        n = fluid.layers.data("n", shape=[1], dtype="int32", append_batch_size=False)
        a = fluid.layers.sequence_mask(x)
        b = fluid.layers.sequence_mask(x, maxlen=5, dtype="float32")
        c = fluid.layers.sequence_mask(x, maxlen=n, dtype="bool")
        assert a.shape == (3, -1) and b.shape == (3, 5) and c.shape == (3, -1)
        assert a.dtype == DT.INT64 and b.dtype == DT.FP32 and c.dtype == DT.BOOL and a.stop_gradient
        with pytest.raises(TypeError, match=r"sequence_mask: 'x' must be a Variable, got list"):
            fluid.layers.sequence_mask([1, 2])
    xv = np.array([2, 0, 4], "int64")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "n": np.array([2], "int32")}, fetch_list=[a, b, c])
    np.testing.assert_array_equal(got[0], mask_ref(xv, 4, "int64"))
    np.testing.assert_array_equal(got[1], mask_ref(xv, 5, "float32"))
    np.testing.assert_array_equal(got[2], mask_ref(xv, 2, "bool"))
