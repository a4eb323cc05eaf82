"""fill_constant_batch_size_like: a constant tensor of `shape` whose dim output_dim_idx is Input's dim
input_dim_idx (StaticRNN boots its memories with it): values and shapes against numpy, the batch size taken at
run time, no gradient, index errors at build time."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from fluidlite.framework import convert_np_dtype_to_dtype_
from op_test import OpTest


def vt(dtype):
    return int(convert_np_dtype_to_dtype_(dtype))


# Input shape, shape attribute, input_dim_idx, output_dim_idx, expected Out shape
CASES = [
    ((4, 3), [-1, 7], 0, 0, (4, 7)),
    ((4, 3), [5, 1, 2], 0, 1, (5, 4, 2)),
    ((2, 6, 3), [9, 2], 1, 0, (6, 2)),
    ((2, 6, 3), [-1], 2, 0, (3,)),
    ((1, 5), [2, 2], 1, 1, (2, 5)),
]


@pytest.mark.parametrize("in_shape,shape,in_idx,out_idx,want", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_values_and_shape(in_shape, shape, in_idx, out_idx, want, dtype):
    x = np.zeros(in_shape, "float32")
    value = -1.5 if dtype.startswith("float") else 4.0
    OpTest("fill_constant_batch_size_like", {"Input": x}, {"Out": np.full(want, value, dtype)},
           {"shape": shape, "value": value, "dtype": vt(dtype), "input_dim_idx": in_idx,
            "output_dim_idx": out_idx}).check_output(atol=0, rtol=0)


def test_default_indices_and_value():
    x = np.ones((3, 8), "float64")
    OpTest("fill_constant_batch_size_like", {"Input": x}, {"Out": np.zeros((3, 2), "float32")},
           {"shape": [-1, 2]}).check_output()


def _program(dtype="float32", **attrs):
    main = fluid.Program()
    block = main.global_block()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float64")  # [-1, 3]: the batch is known when it runs
        out = block.create_var(name="boot", dtype=dtype)
        block.append_op(type="fill_constant_batch_size_like", inputs={"Input": [x]}, outputs={"Out": [out]},
                        attrs=dict({"dtype": vt(dtype)}, **attrs))
    return main, out


def test_batch_size_taken_at_run_time():
    main, out = _program(shape=[-1, 5], value=2.0)
    assert out.shape == (-1, 5) and out.dtype == core.VarDesc.VarType.FP32
    exe = fluid.Executor(fluid.CPUPlace())
    for n in (2, 7, 1):  # the output buffer is reused: shape and values follow each run's batch
        (got,) = exe.run(main, feed={"x": np.zeros((n, 3))}, fetch_list=[out])
        np.testing.assert_array_equal(got, np.full((n, 5), 2.0, "float32"))


def test_no_gradient():
    assert core.op_proto("fill_constant_batch_size_like")["grad"] == "no_gradient"
    main, out = _program(shape=[-1, 5], value=2.0)
    assert core.make_grad_ops(main.global_block().ops[-1].desc, set()) == []


@pytest.mark.parametrize("attrs,match", [
    ({"shape": [-1, 5], "input_dim_idx": 2},
     r"fill_constant_batch_size_like: input_dim_idx 2 is out of range for Input 'x' \[-1, 3\]"),
    ({"shape": [-1, 5], "output_dim_idx": 2},
     r"fill_constant_batch_size_like: output_dim_idx 2 is out of range for shape of rank 2"),
])
def test_index_errors_at_build_time(attrs, match):
    with pytest.raises(core.EnforceNotMet, match=match):
        _program(**attrs)


def test_bool_dtype_has_no_kernel():
    main, out = _program("bool", shape=[-1, 2], value=1.0)
    with pytest.raises(core.EnforceNotMet, match="fill_constant_batch_size_like.*kernel.*bool"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.zeros((2, 3))}, fetch_list=[out])
