"""sequence_concat: forward against numpy written per sequence, the output LoD, gradients, the layer and the errors
(inputs whose sequence counts or upper LoD levels differ)."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest
from sequence_op_cases import offsets, run_op

RNG = np.random.RandomState(5)


def concat_ref(xs, lens):
    """Out's sequence i = sequence i of xs[0], then of xs[1], ...; returns (Out, Out's lengths)."""
    offs = [offsets(lj) for lj in lens]
    parts, out_lens = [], []
    for i in range(len(lens[0])):
        for x, off in zip(xs, offs):
            parts.append(x[off[i]:off[i + 1]])
        out_lens.append(sum(lj[i] for lj in lens))
    return np.concatenate(parts), out_lens


@pytest.mark.parametrize("lens", [
    [[3, 2], [2, 2]],                      # Fluid's layer example
    [[0, 2, 1], [2, 0, 1], [1, 1, 0]],     # empty sequences, three inputs
    [[4], [1]],                            # a single sequence
    [[1, 1, 1], [1, 1, 1]],                # one-element sequences
])
def test_concat(lens):
    xs = [RNG.uniform(-1, 1, (sum(lj), 2, 2)) for lj in lens]
    out, out_lens = concat_ref(xs, lens)
    t = OpTest("sequence_concat", {"X": [("x%d" % j, (x, [lj])) for j, (x, lj) in enumerate(zip(xs, lens))]},
               {"Out": (out, [out_lens])})
    t.check_output()
    t.check_grad(["X"], "Out")


def test_concat_two_levels_keeps_the_upper_level():
    upper, lens = [2, 1], [[1, 2, 0], [2, 1, 3]]
    xs = [RNG.uniform(-1, 1, (sum(lj), 3)) for lj in lens]
    out, out_lens = concat_ref(xs, lens)
    t = OpTest("sequence_concat", {"X": [("a", (xs[0], [upper, lens[0]])), ("b", (xs[1], [upper, lens[1]]))]},
               {"Out": (out, [upper, out_lens])})
    t.check_output()
    t.check_grad(["X"], "Out")


def test_concat_int64():
    xs = [np.arange(5, dtype="int64").reshape(5, 1), np.arange(10, 13, dtype="int64").reshape(3, 1)]
    out, out_lens = concat_ref(xs, [[3, 2], [1, 2]])
    OpTest("sequence_concat", {"X": [("a", (xs[0], [[3, 2]])), ("b", (xs[1], [[1, 2]]))]},
           {"Out": (out, [out_lens])}).check_output()


def test_concat_errors():
    a = (np.zeros((5, 2), "float32"), [[3, 2]])
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"sequence_concat: every input must have as many sequences \(at its last LoD level\) and "
                             r"LoD levels, got X\[0\] 'in_X_a' \[5, 2\] LoD \{\{0, 3, 5\}\}, X\[1\] 'in_X_b' \[5, 2\] "
                             r"LoD \{\{0, 1, 2, 5\}\}"):
        run_op("sequence_concat", {"X": [("a", a), ("b", (np.zeros((5, 2), "float32"), [[1, 1, 3]]))]}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"sequence_concat: the inputs' LoD levels above the last must be equal \(Out keeps "
                             r"them\), got X\[0\] 'in_X_a' \[3, 2\] LoD \{\{0, 1, 2\}\{0, 1, 3\}\}, "
                             r"X\[1\] 'in_X_b' \[3, 2\] LoD \{\{0, 2\}\{0, 1, 3\}\}"):
        run_op("sequence_concat", {"X": [("a", (np.zeros((3, 2), "float32"), [[1, 1], [1, 2]])),
                                         ("b", (np.zeros((3, 2), "float32"), [[2], [1, 2]]))]}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_concat: X 'in_X_b' \[5, 2\] must be a LoDTensor with "
                                                       r"at least 1 LoD level\(s\), got 0"):
        run_op("sequence_concat", {"X": [("a", a), ("b", np.zeros((5, 2), "float32"))]}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_concat: every input's rows must have the same size: "
                                                       r"X 'in_X_a' \[5, 2\] has 2 values a row, X 'in_X_b' \[5, 3\] "
                                                       r"has 3"):
        run_op("sequence_concat", {"X": [("a", a), ("b", (np.zeros((5, 3), "float32"), [[3, 2]]))]}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_concat: X needs at least two tensors, got 1"):
        run_op("sequence_concat", {"X": [("a", a)]}, ["Out"])


def test_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data("a", shape=[2], dtype="float32", lod_level=1)
        b = fluid.layers.data("b", shape=[2], dtype="float32", lod_level=1)
        out = fluid.layers.sequence_concat([a, b])
        assert out.shape == (-1, 2) and out.lod_level == 1
        with pytest.raises(TypeError, match=r"fluid.layers.sequence_concat: 'input' must be a list of Variables, "
                                            r"got Variable"):
            fluid.layers.sequence_concat(a)
        with pytest.raises(TypeError, match=r"fluid.layers.sequence_concat: 'input\[1\]' \(i\) must be int64 or "
                                            r"float32 or float64, got int32"):
            fluid.layers.sequence_concat([a, fluid.layers.data("i", shape=[2], dtype="int32", lod_level=1)])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_concat: X 'c' \[-1, 2\] is float64 but X 'a' "
                                                           r"\[-1, 2\] is float32"):
            fluid.layers.sequence_concat([a, fluid.layers.data("c", shape=[2], dtype="float64", lod_level=1)])
    av, bv = RNG.uniform(size=(3, 2)).astype("float32"), RNG.uniform(size=(4, 2)).astype("float32")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"a": (av, [[1, 2]]), "b": (bv, [[4, 0]])},
                                                  fetch_list=[out], return_numpy=False)
    np.testing.assert_array_equal(np.array(got), np.concatenate([av[:1], bv, av[1:]]))
    assert got.recursive_sequence_lengths() == [[5, 2]]
