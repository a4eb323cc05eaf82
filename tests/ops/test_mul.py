"""mul: forward against numpy, gradients against central differences, shape errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(7)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


MUL_CASES = [
    # x shape, y shape, x_num_col_dims, y_num_col_dims
    ((3, 4), (4, 5), 1, 1),
    ((1, 4), (4, 1), 1, 1),
    ((2, 3, 4), (12, 5), 1, 1),
    ((2, 3, 4), (4, 5), 2, 1),
    ((2, 3, 4, 2), (4, 2, 3, 2), 2, 2),
    ((5, 1, 6), (6, 2, 2), 2, 1),
]


def mul_ref(x, y, xn, yn):
    x2 = x.reshape(int(np.prod(x.shape[:xn])), -1)
    y2 = y.reshape(int(np.prod(y.shape[:yn])), -1)
    return (x2 @ y2).reshape(x.shape[:xn] + y.shape[yn:])


@pytest.mark.parametrize("xs,ys,xn,yn", MUL_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mul_forward(xs, ys, xn, yn, dtype):
    x, y = rand(*xs, dtype=dtype), rand(*ys, dtype=dtype)
    t = OpTest("mul", {"X": x, "Y": y}, {"Out": mul_ref(x, y, xn, yn)}, {"x_num_col_dims": xn, "y_num_col_dims": yn})
    t.check_output(atol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("xs,ys,xn,yn", MUL_CASES)
def test_mul_grad(xs, ys, xn, yn):
    x, y = rand(*xs), rand(*ys)
    t = OpTest("mul", {"X": x, "Y": y}, {"Out": mul_ref(x, y, xn, yn)}, {"x_num_col_dims": xn, "y_num_col_dims": yn})
    t.check_grad(["X", "Y"], "Out")
    t.check_grad(["X"], "Out", no_grad_set={"in_Y_y_var@GRAD"})
    t.check_grad(["Y"], "Out", no_grad_set={"in_X_x_var@GRAD"})


def test_mul_layer_with_unknown_batch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")  # [-1, 3, 4]
        y = fluid.layers.data("y", shape=[4, 6], dtype="float32", append_batch_size=False)
        out = fluid.layers.mul(x, y, x_num_col_dims=2)
        assert out.shape == (-1, 3, 6)
    xv, yv = rand(2, 3, 4, dtype="float32"), rand(4, 6, dtype="float32")
    exe = fluid.Executor(fluid.CPUPlace())
    got, = exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[out])
    np.testing.assert_allclose(got, xv @ yv, rtol=1e-5, atol=1e-6)


def _append(op_type, inputs, attrs, n_out=1):
    """block.append_op with declared float32 inputs of the given shapes."""
    main = fluid.Program()
    block = main.global_block()
    ins = {slot: [block.create_var(name="%s_%d" % (slot.lower(), i), shape=s, dtype="float32")
                  for i, s in enumerate(shapes)] for slot, shapes in inputs.items()}
    outs = {"Out": [block.create_var(name="out%d" % i, dtype="float32") for i in range(n_out)]}
    return block.append_op(type=op_type, inputs=ins, outputs=outs, attrs=attrs)


def test_mul_inner_dim_mismatch():
    with pytest.raises(fluid.core.EnforceNotMet, match=r"mul: X 'x_0' \[3, 4\].*Y 'y_0' \[5, 6\].*4 and 5 differ"):
        _append("mul", {"X": [(3, 4)], "Y": [(5, 6)]}, {})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"mul: X 'x_0' \[2, 3, 4\].*x_num_col_dims=2.*\[2, 3, 3\]"):
        _append("mul", {"X": [(2, 3, 4)], "Y": [(2, 3, 3)]}, {"x_num_col_dims": 2, "y_num_col_dims": 1})


def test_mul_num_col_dims_out_of_range():
    with pytest.raises(fluid.core.EnforceNotMet, match=r"mul: x_num_col_dims=2 is out of range \[1, 2\).*'x_0'"):
        _append("mul", {"X": [(3, 4)], "Y": [(4, 6)]}, {"x_num_col_dims": 2})
