"""sequence_reshape: forward against numpy written per sequence (each sequence's values re-cut into rows of
new_dim), the output LoD (two levels included), the gradient, the layer and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest
from sequence_op_cases import offsets, run_op

RNG = np.random.RandomState(8)


def reshape_ref(x, lens, new_dim):
    """Each sequence's values, in order, as rows of new_dim; returns (Out, Out's lengths)."""
    off = offsets(lens)
    parts = [x[off[i]:off[i + 1]].reshape(-1, new_dim) for i in range(len(lens))]
    return np.concatenate(parts), [len(p) for p in parts]


@pytest.mark.parametrize("lens, width, new_dim", [
    ([2, 4], 2, 4),              # Fluid's example: [[0, 2, 6]] -> [[0, 1, 3]]
    ([3, 0, 1], 4, 2),           # an empty sequence; rows get narrower
    ([6], 2, 3),                 # a single sequence
    ([1, 1], 6, 6),              # one-element sequences, width unchanged
])
def test_reshape(lens, width, new_dim):
    x = RNG.uniform(-1, 1, (sum(lens), width))
    out, out_lens = reshape_ref(x, lens, new_dim)
    t = OpTest("sequence_reshape", {"X": (x, [lens])}, {"Out": (out, [out_lens])}, {"new_dim": new_dim})
    t.check_output()
    t.check_grad(["X"], "Out")


def test_reshape_two_levels_and_integers():
    x = np.arange(24, dtype="int32").reshape(6, 4)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence 1 of X 'in_X_x_var' \[6, 4\] LoD \{\{0, 2, 3\}"
                                                       r"\{0, 2, 3, 6\}\} \(rows \[2, 3\), 1 x 4 = 4 values\) does not "
                                                       r"divide into rows of new_dim = 8"):
        run_op("sequence_reshape", {"X": (x, [[2, 1], [2, 1, 3]])}, ["Out"], {"new_dim": 8})
    out, out_lens = reshape_ref(x, [2, 1, 3], 2)
    for dtype in ("int32", "int64"):
        OpTest("sequence_reshape", {"X": (x.astype(dtype), [[2, 1], [2, 1, 3]])},
               {"Out": (out.astype(dtype), [[2, 1], out_lens])}, {"new_dim": 2}).check_output()


def test_reshape_errors():
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_reshape: X 'in_X_x_var' \[4, 2\] must be a LoDTensor "
                                                       r"with at least 1 LoD level"):
        run_op("sequence_reshape", {"X": np.zeros((4, 2), "float32")}, ["Out"], {"new_dim": 4})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_reshape: attribute 'new_dim' = 0 is invalid: must "
                                                       r"be >= 1"):
        run_op("sequence_reshape", {"X": (np.zeros((4, 2), "float32"), [[4]])}, ["Out"], {"new_dim": 0})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_reshape: X 'in_X_x_var' \[4, 2, 1\] must have rank "
                                                       r"2 \[rows, D\]"):
        run_op("sequence_reshape", {"X": (np.zeros((4, 2, 1), "float32"), [[4]])}, ["Out"], {"new_dim": 4})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"op sequence_reshape: attribute 'new_dim' is required"):
        run_op("sequence_reshape", {"X": (np.zeros((4, 2), "float32"), [[4]])}, ["Out"])


def test_layer_and_gradient():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[6], dtype="float32", lod_level=1)
        x.stop_gradient = False
        out = fluid.layers.sequence_reshape(x, new_dim=3)
        assert out.shape == (-1, 3) and out.lod_level == 1
        loss = fluid.layers.reduce_sum(fluid.layers.square(out))
        dx, = fluid.gradients([loss], [x])
        with pytest.raises(TypeError, match=r"fluid.layers.sequence_reshape: 'input' \(b\) must be float32 or "
                                            r"float64 or int32 or int64, got bool"):
            fluid.layers.sequence_reshape(fluid.layers.data("b", shape=[2], dtype="bool"), 1)
    xv = RNG.uniform(-1, 1, (3, 6)).astype("float32")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": (xv, [[1, 2]])}, fetch_list=[out, dx],
                                               return_numpy=False)
    np.testing.assert_array_equal(np.array(got[0]), xv.reshape(6, 3))
    assert got[0].recursive_sequence_lengths() == [[2, 4]]
    np.testing.assert_allclose(np.array(got[1]), 2 * xv, rtol=1e-6)
    assert got[1].recursive_sequence_lengths() == [[1, 2]]
