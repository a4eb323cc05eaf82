"""matmul: forward against numpy (transposes, batches, broadcasting, 1-D operands, the thread-pool split),
gradients against central differences, shape errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(7)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


def _append(op_type, inputs, attrs, n_out=1):
    """block.append_op with declared float32 inputs of the given shapes."""
    main = fluid.Program()
    block = main.global_block()
    ins = {slot: [block.create_var(name="%s_%d" % (slot.lower(), i), shape=s, dtype="float32")
                  for i, s in enumerate(shapes)] for slot, shapes in inputs.items()}
    outs = {"Out": [block.create_var(name="out%d" % i, dtype="float32") for i in range(n_out)]}
    return block.append_op(type=op_type, inputs=ins, outputs=outs, attrs=attrs)


def matmul_ref(x, y, tx, ty, alpha):
    if tx:
        x = x.T if x.ndim == 1 else np.swapaxes(x, -1, -2)
    if ty:
        y = y.T if y.ndim == 1 else np.swapaxes(y, -1, -2)
    if x.ndim == 1 and tx:  # Fluid: a transposed 1-D X is a column [K, 1]
        x = x.reshape(-1, 1)
    if y.ndim == 1 and ty:  # and a transposed 1-D Y a row [1, K]
        y = y.reshape(1, -1)
    return np.atleast_1d(alpha * np.matmul(x, y))  # Fluid's Out is never 0-d


MATMUL_CASES = [
    # x shape, y shape, transpose_X, transpose_Y, alpha
    ((3, 4), (4, 5), False, False, 1.0),
    ((4, 3), (4, 5), True, False, 1.0),
    ((3, 4), (5, 4), False, True, 2.0),
    ((4, 3), (5, 4), True, True, 0.5),
    ((2, 3, 4), (2, 4, 5), False, False, 1.0),
    ((2, 4, 3), (2, 5, 4), True, True, 1.5),
    ((2, 2, 3, 4), (2, 2, 4, 1), False, False, 1.0),
    ((2, 3, 4), (4, 5), False, False, 1.0),   # Y broadcast over X's batch
    ((2, 4, 3), (5, 4), True, True, 1.0),
    ((3, 4), (2, 4, 5), False, False, 1.0),   # X broadcast over Y's batch
    ((4, 3), (3, 4, 5), True, False, -1.0),
    ((3, 4), (2, 5, 4), False, True, 1.0),
    ((4,), (4,), False, False, 1.0),          # 1-D . 1-D -> [1]
    ((4,), (4, 5), False, False, 1.0),        # 1-D X -> [5]
    ((3, 4), (4,), False, False, 1.0),        # 1-D Y -> [3]
    ((4,), (2, 4, 5), False, False, 3.0),     # 1-D X over a batch -> [2, 5]
    ((2, 3, 4), (4,), False, False, 1.0),     # 1-D Y over a batch -> [2, 3]
    ((1, 1), (1, 1), False, False, 1.0),
]


@pytest.mark.parametrize("xs,ys,tx,ty,alpha", MATMUL_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_forward(xs, ys, tx, ty, alpha, dtype):
    x, y = rand(*xs, dtype=dtype), rand(*ys, dtype=dtype)
    expect = matmul_ref(x, y, tx, ty, alpha).astype(dtype)
    t = OpTest("matmul", {"X": x, "Y": y}, {"Out": expect}, {"transpose_X": tx, "transpose_Y": ty, "alpha": alpha})
    t.check_output(atol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("xs,ys,tx,ty,alpha", MATMUL_CASES)
def test_matmul_grad(xs, ys, tx, ty, alpha):
    x, y = rand(*xs), rand(*ys)
    t = OpTest("matmul", {"X": x, "Y": y}, {"Out": matmul_ref(x, y, tx, ty, alpha)},
               {"transpose_X": tx, "transpose_Y": ty, "alpha": alpha})
    t.check_grad(["X", "Y"], "Out")


def test_matmul_one_sided_grads():
    x, y = rand(2, 3, 4), rand(4, 5)
    t = OpTest("matmul", {"X": x, "Y": y}, {"Out": x @ y}, {})
    t.check_grad(["X"], "Out", no_grad_set={"in_Y_y_var@GRAD"})
    t.check_grad(["Y"], "Out", no_grad_set={"in_X_x_var@GRAD"})


def test_matmul_transposed_1d_x_keeps_rows():
    # Fluid: a 1-D X with transpose_X is a column [K, 1]; Out keeps its K rows.
    x, y = rand(3), rand(1, 5)
    OpTest("matmul", {"X": x, "Y": y}, {"Out": x.reshape(3, 1) @ y}, {"transpose_X": True}).check_output()


def test_matmul_layer_shapes():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")  # [-1, 3, 4]
        y = fluid.layers.data("y", shape=[5, 4], dtype="float32", append_batch_size=False)
        out = fluid.layers.matmul(x, y, transpose_y=True, alpha=2.0)
        assert out.shape == (-1, 3, 5)
    xv, yv = rand(6, 3, 4, dtype="float32"), rand(5, 4, dtype="float32")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "y": yv}, fetch_list=[out])
    np.testing.assert_allclose(got, 2 * xv @ yv.T, rtol=1e-5, atol=1e-5)


def test_matmul_inner_dim_mismatch():
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"matmul: X 'x_0' \[3, 4\] \(transpose_X=false\) and Y 'y_0' \[3, 4\] "
                             r"\(transpose_Y=false\) have incompatible inner dims 4 and 3"):
        _append("matmul", {"X": [(3, 4)], "Y": [(3, 4)]}, {})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"matmul: .*transpose_X=true.*inner dims 3 and 4"):
        _append("matmul", {"X": [(3, 4)], "Y": [(4, 5)]}, {"transpose_X": True, "transpose_Y": False, "alpha": 1.0})


def test_matmul_batch_mismatch():
    with pytest.raises(fluid.core.EnforceNotMet, match=r"matmul: X 'x_0' \[2, 3, 4\] and Y 'y_0' \[3, 4, 5\] have "
                                                       r"different batch dims \[2\] and \[3\]"):
        _append("matmul", {"X": [(2, 3, 4)], "Y": [(3, 4, 5)]}, {})


def test_matmul_large_batched_matches_numpy():
    # Exercises OpenBLAS's strided batch path on bigger blocks (float32).
    x, y = rand(8, 64, 96, dtype="float32"), rand(8, 96, 48, dtype="float32")
    OpTest("matmul", {"X": x, "Y": y}, {"Out": x @ y}, {}).check_output(atol=1e-4, rtol=1e-4)


# Products of >= 2 MFLOP are split across the thread pool (by rows when M >= N, else by columns, in
# 16-wide blocks with a ragged last one); batched products spread over the pool.
SPLIT_CASES = [
    ((100, 90), (90, 130), False, False),   # by columns, 9 blocks
    ((90, 100), (130, 90), True, True),      # by columns, both operands transposed
    ((150, 90), (70, 90), False, True),      # by rows, Y transposed
    ((90, 150), (90, 70), True, False),      # by rows, X transposed
    ((4, 70, 80), (4, 80, 60), False, False),  # a batch of 0.67 MFLOP products
]


@pytest.mark.parametrize("xs,ys,tx,ty", SPLIT_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_split_across_threads(xs, ys, tx, ty, dtype):
    x, y = rand(*xs, dtype=dtype), rand(*ys, dtype=dtype)
    expect = matmul_ref(x.astype("float64"), y.astype("float64"), tx, ty, 1.0)
    t = OpTest("matmul", {"X": x, "Y": y}, {"Out": expect.astype(dtype)},
               {"transpose_X": tx, "transpose_Y": ty, "alpha": 1.0})
    t.check_output(atol=1e-4 if dtype == "float32" else 1e-11, rtol=1e-5 if dtype == "float32" else 1e-12)
